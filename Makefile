# gpumemprof — build, test, install.  GNU make; outputs under build/.
# Honours CC, CFLAGS, LDFLAGS, PREFIX, DESTDIR; warnings are errors when CI=true.

CC ?= cc
PREFIX ?= /usr/local
DESTDIR ?=
CFLAGS ?= -O2 -g
BUILD := build

WARNINGS := -Wall -Wextra -Wshadow -Wformat=2 -Wundef -Wpointer-arith \
            -Wstrict-prototypes -Wmissing-prototypes -Wvla
ifeq ($(CI),true)
WARNINGS += -Werror
endif
BASE_CFLAGS := -std=gnu11 -D_GNU_SOURCE -fPIC -fvisibility=hidden \
               -Iinclude -Ibase -Irecorder -Icollectors $(WARNINGS)
ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS)
# Sanitizers for our own code only (the preload, the recorder, the tools and
# the test binaries), never for the programs the tests run under the preload:
# those crash on purpose.  Set by `make sanitize`.
SAN_CFLAGS ?=
CODE_CFLAGS = $(ALL_CFLAGS) $(SAN_CFLAGS)

PKG_CONFIG ?= pkg-config
JANSSON_CFLAGS = $(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)
JANSSON_LIBS = $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null || echo -ljansson)
CMOCKA_CFLAGS = $(shell $(PKG_CONFIG) --cflags cmocka 2>/dev/null)
CMOCKA_LIBS = $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null || echo -lcmocka)
DW_CFLAGS = $(shell $(PKG_CONFIG) --cflags libdw 2>/dev/null)
DW_LIBS = $(shell $(PKG_CONFIG) --libs libdw 2>/dev/null || echo -ldw -lelf)
# libiberty's demanglers (C++, and Rust's legacy and v0 manglings), static
DEMANGLE_LIBS = -liberty
# The parts of the C library a glibc before 2.34 keeps in files of their own
# (dlopen, pthread_create): linked only where they are such files, so on a
# newer glibc nothing more is loaded (the wheel is built on an older one).
LIBC_PARTS = -Wl,--push-state,--as-needed -ldl -lpthread -Wl,--pop-state

