# meld — plain Makefile. Variables you may override: CUDA_HOME, ARCH, PREFIX, CC, NVCC, CFLAGS.
#   make            libmeld.so, libmeld.a, tools
#   make test       CPU tests (+ sanitizers, device compile checks); GPU tests when GPUs exist
#   make bench      benchmark programs (build/bench/)
#   make examples   examples/*.c (build/examples/; examples/run.sh P build/examples/NAME)
#   make install PREFIX=/usr/local   (header, libraries, tools, lib/pkgconfig/meld.pc)

CUDA_HOME ?= /usr/local/cuda
ARCH      ?= -gencode=arch=compute_90a,code=sm_90a
PREFIX    ?= /usr/local
CC        ?= gcc
NVCC      ?= $(CUDA_HOME)/bin/nvcc
BUILD     ?= build

INCLUDES  := -Iinclude -Isrc -Isrc/host -I$(CUDA_HOME)/include
CFLAGS    ?= -O2 -g
CFLAGS    += -std=c11 -D_GNU_SOURCE -fPIC -Wall -Wextra -Werror -pthread $(INCLUDES)
NVCCFLAGS ?= -O3 -lineinfo
NVCC_SPILL_FLAGS := -Xptxas -warn-spills,-warn-lmem-usage
NVCCFLAGS += -std=c++17 $(ARCH) -Xcompiler -fPIC,-Wall,-Wextra -Werror all-warnings \
             $(NVCC_SPILL_FLAGS) -diag-suppress 177 $(INCLUDES)
LDLIBS    := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lpthread -ldl -lm -lstdc++
NV_LDLIBS := -L$(CUDA_HOME)/lib64 -Xlinker -rpath,$(CUDA_HOME)/lib64 -lcudart -lpthread -ldl -lm

