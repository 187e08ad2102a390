# Thin wrapper: deps -> configure -> build -> run / test. Everything real is in CMake.
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build run test sanitize experiments clean

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

experiments: build
	@scripts/experiments.sh $(BUILD)

clean:
	rm -rf build build-asan build.configure.log build-asan.configure.log
