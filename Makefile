# Quick start: `make demo` and `make test` on a fresh machine (both install what is missing).
BUILD ?= build
JOBS ?= $(shell nproc)
DEMO_PROGRAM ?= softmax(causal(rope(Q, K, base=500000))) @ V
DEMO_SHAPE ?= 1,32,8,1024,1024,128

.PHONY: all deps configure build test demo gpu-test sanitize clean

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

# The CPU suite again under AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer, in a
# build folder of its own (~2 min of tests on 2 cores after a ~30 min build). Left out: the NVRTC
# compile-only tests, whose time is NVRTC's (minutes per test) and whose code (emitter, tile pass)
# the golden-source and launch-shape tests reach; and bench_abi_mirrors, a Python interpreter
# that cannot load an ASan-built libattnfuse_c.so without preloading the ASan runtime (it checks
# struct layouts, which sanitizers do not look at).
SAN_BUILD ?= build-sanitize
sanitize: deps
	@cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DATTNFUSE_SANITIZE=address;undefined" >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(SAN_BUILD) --output-on-failure -j $(JOBS) -LE gpu -E 'NvrtcCompile|bench_emit_decode_kernel|bench_abi_mirrors'

# The main job: a Llama-3-8B-style variant (RoPE base 500000, causal, GQA 32/8, D=128), checked
# against the float64 reference, then timed; on the GPU when there is one and the program runs
# there, else on the CPU (--device auto says which and why).
demo: build
	@$(BUILD)/bin/attnfuse run '$(DEMO_PROGRAM)' --shape $(DEMO_SHAPE) --dtype bf16 --device auto --check
	@$(BUILD)/bin/attnfuse bench '$(DEMO_PROGRAM)' --shape $(DEMO_SHAPE) --dtype bf16 --device auto

clean:
	rm -rf $(BUILD)