# The base (strings, files, time, logging, the JSON writer), the collectors
# and the recorder: one library, linked into the preload and the tools.
RECORDER_SRC := $(wildcard base/*.c) $(wildcard recorder/*.c) $(wildcard collectors/*.c)
RECORDER_OBJ := $(RECORDER_SRC:%.c=$(BUILD)/%.o)
RECORDER_LIB := $(BUILD)/libgpumemprof.a

# CUPTI injection is built where cupti.h is found (CUDA_HOME below).
CUDA_HOME ?= /usr/local/cuda
# (in the toolkit's include/, or in extras/CUPTI/include/ where older
# toolkits and some installs keep it).
CUPTI_INCLUDE := $(patsubst %/,%,$(dir $(firstword $(wildcard $(CUDA_HOME)/include/cupti.h \
                   $(CUDA_HOME)/extras/CUPTI/include/cupti.h))))
HAVE_CUPTI := $(CUPTI_INCLUDE)
# The preload in two rooms: hooks/ (the interposed functions, their tables
# and generic paths) and engine/ (what they call: episodes, bundles,
# stacks, the watchdog...), the hooks on the engine, never the reverse.
PRELOAD_SRC := $(filter-out $(if $(HAVE_CUPTI),,preload/hooks/cupti.c),\
                 $(wildcard preload/hooks/*.c preload/engine/*.c))
PRELOAD_INCLUDES := -Ipreload/engine -Ipreload/hooks
PRELOAD_OBJ := $(PRELOAD_SRC:%.c=$(BUILD)/%.o)
PRELOAD := $(BUILD)/libgpumemprof_preload.so

# gmp-inspect's rooms, each a folder with its header: read (bundles and
# rings), answer (what a bundle means), draw, export, and the verbs.
INSPECT_ROOMS := read answer draw export verbs
INSPECT_INCLUDES := $(INSPECT_ROOMS:%=-Itools/inspect/%)
INSPECT_SRC := $(foreach r,$(INSPECT_ROOMS),$(wildcard tools/inspect/$(r)/*.c))
INSPECT_OBJ := $(INSPECT_SRC:%.c=$(BUILD)/%.o)
INSPECT := $(BUILD)/gmp-inspect

RUN_TOOL := $(BUILD)/gmp-run
# GMP_TORCH_HISTORY's sitecustomize, where gmp-run finds it in the build tree
SITE := $(BUILD)/site/sitecustomize.py

# The recorder as a shared library, no hooks: what the Python package of the
# wheel calls (ctypes) to record and dump in a process without the preload.
# -Bsymbolic: its calls stay inside it where the preload, which exports the
# same functions, is loaded too.
SHARED_LIB := $(BUILD)/libgpumemprof.so

EXAMPLES := $(BUILD)/examples/grow-heap

# The Python bindings' structs, enums and flags, written from the public
# header (mk/c_types.py) where Python is: nothing of it copied by hand.
PY_TYPES := python/gpumemprof/_c_types.py
HAVE_PYTHON := $(shell command -v python3 2>/dev/null)

# The plain programs, and the allocator double the tests preload behind ours.
TEST_PROGRAMS := $(patsubst test/programs/%.c,$(BUILD)/test/programs/%,$(wildcard test/programs/*.c)) \
                 $(patsubst test/programs/%.cc,$(BUILD)/test/programs/%,$(wildcard test/programs/*.cc)) \
                 $(BUILD)/test/doubles/libmalloc_only.so

# Unit tests (test/unit/) check our code in-process or our tools on files:
# `make check` runs them in seconds.  Integration tests (test/integration/)
# run programs under the preload.  Both build to $(BUILD)/test/.
UNIT_SRC := $(wildcard test/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:test/unit/%.c=$(BUILD)/test/%)
INTEGRATION_SRC := $(wildcard test/integration/test_*.c)
INTEGRATION_BIN := $(INTEGRATION_SRC:test/integration/%.c=$(BUILD)/test/%)
TEST_BIN := $(UNIT_BIN) $(INTEGRATION_BIN)
TEST_SUPPORT := $(BUILD)/test/support.o $(BUILD)/test/deadline.o

.PHONY: all deps check test test-after-deps demo demo-after-deps bench gpu-check fuzz sanitize \
        unit-programs test-programs bench-programs install uninstall clean wheel docs docs-check native

# Our GPU hook prototypes against the real headers, where they are installed.
DECL_CHECKS := $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),$(BUILD)/check/cuda_decls.ok) \
               $(if $(wildcard $(CUDA_HOME)/include/cuda.h),$(BUILD)/check/cuda_driver_decls.ok) \
               $(if $(wildcard /usr/include/hip/hip_runtime_api.h),$(BUILD)/check/hip_decls.ok)

# The Slurm plugin (slurm/: srun --gmp), where Slurm's spank.h is installed
# (Debian: libslurm-dev); it links only libc.
SPANK_H ?= /usr/include/slurm/spank.h
SPANK_PLUGIN := $(if $(wildcard $(SPANK_H)),$(BUILD)/spank_gmp.so)

all: $(RECORDER_LIB) $(SHARED_LIB) $(PRELOAD) $(INSPECT) $(RUN_TOOL) $(SITE) $(EXAMPLES) $(DECL_CHECKS) \
     $(SPANK_PLUGIN) $(if $(HAVE_PYTHON),$(PY_TYPES))

# What the Python package holds (setup.py builds it: pip install .).
native: $(PRELOAD) $(INSPECT) $(RUN_TOOL) $(SHARED_LIB)

$(PY_TYPES): include/gpumemprof.h mk/c_types.py
	python3 mk/c_types.py $< $@

$(BUILD)/check/cuda_decls.ok: preload/hooks/check/cuda_decls.c preload/hooks/cuda_runtime_table.h \
                             preload/hooks/gpu_types.h base/gpu_results.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -fsyntax-only -Wall -Wextra -Werror -Ibase -I$(CUDA_HOME)/include $<
	@touch $@

$(BUILD)/check/cuda_driver_decls.ok: preload/hooks/check/cuda_driver_decls.c \
                                     preload/hooks/cuda_driver_table.h preload/hooks/gpu_types.h \
                                     preload/hooks/gpu_family.h base/gpu_results.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -fsyntax-only -Wall -Wextra -Werror -Iinclude -Ibase -Irecorder \
	    $(PRELOAD_INCLUDES) -isystem $(CUDA_HOME)/include $<
	@touch $@

$(BUILD)/check/hip_decls.ok: preload/hooks/check/hip_decls.c preload/hooks/hip_table.h \
                            preload/hooks/gpu_types.h base/gpu_results.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -fsyntax-only -Wall -Wextra -Werror -Ibase $<
	@touch $@

# Set-up is a step of its own: `make deps` installs the Debian packages the
# build and the tests need (mk/ensure-deps.sh).  `make demo` and `make test`
# run it, then build in a second make that sees what it installed: the
# wildcards above decide which checks and smoke tests are built.
deps:
	@sh mk/ensure-deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CODE_CFLAGS) $(ROOM_CFLAGS) $(JANSSON_CFLAGS) -MMD -MP -c $< -o $@

$(RECORDER_LIB): $(RECORDER_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# The interposer links only libc: every GPU library is found at run time.
# -fini names no symbol, so there is no DT_FINI: the C runtime's _fini is an
# empty function at the far end of the text, and calling it cost every
# process a page fault at exit (our destructor runs from .fini_array).
# noseparate-code maps the library as two segments, code with its
# read-only data and the data, where separate-code makes four: each
# segment is an mmap at every exec and a mapping that every fork copies
# and every exit tears down, 3% of a short process's start here
# (docs/performance.md).  The data stays unexecutable, relro read-only.
# mk/preload_layout.ld puts what every start and exit writes in .bss on
# the page the loader writes anyway.
$(PRELOAD): $(PRELOAD_OBJ) $(RECORDER_OBJ) mk/preload_layout.ld
	$(CC) $(CODE_CFLAGS) $(LDFLAGS) -shared -Wl,--no-undefined -Wl,-z,nodelete \
	    -Wl,-z,noseparate-code -Wl,-Bsymbolic-functions -Wl,-fini=gmp_no_such_symbol \
	    -Wl,-T,mk/preload_layout.ld \
	    -o $@ $(PRELOAD_OBJ) $(RECORDER_OBJ) $(LIBC_PARTS)

# The files that run before the ASan runtime has mapped its shadow (it calls
# our dlsym and malloc while it starts; TSan's calls our mmap) take
# BOOT_SAN_CFLAGS instead.
PRELOAD_BOOT := libc libc_real dlsym host_counters sizes next mmap_heap
BOOT_SAN_CFLAGS ?= $(SAN_CFLAGS)
$(BUILD)/preload/%.o: preload/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PRELOAD_INCLUDES) \
	    $(if $(filter $(PRELOAD_BOOT),$(notdir $*)),$(BOOT_SAN_CFLAGS),$(SAN_CFLAGS)) \
	    -ftls-model=initial-exec -MMD -MP -c $< -o $@

$(BUILD)/preload/hooks/cupti.o: ALL_CFLAGS += -isystem $(CUDA_HOME)/include -isystem $(CUPTI_INCLUDE)

# (each room finds the headers of the rooms it builds on)
$(INSPECT_OBJ): ROOM_CFLAGS := $(INSPECT_INCLUDES)
$(INSPECT): $(INSPECT_OBJ) $(RECORDER_LIB)
	$(CC) $(CODE_CFLAGS) $(LDFLAGS) -o $@ $(INSPECT_OBJ) $(RECORDER_LIB) $(JANSSON_LIBS) $(DW_LIBS) $(DEMANGLE_LIBS) -lm $(LIBC_PARTS)

# with the recorder's verdict on a bundle, the one triage reads
SPANK_SRC := $(wildcard slurm/*.c) recorder/verdict.c base/json_text.c base/fds.c
$(BUILD)/spank_gmp.so: $(SPANK_SRC) slurm/spank_gmp.h recorder/verdict.h base/json_text.h base/util.h
	@mkdir -p $(@D)
	$(CC) $(CODE_CFLAGS) $(LDFLAGS) -shared -Wl,--no-undefined \
	    -Wl,--unresolved-symbols=ignore-in-object-files -o $@ $(SPANK_SRC)

$(SHARED_LIB): $(RECORDER_OBJ)
	$(CC) $(CODE_CFLAGS) $(LDFLAGS) -shared -Wl,--no-undefined -Wl,-soname,libgpumemprof.so \
	    -Wl,-Bsymbolic -o $@ $(RECORDER_OBJ) $(LIBC_PARTS)

RUN_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/run/*.c))
$(RUN_TOOL): $(RUN_OBJ) $(RECORDER_LIB)
	$(CC) $(CODE_CFLAGS) $(LDFLAGS) -o $@ $(RUN_OBJ) $(RECORDER_LIB) $(LIBC_PARTS)

$(BUILD)/examples/%: examples/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fno-builtin $(LDFLAGS) -o $@ $<

$(BUILD)/test/support.o $(BUILD)/test/deadline.o: $(BUILD)/test/%.o: test/%.c test/support.h
	@mkdir -p $(dir $@)
	$(CC) $(CODE_CFLAGS) $(CMOCKA_CFLAGS) $(JANSSON_CFLAGS) -c $< -o $@

TEST_LINK = $(CC) $(CODE_CFLAGS) -Itest $(CMOCKA_CFLAGS) $(JANSSON_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(TEST_SUPPORT) $(RECORDER_LIB) $(CMOCKA_LIBS) $(JANSSON_LIBS) -lpthread
# the headers tests share among themselves (fixtures, a common runner)
TEST_HEADERS := $(wildcard test/unit/*.h test/integration/*.h)
$(BUILD)/test/test_%: test/unit/test_%.c test/support.h $(TEST_HEADERS) $(TEST_SUPPORT) $(RECORDER_LIB)
	@mkdir -p $(dir $@)
	$(TEST_LINK)
$(BUILD)/test/test_%: test/integration/test_%.c test/support.h $(TEST_HEADERS) $(TEST_SUPPORT) \
                      $(RECORDER_LIB)
	@mkdir -p $(dir $@)
	$(TEST_LINK)
# It stands in for slurmstepd (with spank_standin.c): the plugin it loads
# calls Slurm's functions in it.
$(BUILD)/test/test_spank: test/integration/test_spank.c test/integration/spank_standin.c \
                          test/integration/spank_standin.h test/support.h $(TEST_SUPPORT) \
                          $(RECORDER_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CODE_CFLAGS) -Itest $(CMOCKA_CFLAGS) $(JANSSON_CFLAGS) $(LDFLAGS) -rdynamic -o $@ $< \
	    $(if $(wildcard $(SPANK_H)),test/integration/spank_standin.c) $(TEST_SUPPORT) \
	    $(RECORDER_LIB) $(CMOCKA_LIBS) $(JANSSON_LIBS) -lpthread

# Plain programs the integration tests run under the preload.  -fno-builtin:
# the compiler must not elide the allocations they exist to make.
$(BUILD)/test/programs/%: test/programs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fno-builtin $(LDFLAGS) -o $@ $< -lpthread -ldl
# It stands in for an interpreter, whose symbols are found in its own
# dynamic symbol table.
$(BUILD)/test/programs/fake_cpython: LDFLAGS += -Wl,--export-dynamic

CXX ?= c++
$(BUILD)/test/programs/%: test/programs/%.cc
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -Wall -Wextra $(if $(filter true,$(CI)),-Werror) $(LDFLAGS) -o $@ $<

# Test doubles of the CUDA driver (libcuda.so.1), the runtime over it
# (libcudart.so.13, finding the driver beside itself as the real one finds
# the system's) and HIP (-Bsymbolic: like the real driver, cuGetProcAddress
# hands out the library's own functions even when the preload exports the
# same names); the GPU programs built against them; and smoke
# programs against the real libraries where they are installed.
DOUBLES := $(BUILD)/test/doubles
DOUBLE_FLAGS = $(ALL_CFLAGS) -Wno-missing-prototypes -shared
GPU_TESTS := $(BUILD)/test/gpu/gpu_oom_cuda $(BUILD)/test/gpu/gpu_oom_cuda_fp \
             $(BUILD)/test/gpu/gpu_oom_hip \
             $(BUILD)/test/gpu/held $(DOUBLES)/libnvidia-ml.so.1 \
             $(BUILD)/test/gpu/driver_oom $(BUILD)/test/gpu/driver_direct \
             $(if $(HAVE_CUPTI),$(DOUBLES)/libcupti.so.13) \
             $(if $(wildcard $(CUDA_HOME)/bin/nvcc),$(BUILD)/test/gpu/static_cudart) \
             $(if $(wildcard $(CUDA_HOME)/lib64/libcudart.so),$(BUILD)/test/gpu/gpu_smoke_cuda) \
             $(if $(wildcard /usr/include/hip/hip_runtime_api.h),$(BUILD)/test/gpu/gpu_smoke_hip)

$(DOUBLES)/libcuda.so.1: test/doubles/fake_cuda.c test/doubles/fake_device.h
	@mkdir -p $(dir $@)
	$(CC) $(DOUBLE_FLAGS) -Wl,-Bsymbolic -Wl,-soname,libcuda.so.1 -o $@ $< -lpthread -ldl
	ln -sf libcuda.so.1 $(DOUBLES)/libcuda.so

$(DOUBLES)/libnvidia-ml.so.1: test/doubles/fake_nvml.c test/doubles/fake_device.h
	@mkdir -p $(dir $@)
	$(CC) $(DOUBLE_FLAGS) -Wl,-soname,libnvidia-ml.so.1 -o $@ $< -lpthread -ldl

$(DOUBLES)/libcudart.so.13: test/doubles/fake_cudart.c $(DOUBLES)/libcuda.so.1
	$(CC) $(DOUBLE_FLAGS) -Wl,-soname,libcudart.so.13 -Wl,-rpath,'$$ORIGIN' -o $@ $< -lpthread -ldl
	ln -sf libcudart.so.13 $(DOUBLES)/libcudart.so

$(DOUBLES)/libcupti.so.13: test/doubles/fake_cupti.c $(DOUBLES)/libcuda.so.1
	$(CC) $(DOUBLE_FLAGS) -isystem $(CUDA_HOME)/include -isystem $(CUPTI_INCLUDE) \
	    -Wl,-soname,libcupti.so.13 -o $@ $< -ldl

# Stand-ins for frameworks' libraries, by the names the preload looks for
# before it takes an OOM line on stderr for a bundle of its own.
SPEAKERS := $(addprefix $(DOUBLES)/speakers/,libtorch_cpu.so _multiarray_umath.so \
              libcupy_standin.so xla_extension.so libtensorflow_framework.so libjvm.so \
              libcudart_standin.so)
$(SPEAKERS): test/doubles/speaker.c
	@mkdir -p $(dir $@)
	$(CC) $(DOUBLE_FLAGS) -o $@ $<

$(DOUBLES)/libmalloc_only.so: test/doubles/malloc_only.c
	@mkdir -p $(dir $@)
	$(CC) $(DOUBLE_FLAGS) -fvisibility=hidden -o $@ $<

$(DOUBLES)/libamdhip64.so.5: test/doubles/fake_hip.c test/doubles/fake_device.h
	@mkdir -p $(dir $@)
	$(CC) $(DOUBLE_FLAGS) -Wl,-soname,libamdhip64.so.5 -o $@ $< -lpthread
	ln -sf libamdhip64.so.5 $(DOUBLES)/libamdhip64.so

GPU_PROGRAM_FLAGS = $(ALL_CFLAGS) -fno-builtin $(LDFLAGS)
DOUBLES_RPATH = -L$(DOUBLES) -Wl,-rpath,$(abspath $(DOUBLES))
$(BUILD)/test/gpu/gpu_oom_cuda: test/gpu/gpu_oom.c test/gpu/events.h $(DOUBLES)/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(GPU_PROGRAM_FLAGS) -o $@ $< $(DOUBLES_RPATH) -lcudart -lpthread -ldl

$(BUILD)/test/gpu/gpu_oom_cuda_fp: test/gpu/gpu_oom.c test/gpu/events.h $(DOUBLES)/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(GPU_PROGRAM_FLAGS) -fno-omit-frame-pointer -o $@ $< $(DOUBLES_RPATH) -lcudart -lpthread -ldl

$(BUILD)/test/gpu/held: test/gpu/held.c $(DOUBLES)/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(GPU_PROGRAM_FLAGS) -o $@ $< $(DOUBLES_RPATH) -lcudart -ldl

$(BUILD)/test/gpu/gpu_oom_hip: test/gpu/gpu_oom.c test/gpu/events.h $(DOUBLES)/libamdhip64.so.5
	@mkdir -p $(dir $@)
	$(CC) $(GPU_PROGRAM_FLAGS) -DUSE_HIP -o $@ $< $(DOUBLES_RPATH) -lamdhip64 -lpthread -ldl

# The driver program reaches libcuda as static cudart and PyTorch do (dlopen,
# dlsym, cuGetProcAddress); its twin links libcuda directly.  The probe
# library looks things up with RTLD_NEXT from an object loaded after us.
$(BUILD)/test/gpu/libnext_probe.so: test/gpu/next_probe.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $< -ldl

$(BUILD)/test/gpu/driver_oom: test/gpu/driver_oom.c test/gpu/events.h $(DOUBLES)/libcudart.so.13 \
                              $(BUILD)/test/gpu/libnext_probe.so
	$(CC) $(GPU_PROGRAM_FLAGS) -o $@ $< $(DOUBLES_RPATH) -lcudart \
	    -L$(BUILD)/test/gpu -Wl,-rpath,$(abspath $(BUILD)/test/gpu) -lnext_probe -lpthread -ldl

$(BUILD)/test/gpu/driver_direct: test/gpu/driver_oom.c test/gpu/events.h $(DOUBLES)/libcuda.so.1 \
                                 $(BUILD)/test/gpu/libnext_probe.so
	$(CC) $(GPU_PROGRAM_FLAGS) -DDIRECT_LINK -o $@ $< $(DOUBLES_RPATH) -lcuda \
	    -L$(BUILD)/test/gpu -Wl,-rpath,$(abspath $(BUILD)/test/gpu) -lnext_probe -lpthread -ldl

# nvcc's default: cudart linked statically, reaching libcuda only by dlopen.
$(BUILD)/test/gpu/static_cudart: test/gpu/static_cudart.cu
	@mkdir -p $(dir $@)
	$(CUDA_HOME)/bin/nvcc -o $@ $< || { rm -f $@; echo "nvcc failed: the static-cudart test skips"; }

$(BUILD)/test/gpu/gpu_smoke_cuda: test/gpu/gpu_smoke.c
	@mkdir -p $(dir $@)
	$(CC) $(GPU_PROGRAM_FLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart -Wl,-rpath,$(CUDA_HOME)/lib64

$(BUILD)/test/gpu/gpu_smoke_hip: test/gpu/gpu_smoke.c
	@mkdir -p $(dir $@)
	$(CC) $(GPU_PROGRAM_FLAGS) -DUSE_HIP -o $@ $< -lamdhip64

# libFuzzer harnesses (test/fuzz/), built with clang where it can link one:
# the bundle reader, the ring-file readers, the configuration.  Each runs
# FUZZ_SECONDS in `make test`, all side by side.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
HAVE_FUZZ := $(shell printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' | $(FUZZ_CC) -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null && echo yes)
FUZZ_CFLAGS = -std=gnu11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
              -fsanitize=address,undefined -fno-sanitize-recover=undefined \
              -Iinclude -Ibase -Irecorder -Icollectors $(INSPECT_INCLUDES) $(JANSSON_CFLAGS)
FUZZ_LIB_SRC := $(RECORDER_SRC) $(filter-out tools/inspect/verbs/gmp_inspect.c,$(INSPECT_SRC))
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(BUILD)/fuzz/obj/%.o)
FUZZERS := $(if $(HAVE_FUZZ),$(BUILD)/fuzz/fuzz_bundle $(BUILD)/fuzz/fuzz_ring $(BUILD)/fuzz/fuzz_config)

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(BUILD)/fuzz/fuzz_%: test/fuzz/fuzz_%.c test/fuzz/fuzz_common.h $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJ) $(JANSSON_LIBS) \
	    $(DW_LIBS) $(DEMANGLE_LIBS) -lm -lpthread

.SECONDARY: $(FUZZ_LIB_OBJ)

fuzz: $(FUZZERS)
	@if [ -z "$(HAVE_FUZZ)" ]; then echo "fuzz: $(FUZZ_CC) cannot build a libFuzzer harness here; skipped"; \
	else sh test/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS); fi

# Every test binary runs even when one fails; the exit status says if any did.
# Then the conformance suite (test/conformance/run.sh): real software run
# bare and under the preload, compared.
# The same tests again under the sanitizers (SANITIZE=0 skips them).  A
# preload built with a sanitizer is loaded with the sanitizer's runtime after
# it (LD_PRELOAD) into the uninstrumented programs the tests run (they crash
# and run out of memory on purpose); its bootstrap files run before the
# runtime has its shadow memory and are built without it.  So: all the tests
# with ASan+UBSan in everything of ours (test binaries, recorder, gmp-inspect,
# preload); those under `ulimit -v` skip there (no shadow fits), so all the
# tests once more with the preload under UBSan alone; then under TSan the
# ring's 8-writer test, triage's tests with gmp-inspect under TSan (its
# reader threads) and, with the preload under TSan, the concurrency tests
# (test_stress, test_gpu).  TSan's function entry hooks are left out:
# our malloc runs inside TSan's thread start, before it can keep a stack.
# test_noalloc replaces malloc itself: it runs only as built.  Then the
# fuzzers, FUZZ_SECONDS each (skipped, with a line, where clang cannot build
# them).
SANITIZE ?= 1
SAN_COMMON := -O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=all
ASAN_BUILD := $(BUILD)/asan
UBSAN_BUILD := $(BUILD)/ubsan
TSAN_BUILD := $(BUILD)/tsan
ASAN_RUNTIME = $(realpath $(shell $(CC) -print-file-name=libasan.so))
TSAN_RUNTIME = $(realpath $(shell $(CC) -print-file-name=libtsan.so))
SAN_UNIT := $(filter-out %/test_noalloc,$(TEST_BIN:$(BUILD)/%=$(ASAN_BUILD)/%))
TSAN_UNIT := $(BUILD)/test/test_stress $(BUILD)/test/test_gpu
SAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

unit-programs: all $(TEST_BIN)
test-programs: all $(TEST_PROGRAMS) $(GPU_TESTS) $(SPEAKERS)

# A stage whose sanitizer runtime is missing prints a line and is skipped.
sanitize: unit-programs
	@$(MAKE) --no-print-directory -s BUILD=$(ASAN_BUILD) \
	    SAN_CFLAGS="$(SAN_COMMON) -fsanitize=address,undefined" \
	    BOOT_SAN_CFLAGS="$(SAN_COMMON) -fsanitize=undefined" unit-programs test-programs
	@$(MAKE) --no-print-directory -s BUILD=$(UBSAN_BUILD) \
	    SAN_CFLAGS="$(SAN_COMMON) -fsanitize=undefined" test-programs
	@$(MAKE) --no-print-directory -s BUILD=$(TSAN_BUILD) \
	    SAN_CFLAGS="$(SAN_COMMON) -fsanitize=thread -Wno-tsan --param=tsan-instrument-func-entry-exit=0" \
	    BOOT_SAN_CFLAGS="$(SAN_COMMON)" test-programs $(TSAN_BUILD)/test/test_ring \
	    $(TSAN_BUILD)/test/test_clock
	@failed=0; asan="$(ASAN_RUNTIME)"; tsan="$(TSAN_RUNTIME)"; \
	if [ -n "$$asan" ]; then \
	    echo "== under ASan+UBSan, the preload included"; \
	    $(SAN_ENV) GMP_TEST_SAN_RUNTIME="$$asan" sh test/run.sh $(ASAN_BUILD) \
	        $(abspath $(ASAN_BUILD)/gmp-inspect) $(SAN_UNIT) || failed=1; \
	else echo "SKIP: $(CC) has no libasan.so to preload; the preload runs under UBSan alone"; fi; \
	echo "== under ASan+UBSan, the preload under UBSan alone"; \
	$(SAN_ENV) sh test/run.sh $(UBSAN_BUILD) $(abspath $(ASAN_BUILD)/gmp-inspect) $(SAN_UNIT) || failed=1; \
	echo "== the ring and the clock under TSan, and triage's reader threads"; \
	TSAN_OPTIONS=halt_on_error=1 sh test/run.sh $(UBSAN_BUILD) $(abspath $(INSPECT)) \
	    $(TSAN_BUILD)/test/test_ring $(TSAN_BUILD)/test/test_clock || failed=1; \
	TSAN_OPTIONS=halt_on_error=1 sh test/run.sh $(UBSAN_BUILD) \
	    $(abspath $(TSAN_BUILD)/gmp-inspect) $(BUILD)/test/test_triage || failed=1; \
	if [ -n "$$tsan" ]; then \
	    echo "== the concurrency tests with the preload under TSan"; \
	    GMP_TEST_SAN_RUNTIME="$$tsan" sh test/run.sh $(TSAN_BUILD) $(abspath $(INSPECT)) \
	        $(TSAN_UNIT) || failed=1; \
	else echo "SKIP: $(CC) has no libtsan.so to preload; no concurrency tests under TSan"; fi; \
	exit $$failed

test:
	@sh mk/ensure-deps.sh
	@$(MAKE) --no-print-directory test-after-deps

# The inner loop: the unit tests alone, as built (no set-up step).
check: all $(UNIT_BIN)
	@sh mk/check-layers.sh
	@bash test/unit/completion_check.sh $(BUILD)
	@CC="$(CC)" python3 test/unit/c_types_check.py $(BUILD)
	@python3 test/unit/preload_pages_check.py $(BUILD)
	@sh test/run.sh $(BUILD) $(abspath $(INSPECT)) $(UNIT_BIN)

# Each stage that fails is named on the last line, with what failed in it
# (the names its runner writes to GMP_TEST_FAILED_LOG): no log to grep.
FAILED_LOG := $(BUILD)/failed-tests.txt
test-after-deps: all $(TEST_BIN) $(TEST_PROGRAMS) $(GPU_TESTS) $(SPEAKERS) $(FUZZERS) \
                 $(BUILD)/bench/device_pairs
	@rm -f $(FAILED_LOG); failed=0; names=""; \
	stage() { name=$$1; shift; "$$@" && return; \
	    which=$$(tr '\n' ' ' 2>/dev/null <$(FAILED_LOG) | sed 's/ *$$//'); rm -f $(FAILED_LOG); \
	    failed=$$((failed+1)); names="$$names$${names:+; }$$name$${which:+ ($$which)}"; }; \
	GMP_TEST_FAILED_LOG=$(abspath $(FAILED_LOG)); export GMP_TEST_FAILED_LOG; \
	stage "layers" sh mk/check-layers.sh; \
	stage "C types" env CC="$(CC)" python3 test/unit/c_types_check.py $(BUILD); \
	stage "preload pages" python3 test/unit/preload_pages_check.py $(BUILD); \
	stage "completion" bash test/unit/completion_check.sh $(BUILD); \
	for v in 3.14 3.15; do sh mk/debian-python.sh $(BUILD) $$v; done; \
	GMP_TEST_TORCH_PYTHON=$$(sh mk/torch-venv.sh); export GMP_TEST_TORCH_PYTHON; \
	stage "test programs" sh test/run.sh $(BUILD) $(abspath $(INSPECT)) $(TEST_BIN); \
	echo "== conformance: real software, bare and under the preload"; \
	stage "conformance" sh test/conformance/run.sh $(BUILD); \
	echo "== gpu-check: the real-GPU check's own path here, and its C cases against the doubles"; \
	stage "gpu-check" python3 test/gpu_check/gpu_check.py --build $(BUILD) --out $(BUILD)/gpu-check; \
	stage "gpu-check on the doubles" python3 test/gpu_check/gpu_check.py --build $(BUILD) \
	    --out $(BUILD)/gpu-check-doubles --doubles $(DOUBLES); \
	echo "== Slurm: srun --gmp and sbatch --gmp in a single-node Slurm stood up for the test"; \
	stage "Slurm" sh test/slurm/run.sh $(BUILD); \
	echo "== the wheel: built, installed with pip into a fresh venv, used as a Python user would"; \
	stage "wheel" sh test/wheel/run.sh $(BUILD); \
	echo "== docs: every command README.md and docs/ show, run as shown"; \
	stage "docs" $(MAKE) --no-print-directory docs-check; \
	if [ "$(SANITIZE)" != 0 ]; then stage "sanitizers" $(MAKE) --no-print-directory sanitize; fi; \
	echo "== fuzzing, $(FUZZ_SECONDS) s each"; \
	if [ -z "$(HAVE_FUZZ)" ]; then echo "SKIP: $(FUZZ_CC) cannot build a libFuzzer harness here"; \
	else stage "fuzzing" sh test/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS); fi; \
	if [ $$failed -ne 0 ]; then echo "$$failed test stage(s) failed: $$names"; exit 1; fi; \
	echo "all test stages passed"

# The real-GPU check (test/gpu_check/): on a machine with an NVIDIA GPU,
# PyTorch, CuPy and JAX; needs only a C compiler and the CUDA toolkit to
# build.  Results and bundles under $OUT when set, else $(BUILD)/gpu-check;
# GPU_CHECK_ONLY=1,7 runs those cases alone.  Case 15 exports case 19's
# bundle with gmp-inspect where `make all` built it (it needs jansson),
# and skips with a line where it cannot.  Case 13 times the preload's own
# work a pair on the bench's pairs program against the cudart double.
gpu-check: $(PRELOAD) $(RUN_TOOL) $(SHARED_LIB) $(BUILD)/bench/device_pairs
	@python3 test/gpu_check/gpu_check.py --build $(BUILD) --only "$(GPU_CHECK_ONLY)"

# The wheel (mk/wheel.sh): the preload, the tools, the recorder library and
# the Python package (python/) in dist/, libraries vendored by auditwheel.
wheel: all
	@sh mk/wheel.sh $(BUILD)

# The generated part of docs/ (mk/docs.sh): the table of GMP_* variables,
# from the option list of recorder/config.c.
$(BUILD)/mk/config-table: mk/config_table.c $(RECORDER_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(RECORDER_LIB)

docs: $(BUILD)/mk/config-table
	@sh mk/docs.sh $(BUILD)

# Every command README.md, docs/ and the man pages' EXAMPLES show, run as
# shown in a scratch directory, each exit status checked
# (test/docs/run_doc_commands.py).  `make test` runs it after the wheel's
# stage, whose wheel the pages' Python commands use.
DOC_PAGES := README.md $(wildcard docs/*.md) $(wildcard docs/man/*.1)
docs-check: all
	@GMP_BUILD=$(BUILD) python3 test/docs/test_run_doc_commands.py
	@python3 test/docs/run_doc_commands.py --build $(BUILD) $(DOC_PAGES)

demo:
	@sh mk/ensure-deps.sh
	@$(MAKE) --no-print-directory demo-after-deps

demo-after-deps: all
	@sh examples/demo.sh $(BUILD)

# Benchmarks (docs/performance.md): built with the same flags, run side by side
# with the peers this machine has.
BENCH_PROGRAMS := $(BUILD)/bench/churn $(BUILD)/bench/device_pairs $(BUILD)/bench/rss \
                  $(BUILD)/bench/recorder_bench $(BUILD)/bench/libempty.so $(BUILD)/bench/timed \
                  $(BUILD)/bench/libforward.so $(BUILD)/bench/start_pairs
$(BUILD)/bench/churn $(BUILD)/bench/rss $(BUILD)/bench/timed $(BUILD)/bench/start_pairs: \
        $(BUILD)/bench/%: bench/%.c bench/median.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fno-builtin $(LDFLAGS) -o $@ $< -lpthread -ldl
$(BUILD)/bench/libempty.so: bench/empty.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -shared -o $@ $<
$(BUILD)/bench/libforward.so: bench/forward.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -shared -o $@ $< -ldl
$(BUILD)/bench/device_pairs: bench/device_pairs.c $(DOUBLES)/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(DOUBLES_RPATH) -lcudart
$(BUILD)/bench/recorder_bench: bench/recorder_bench.c $(RECORDER_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(RECORDER_LIB) -lpthread

bench-programs: all $(BENCH_PROGRAMS)

bench: bench-programs
	@sh bench/run.sh $(BUILD)

$(SITE): python/gpumemprof/_site/sitecustomize.py
	@mkdir -p $(dir $@)
	cp $< $@

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib
	install -d $(DESTDIR)$(PREFIX)/share/gpumemprof/site
	install -m 0644 $(SITE) $(DESTDIR)$(PREFIX)/share/gpumemprof/site/sitecustomize.py
	install -m 0755 $(INSPECT) $(DESTDIR)$(PREFIX)/bin/gmp-inspect
	install -m 0755 $(RUN_TOOL) $(DESTDIR)$(PREFIX)/bin/gmp-run
	install -m 0755 $(PRELOAD) $(DESTDIR)$(PREFIX)/lib/libgpumemprof_preload.so
	install -m 0644 include/gpumemprof.h $(DESTDIR)$(PREFIX)/include/gpumemprof.h
	install -m 0644 $(RECORDER_LIB) $(DESTDIR)$(PREFIX)/lib/libgpumemprof.a
	install -m 0755 $(SHARED_LIB) $(DESTDIR)$(PREFIX)/lib/libgpumemprof.so
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0644 docs/man/gmp-inspect.1 docs/man/gmp-run.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 0644 tools/completion/gmp-inspect.bash tools/completion/gmp-run.bash \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions/
ifneq ($(SPANK_PLUGIN),)
	install -d $(DESTDIR)$(PREFIX)/lib/gpumemprof
	install -m 0755 $(SPANK_PLUGIN) $(DESTDIR)$(PREFIX)/lib/gpumemprof/spank_gmp.so
	@echo "Slurm: add to plugstack.conf:  optional $(PREFIX)/lib/gpumemprof/spank_gmp.so"
endif

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/gmp-inspect $(DESTDIR)$(PREFIX)/bin/gmp-run \
	      $(DESTDIR)$(PREFIX)/lib/libgpumemprof_preload.so \
	      $(DESTDIR)$(PREFIX)/include/gpumemprof.h \
	      $(DESTDIR)$(PREFIX)/lib/libgpumemprof.a $(DESTDIR)$(PREFIX)/lib/libgpumemprof.so \
	      $(DESTDIR)$(PREFIX)/share/man/man1/gmp-inspect.1 $(DESTDIR)$(PREFIX)/share/man/man1/gmp-run.1 \
	      $(DESTDIR)$(PREFIX)/share/gpumemprof/site/sitecustomize.py \
	      $(DESTDIR)$(PREFIX)/share/bash-completion/completions/gmp-inspect.bash \
	      $(DESTDIR)$(PREFIX)/share/bash-completion/completions/gmp-run.bash \
	      $(DESTDIR)$(PREFIX)/lib/gpumemprof/spank_gmp.so
	-rmdir $(DESTDIR)$(PREFIX)/lib/gpumemprof 2>/dev/null
	-rmdir $(DESTDIR)$(PREFIX)/share/gpumemprof/site $(DESTDIR)$(PREFIX)/share/gpumemprof 2>/dev/null

clean:
	rm -rf $(BUILD) $(PY_TYPES)

-include $(FUZZ_LIB_OBJ:.o=.d) $(RECORDER_OBJ:.o=.d) $(INSPECT_OBJ:.o=.d) $(PRELOAD_OBJ:.o=.d) $(RUN_OBJ:.o=.d)
