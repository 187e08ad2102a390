# Thin wrapper: deps -> configure -> build -> run / test. Everything real is in CMake.
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build run test sanitize tsan experiments clean

all: build

deps:
	@scripts/deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >$(BUILD).configure.log 2>&1 || (cat $(BUILD).configure.log; exit 1)
	@grep "burstsim:" $(BUILD).configure.log || true

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/run-default.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

sanitize:
	@$(MAKE) --no-print-directory test BUILD=build-asan CMAKE_FLAGS="-DBURSTSIM_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"

# ThreadSanitizer over the tests labelled threads; any report fails the run (CUDA is left out: its
# kernels run no host threads, and nvcc takes no -fsanitize=thread).
tsan:
	@$(MAKE) --no-print-directory build BUILD=build-tsan CMAKE_FLAGS="-DBURSTSIM_TSAN=ON -DBURSTSIM_CUDA=OFF"
	@cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 $(TSAN_OPTIONS)" \
	  ctest --output-on-failure -j $(JOBS) -L threads
	@! grep -n "WARNING: ThreadSanitizer" build-tsan/Testing/Temporary/LastTest.log

experiments: build
	@scripts/experiments.sh $(BUILD)

clean:
	rm -rf build build-asan build-tsan build.configure.log build-asan.configure.log build-tsan.configure.log