HOST_SRCS := $(wildcard src/host/*.c)
CU_SRCS   := $(wildcard src/ops/*.cu)
HOST_OBJS := $(HOST_SRCS:%.c=$(BUILD)/obj/%.o)
CU_OBJS   := $(CU_SRCS:%.cu=$(BUILD)/obj/%.o)
DEV_HDRS  := $(wildcard src/device/*.cuh src/common/*.h)
LIB_SO    := $(BUILD)/lib/libmeld.so
LIB_A     := $(BUILD)/lib/libmeld.a

UNIT_SRCS := $(wildcard tests/unit/*.c)
MP_SRCS   := $(wildcard tests/mp/*.c)
GPU_SRCS  := $(wildcard tests/gpu/*.cu)
BENCH_SRCS:= $(wildcard bench/*.cu)
TOOL_SRCS := $(wildcard tools/*.c)
UNIT_BINS := $(UNIT_SRCS:tests/%.c=$(BUILD)/tests/%)
MP_BINS   := $(MP_SRCS:tests/%.c=$(BUILD)/tests/%)
GPU_BINS  := $(GPU_SRCS:tests/%.cu=$(BUILD)/tests/%)
BENCH_BINS:= $(BENCH_SRCS:bench/%.cu=$(BUILD)/bench/%)
TOOL_BINS := $(TOOL_SRCS:tools/%.c=$(BUILD)/bin/%)
ASAN_OBJS := $(HOST_SRCS:%.c=$(BUILD)/asan/%.o)
ASAN_BINS := $(UNIT_SRCS:tests/%.c=$(BUILD)/asan/tests/%) $(MP_SRCS:tests/%.c=$(BUILD)/asan/tests/%)
ASAN_FLAGS:= -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
TEST_COMMON := $(wildcard tests/common/*.c)
TSAN_FLAGS:= -fsanitize=thread -fno-omit-frame-pointer

.PHONY: all lib tools test test-cpu test-asan test-gpu test-gpu-sources test-header test-device bench examples install clean format
all: lib tools
lib: $(LIB_SO) $(LIB_A)
tools: $(TOOL_BINS)

# (host code includes device/*.cuh for shared structs such as gemm_params_t: a layout change
# there must rebuild it)
$(BUILD)/obj/%.o: %.c $(wildcard src/host/*.h) $(DEV_HDRS) include/meld.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.cu $(DEV_HDRS) $(wildcard src/host/*.h) include/meld.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# the attention's kernels (one source per head_dim) and what its host side shares with them
$(BUILD)/obj/src/ops/attention.o $(BUILD)/obj/src/ops/attention_d64.o $(BUILD)/obj/src/ops/attention_d128.o: \
    src/ops/attention_kernels.cuh src/ops/attention_int.h

$(LIB_SO): $(HOST_OBJS) $(CU_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $^ $(LDLIBS)

$(LIB_A): $(HOST_OBJS) $(CU_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/%: tools/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(LIB_A) $(LDLIBS)

# The fake libibverbs (tests/fake/fakeverbs.c: an RC HCA emulated in shared memory, loaded
# with dlopen) is built where Debian's libibverbs-dev provides <infiniband/verbs.h>; the mp
# tests get its path. Without the header they get -DMELD_NO_VERBS and test_fakeverbs says so.
HAVE_VERBS := $(shell test -f /usr/include/infiniband/verbs.h && echo 1)
FAKEVERBS  := $(BUILD)/tests/lib/libfakeverbs.so
ifeq ($(HAVE_VERBS),1)
MP_DEPS    := $(FAKEVERBS)
MP_DEFS    := -DFAKEVERBS_LIB='"$(abspath $(FAKEVERBS))"'
else
MP_DEPS    :=
MP_DEFS    := -DMELD_NO_VERBS
endif
$(FAKEVERBS): tests/fake/fakeverbs.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared $< -o $@

# CPU tests: cmocka (Debian libcmocka-dev).
$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_A) $(TEST_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $< $(TEST_COMMON) -o $@ $(LIB_A) -lcmocka $(LDLIBS)
$(BUILD)/tests/mp/%: tests/mp/%.c $(LIB_A) $(TEST_COMMON) $(MP_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MP_DEFS) -Itests $< $(TEST_COMMON) -o $@ $(LIB_A) -lcmocka $(LDLIBS)

# Same tests under AddressSanitizer + UndefinedBehaviorSanitizer (host code rebuilt).
$(BUILD)/asan/%.o: %.c $(wildcard src/host/*.h) $(DEV_HDRS) include/meld.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -c $< -o $@
$(BUILD)/asan/tests/unit/%: tests/unit/%.c $(ASAN_OBJS) $(CU_OBJS) $(TEST_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -Itests $< $(TEST_COMMON) -o $@ $(ASAN_OBJS) $(CU_OBJS) -lcmocka $(LDLIBS)
$(BUILD)/asan/tests/mp/%: tests/mp/%.c $(ASAN_OBJS) $(CU_OBJS) $(TEST_COMMON) $(MP_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) $(MP_DEFS) -Itests $< $(TEST_COMMON) -o $@ $(ASAN_OBJS) $(CU_OBJS) -lcmocka $(LDLIBS)

# GPU tests and benchmarks: CUDA C programs.
$(BUILD)/tests/gpu/%: tests/gpu/%.cu $(LIB_A) $(DEV_HDRS) $(wildcard tests/gpu/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Itests $< -o $@ $(LIB_A) -lcublas -lcublasLt $(NV_LDLIBS)
# test_signal's litmus and exchange kernels spill 64-112 bytes under nvcc 13.0 (call frames of the
# protocol's out-of-line failure paths): harmless in a test, so not an error there; the
# library's own device code stays spill-free (test-device).
$(BUILD)/tests/gpu/test_signal: NVCC_SPILL_FLAGS :=
$(BUILD)/bench/%: bench/%.cu $(LIB_A) $(DEV_HDRS) $(wildcard bench/*.h tests/gpu/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Ibench $< -o $@ $(LIB_A) -lcublas -lcublasLt $(NV_LDLIBS)

# bench_coll also times NCCL from C (the like-for-like baseline): -lnccl (headers and library
# in the default paths, or CUDA_HOME/lib64).
$(BUILD)/bench/bench_coll: bench/bench_coll.cu bench/nccl_baseline.h $(LIB_A) $(DEV_HDRS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Ibench $< -o $@ $(LIB_A) -lnccl $(NV_LDLIBS)

# bench_ag_gemm times NCCL + cuBLAS from C as the unfused baseline: -lnccl too.
$(BUILD)/bench/bench_ag_gemm: bench/bench_ag_gemm.cu bench/nccl_baseline.h $(LIB_A) $(DEV_HDRS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Ibench $< -o $@ $(LIB_A) -lnccl -lcublas -lcublasLt $(NV_LDLIBS)

bench: lib $(BENCH_BINS)

# examples/*.c: programs a user would write (C11, the public header and the CUDA runtime only);
# examples/run.sh P build/examples/NAME starts P ranks. make test also builds them against an
# installed prefix with pkg-config (tests/check_install.sh).
EXAMPLE_BINS := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
$(BUILD)/examples/%: examples/%.c examples/check.h include/meld.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) -O2 -std=c11 -Wall -Wextra -Werror -Iinclude -I$(CUDA_HOME)/include $< -o $@ $(LIB_A) $(LDLIBS)
examples: $(EXAMPLE_BINS)

# The public header alone, as C11 and as C++.
test-header:
	@mkdir -p $(BUILD)/tests
	$(CC) -std=c11 -Wall -Wextra -Werror -pedantic -Iinclude -I$(CUDA_HOME)/include -fsyntax-only tests/header/header_c.c
	g++ -std=c++11 -Wall -Wextra -Werror -Iinclude -I$(CUDA_HOME)/include -fsyntax-only tests/header/header_cpp.cpp
	@echo "[  PASSED  ] 2 test(s). (header compiles as C11 and C++)"

# Device code compiles for sm_90a with no spills and no ptxas performance warnings.
test-device: $(CU_OBJS)
	@tests/check_device.sh "$(NVCC) $(NVCCFLAGS)" $(CU_SRCS)

# The GPU tests' and benchmarks' sources through nvcc -cuda (no GPU needed; spills are allowed
# there, as in their builds: test_signal's litmus kernels spill).
test-gpu-sources:
	@NVCC="$(NVCC)" tests/check_gpu_sources.sh $(filter-out $(NVCC_SPILL_FLAGS),$(NVCCFLAGS))

test-cpu: lib $(UNIT_BINS) $(MP_BINS)
	@tests/run.sh cpu $(UNIT_BINS) $(MP_BINS) tests/unit/test_trace_stats.py tests/unit/test_python_capi.py tests/unit/test_trace_phases.py tests/unit/test_trace_png.py tests/unit/test_plot_coll.py

test-asan: $(ASAN_BINS)
	@ASAN_OPTIONS=detect_leaks=1 tests/run.sh asan $(ASAN_BINS)

test-gpu: lib $(GPU_BINS)
	@tests/gpu/run.sh

test: lib
	@tests/run_all.sh

# The version in meld.pc is meld.h's; consumers: cc app.c $$(pkg-config --cflags --libs meld)
# (the CUDA runtime too: meld's API takes its streams; a static link adds --static's Libs.private).
MELD_VERSION := $(shell awk '/define MELD_VERSION_(MAJOR|MINOR|PATCH) /{v = v (v == "" ? "" : ".") $$3} END{print v}' include/meld.h)
install: lib tools
	install -d $(PREFIX)/include $(PREFIX)/lib $(PREFIX)/lib/pkgconfig $(PREFIX)/bin
	install -m 644 include/meld.h $(PREFIX)/include/
	install -m 755 $(LIB_SO) $(PREFIX)/lib/
	install -m 644 $(LIB_A) $(PREFIX)/lib/
	$(if $(TOOL_BINS),install -m 755 $(TOOL_BINS) $(PREFIX)/bin/)
	printf '%s\n' 'prefix=$(abspath $(PREFIX))' 'includedir=$${prefix}/include' 'libdir=$${prefix}/lib' '' \
	  'Name: meld' 'Description: GPU-driven fused multi-GPU kernels for NVIDIA Hopper' 'Version: $(MELD_VERSION)' \
	  'Cflags: -I$${includedir} -I$(CUDA_HOME)/include' \
	  'Libs: -L$${libdir} -Wl,-rpath,$${libdir} -lmeld -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart' \
	  'Libs.private: -lpthread -ldl -lm -lstdc++' > $(PREFIX)/lib/pkgconfig/meld.pc

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD)

# The protocol's CPU simulation under ThreadSanitizer (src/common/proto.h is header-only, so
# the test links no library code): a missing happens-before edge is reported as a race.
TSAN_BINS := $(BUILD)/tsan/tests/unit/test_proto_threads
# test_proxy_ring runs the real proxy thread (src/host/proxy.c), so its TSan build links the
# host code rebuilt with -fsanitize=thread (an archive: only the objects it needs are linked).
TSAN_BINS += $(BUILD)/tsan/tests/unit/test_proxy_ring
TSAN_HOST_OBJS := $(HOST_SRCS:%.c=$(BUILD)/tsan/%.o)
$(BUILD)/tsan/src/%.o: src/%.c $(wildcard src/host/*.h src/common/*.h) include/meld.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TSAN_FLAGS) -c $< -o $@
$(BUILD)/tsan/lib/libmeld_host.a: $(TSAN_HOST_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/tsan/tests/unit/test_proxy_ring: tests/unit/test_proxy_ring.c $(BUILD)/tsan/lib/libmeld_host.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TSAN_FLAGS) -Itests $< -o $@ $(BUILD)/tsan/lib/libmeld_host.a -lcmocka $(LDLIBS)
.PHONY: test-tsan
$(BUILD)/tsan/tests/unit/%: tests/unit/%.c $(wildcard src/common/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TSAN_FLAGS) -Itests $< -o $@ -lcmocka -lpthread
# The transport test (proxy, tcp and ibverbs transports, their threads) with the fake HCA, all
# instrumented; slower, so with wider time bounds, and the fake's peers declared dead after 5 s.
# The fake's emulated DMA is not recorded as its thread's writes (its order runs through another
# process, which TSan cannot see): no suppressions.
ifeq ($(HAVE_VERBS),1)
TSAN_FAKE := $(BUILD)/tsan/tests/lib/libfakeverbs.so
TSAN_BINS += $(BUILD)/tsan/tests/mp/test_transport
$(TSAN_FAKE): tests/fake/fakeverbs.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TSAN_FLAGS) -shared $< -o $@
$(BUILD)/tsan/tests/mp/test_transport: tests/mp/test_transport.c $(BUILD)/tsan/lib/libmeld_host.a $(TSAN_FAKE) $(TEST_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TSAN_FLAGS) -Itests -DFAKEVERBS_LIB='"$(abspath $(TSAN_FAKE))"' -DTIMEOUT_MS=30000 \
	  -DCHILD_LIMIT_MS=90000 -DDETECT_MS=20000 $< $(TEST_COMMON) -o $@ $(BUILD)/tsan/lib/libmeld_host.a -lcmocka $(LDLIBS)
endif
test-tsan: $(TSAN_BINS)
	@FAKEVERBS_DEAD_MS=5000 TSAN_OPTIONS="halt_on_error=1 exitcode=66 $(TSAN_OPTIONS)" tests/run.sh tsan $(TSAN_BINS)
