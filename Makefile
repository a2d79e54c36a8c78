# Quick start: `make demo` and `make test` on a fresh machine (both install what is missing).
BUILD ?= build
JOBS ?= $(shell nproc)
DEMO_PROGRAM ?= softmax(causal(rope(Q, K, base=500000))) @ V
DEMO_SHAPE ?= 1,32,8,1024,1024,128

.PHONY: all deps configure build test demo gpu-test clean

all: build

deps:
	@tools/install_deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -LE gpu

gpu-test: build
	@ctest --test-dir $(BUILD) -L gpu -V

# The main job: a Llama-3-8B-style variant (RoPE base 500000, causal, GQA 32/8, D=128), checked
# against the float64 reference, then timed; on the GPU when there is one and the program runs
# there, else on the CPU (--device auto says which and why).
demo: build
	@$(BUILD)/bin/attnfuse run '$(DEMO_PROGRAM)' --shape $(DEMO_SHAPE) --dtype bf16 --device auto --check
	@$(BUILD)/bin/attnfuse bench '$(DEMO_PROGRAM)' --shape $(DEMO_SHAPE) --dtype bf16 --device auto

clean:
	rm -rf $(BUILD)
