# Thin wrapper: deps -> configure -> build -> run / test. Everything real is in CMake.
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?=
# Warnings are errors in every build made through this Makefile (development, CI); a plain `cmake`
# build leaves them warnings (BURSTSIM_WERROR in CMakeLists.txt). `make WERROR=OFF ...` to relax.
WERROR ?= ON

.PHONY: all deps configure build run test sanitize tsan release clang experiments clean

all: build

deps:
	@scripts/deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DBURSTSIM_WERROR=$(WERROR) $(CMAKE_FLAGS) >$(BUILD).configure.log 2>&1 || (cat $(BUILD).configure.log; exit 1)
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

# The builds a packager or another compiler makes, built (not tested) with warnings as errors: Release
# (-O3) with GCC and CUDA as found, and Clang (CUDA off: nvcc compiles its host code with GCC).
release:
	@$(MAKE) --no-print-directory build BUILD=build-release CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Release"

clang:
	@$(MAKE) --no-print-directory build BUILD=build-clang \
	  CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Release -DBURSTSIM_CUDA=OFF -DCMAKE_C_COMPILER=clang"

experiments: build
	@scripts/experiments.sh $(BUILD)

clean:
	rm -rf build build-asan build-tsan build-release build-clang
	rm -f build.configure.log build-asan.configure.log build-tsan.configure.log build-release.configure.log \
	  build-clang.configure.log
