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

all: $(BUILD)/.deps-ok $(RECORDER_LIB) $(PRELOAD) $(INSPECT) $(EXAMPLES)

# Checked once a build tree; `make clean` re-checks.
$(BUILD)/.deps-ok: mk/ensure-deps.sh
	@mkdir -p $(BUILD)
	@sh mk/ensure-deps.sh
	@touch $@

deps: $(BUILD)/.deps-ok

$(BUILD)/%.o: %.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(JANSSON_CFLAGS) -MMD -MP -c $< -o $@

$(RECORDER_LIB): $(RECORDER_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# The interposer links only libc: every GPU library is found at run time.
$(PRELOAD): $(PRELOAD_OBJ) $(RECORDER_OBJ)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -shared -Wl,--no-undefined -Wl,-z,nodelete \
	    -o $@ $(PRELOAD_OBJ) $(RECORDER_OBJ)

$(BUILD)/preload/%.o: preload/%.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -ftls-model=initial-exec -MMD -MP -c $< -o $@

$(INSPECT): $(INSPECT_OBJ) $(RECORDER_LIB)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(INSPECT_OBJ) $(RECORDER_LIB) $(JANSSON_LIBS)

$(BUILD)/examples/%: examples/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fno-builtin $(LDFLAGS) -o $@ $<

$(BUILD)/test/support.o: test/support.c test/support.h | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(CMOCKA_CFLAGS) $(JANSSON_CFLAGS) -c $< -o $@

$(BUILD)/test/test_%: test/unit/test_%.c $(TEST_SUPPORT) $(RECORDER_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itest $(CMOCKA_CFLAGS) $(JANSSON_CFLAGS) $(LDFLAGS) -o $@ $< \
	    $(TEST_SUPPORT) $(RECORDER_LIB) $(CMOCKA_LIBS) $(JANSSON_LIBS) -lpthread

# Plain programs the integration tests run under the preload.  -fno-builtin:
# the compiler must not elide the allocations they exist to make.
$(BUILD)/test/programs/%: test/programs/%.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fno-builtin $(LDFLAGS) -o $@ $< -lpthread -ldl

# Every test binary runs even when one fails; the exit status says if any did.
test: all $(UNIT_BIN) $(TEST_PROGRAMS)
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
