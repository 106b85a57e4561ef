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
               -Iinclude -Irecorder $(WARNINGS)
ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS)

# Dependencies first, while the makefile is read: what is installed decides
# which checks and smoke tests are built (see the wildcards below).
ifneq ($(filter-out clean uninstall,$(or $(MAKECMDGOALS),all)),)
DEPS_STATUS := $(shell sh mk/ensure-deps.sh >&2; echo $$?)
ifneq ($(DEPS_STATUS),0)
$(error dependencies missing (see the line above))
endif
endif

PKG_CONFIG ?= pkg-config
JANSSON_CFLAGS = $(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)
JANSSON_LIBS = $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null || echo -ljansson)
CMOCKA_CFLAGS = $(shell $(PKG_CONFIG) --cflags cmocka 2>/dev/null)
CMOCKA_LIBS = $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null || echo -lcmocka)

RECORDER_SRC := $(wildcard recorder/*.c)
RECORDER_OBJ := $(RECORDER_SRC:%.c=$(BUILD)/%.o)
RECORDER_LIB := $(BUILD)/libgpumemprof.a

PRELOAD_SRC := $(wildcard preload/*.c)
PRELOAD_OBJ := $(PRELOAD_SRC:%.c=$(BUILD)/%.o)
PRELOAD := $(BUILD)/libgpumemprof_preload.so

INSPECT_SRC := $(wildcard tools/inspect/*.c)
INSPECT_OBJ := $(INSPECT_SRC:%.c=$(BUILD)/%.o)
INSPECT := $(BUILD)/gmp-inspect

EXAMPLES := $(BUILD)/examples/grow-heap

TEST_PROGRAMS := $(patsubst test/programs/%.c,$(BUILD)/test/programs/%,$(wildcard test/programs/*.c))

UNIT_SRC := $(wildcard test/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:test/unit/%.c=$(BUILD)/test/%)
TEST_SUPPORT := $(BUILD)/test/support.o

.PHONY: all deps test unit-test integration-test demo install uninstall clean

# Our GPU hook prototypes against the real headers, where they are installed.
CUDA_HOME ?= /usr/local/cuda
DECL_CHECKS := $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),$(BUILD)/check/cuda_decls.ok) \
               $(if $(wildcard /usr/include/hip/hip_runtime_api.h),$(BUILD)/check/hip_decls.ok)

all: $(RECORDER_LIB) $(PRELOAD) $(INSPECT) $(EXAMPLES) $(DECL_CHECKS)

$(BUILD)/check/cuda_decls.ok: preload/check/cuda_decls.c preload/cuda_runtime_table.h preload/gpu_types.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -fsyntax-only -Wall -Wextra -Werror -I$(CUDA_HOME)/include $<
	@touch $@

$(BUILD)/check/hip_decls.ok: preload/check/hip_decls.c preload/hip_table.h preload/gpu_types.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -fsyntax-only -Wall -Wextra -Werror $<
	@touch $@

deps:
	@sh mk/ensure-deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(JANSSON_CFLAGS) -MMD -MP -c $< -o $@

$(RECORDER_LIB): $(RECORDER_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# The interposer links only libc: every GPU library is found at run time.
$(PRELOAD): $(PRELOAD_OBJ) $(RECORDER_OBJ)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -shared -Wl,--no-undefined -Wl,-z,nodelete \
	    -o $@ $(PRELOAD_OBJ) $(RECORDER_OBJ)

$(BUILD)/preload/%.o: preload/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -ftls-model=initial-exec -MMD -MP -c $< -o $@

$(INSPECT): $(INSPECT_OBJ) $(RECORDER_LIB)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(INSPECT_OBJ) $(RECORDER_LIB) $(JANSSON_LIBS)

$(BUILD)/examples/%: examples/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fno-builtin $(LDFLAGS) -o $@ $<

$(BUILD)/test/support.o: test/support.c test/support.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(CMOCKA_CFLAGS) $(JANSSON_CFLAGS) -c $< -o $@

$(BUILD)/test/test_%: test/unit/test_%.c $(TEST_SUPPORT) $(RECORDER_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itest $(CMOCKA_CFLAGS) $(JANSSON_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(TEST_SUPPORT) $(RECORDER_LIB) $(CMOCKA_LIBS) $(JANSSON_LIBS) -lpthread

# Plain programs the integration tests run under the preload.  -fno-builtin:
# the compiler must not elide the allocations they exist to make.
$(BUILD)/test/programs/%: test/programs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fno-builtin $(LDFLAGS) -o $@ $< -lpthread -ldl

# Test doubles of libcudart and libamdhip64 (one source, built twice), the
# GPU program built against each, and smoke programs against the real
# libraries where they are installed.
DOUBLES := $(BUILD)/test/doubles
GPU_TESTS := $(BUILD)/test/gpu/gpu_oom_cuda $(BUILD)/test/gpu/gpu_oom_hip \
             $(if $(wildcard $(CUDA_HOME)/lib64/libcudart.so),$(BUILD)/test/gpu/gpu_smoke_cuda) \
             $(if $(wildcard /usr/include/hip/hip_runtime_api.h),$(BUILD)/test/gpu/gpu_smoke_hip)

$(DOUBLES)/libcudart.so.13: test/doubles/fake_gpu.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Wno-missing-prototypes -shared -Wl,-soname,libcudart.so.13 -o $@ $< -lpthread
	ln -sf libcudart.so.13 $(DOUBLES)/libcudart.so

$(DOUBLES)/libamdhip64.so.5: test/doubles/fake_gpu.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DFAKE_HIP -Wno-missing-prototypes -shared -Wl,-soname,libamdhip64.so.5 \
	    -o $@ $< -lpthread
	ln -sf libamdhip64.so.5 $(DOUBLES)/libamdhip64.so

GPU_PROGRAM_FLAGS = $(ALL_CFLAGS) -fno-builtin $(LDFLAGS)
$(BUILD)/test/gpu/gpu_oom_cuda: test/gpu/gpu_oom.c $(DOUBLES)/libcudart.so.13
	@mkdir -p $(dir $@)
	$(CC) $(GPU_PROGRAM_FLAGS) -o $@ $< -L$(DOUBLES) -lcudart \
	    -Wl,-rpath,$(abspath $(DOUBLES)) -lpthread -ldl

$(BUILD)/test/gpu/gpu_oom_hip: test/gpu/gpu_oom.c $(DOUBLES)/libamdhip64.so.5
	@mkdir -p $(dir $@)
	$(CC) $(GPU_PROGRAM_FLAGS) -DUSE_HIP -o $@ $< -L$(DOUBLES) -lamdhip64 \
	    -Wl,-rpath,$(abspath $(DOUBLES)) -lpthread -ldl

$(BUILD)/test/gpu/gpu_smoke_cuda: test/gpu/gpu_smoke.c
	@mkdir -p $(dir $@)
	$(CC) $(GPU_PROGRAM_FLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart -Wl,-rpath,$(CUDA_HOME)/lib64

$(BUILD)/test/gpu/gpu_smoke_hip: test/gpu/gpu_smoke.c
	@mkdir -p $(dir $@)
	$(CC) $(GPU_PROGRAM_FLAGS) -DUSE_HIP -o $@ $< -lamdhip64

# Every test binary runs even when one fails; the exit status says if any did.
test: all $(UNIT_BIN) $(TEST_PROGRAMS) $(GPU_TESTS)
	@failed=0; for t in $(UNIT_BIN); do \
	    echo "== $$t"; \
	    GMP_INSPECT=$(abspath $(INSPECT)) GMP_TEST_FIXTURES=$(abspath test/fixtures) \
	    GMP_BUILD=$(abspath $(BUILD)) \
	        $$t || failed=$$((failed+1)); \
	done; \
	if [ $$failed -ne 0 ]; then echo "$$failed test program(s) failed"; exit 1; fi; \
	echo "all $(words $(UNIT_BIN)) test programs passed"

demo: all
	@sh examples/demo.sh $(BUILD)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib
	install -m 0755 $(INSPECT) $(DESTDIR)$(PREFIX)/bin/gmp-inspect
	install -m 0755 $(PRELOAD) $(DESTDIR)$(PREFIX)/lib/libgpumemprof_preload.so
	install -m 0644 include/gpumemprof.h $(DESTDIR)$(PREFIX)/include/gpumemprof.h
	install -m 0644 $(RECORDER_LIB) $(DESTDIR)$(PREFIX)/lib/libgpumemprof.a

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/gmp-inspect \
	      $(DESTDIR)$(PREFIX)/lib/libgpumemprof_preload.so \
	      $(DESTDIR)$(PREFIX)/include/gpumemprof.h \
	      $(DESTDIR)$(PREFIX)/lib/libgpumemprof.a

clean:
	rm -rf $(BUILD)

-include $(RECORDER_OBJ:.o=.d) $(INSPECT_OBJ:.o=.d) $(PRELOAD_OBJ:.o=.d)
