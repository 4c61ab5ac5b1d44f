# Thin wrapper over CMake + CTest. `make bench` is the main job, `make test` the tests.
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
CMAKE_ARGS ?=
# CMake's generated makefiles recurse: without this every level prints "Entering
# directory" lines, about a hundred before `make bench` shows its first table.
export MAKEFLAGS += --no-print-directory

.PHONY: all bench test gpu-check comm-check install clean

all:
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The main job builds quietly (the compiler's lines go to $(BUILD)/build.log, shown only
# if the build fails), so its first screen is the benchmarks' own output.
bench:
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_ARGS) >/dev/null
	@echo "building into $(BUILD) (log: $(BUILD)/build.log)"
	@cmake --build $(BUILD) -j $(JOBS) >$(BUILD)/build.log 2>&1 || { tail -40 $(BUILD)/build.log; exit 1; }
	@$(BUILD)/warpspec demo

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
