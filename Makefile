# Thin wrapper over CMake + CTest. `make bench` is the main job, `make test` the tests.
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
CMAKE_ARGS ?=

.PHONY: all bench test gpu-check comm-check install clean

all:
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

bench: all
	$(BUILD)/warpspec demo

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# On a GPU machine: tests, compute-sanitizer and benchmarks, logs under $(OUT).
gpu-check: all
	bash tests/gpu/run_all.sh $(BUILD)

# On a machine with 2+ GPUs: the communication tests and the sendrecv benchmark.
comm-check: all
	bash tests/gpu/run_comm.sh $(BUILD)

install: all
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
