/*
 * test_noalloc.c — the emergency path allocates nothing.  This program
 * defines malloc and its relatives itself, which overrides libc's for every
 * caller in the process (libc's own internal calls such as opendir's
 * included), and counts the calls made while the recorder records,
 * snapshots, classifies, dumps a bundle, prunes old ones, and reports an
 * error.  Each must be zero: a dump has to work after malloc has failed, or
 * from a signal handler that interrupted malloc.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpumemprof.h"
#include "dump_request.h"
#include "support.h"

#include <errno.h>
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

/* Exported, so libc's own calls bind to these too (the build hides symbols). */
#define EXPORTED __attribute__((visibility("default")))

static int counting;
static unsigned long allocations;

static void note(void)
{
    if (__atomic_load_n(&counting, __ATOMIC_RELAXED))
        __atomic_fetch_add(&allocations, 1, __ATOMIC_RELAXED);
}

EXPORTED void *malloc(size_t n)
{
    note();
    return __libc_malloc(n);
}

EXPORTED void *calloc(size_t n, size_t m)
{
    note();
    return __libc_calloc(n, m);
}

EXPORTED void *realloc(void *p, size_t n)
{
    note();
    return __libc_realloc(p, n);
}

EXPORTED void free(void *p)
{
    __libc_free(p);
}

EXPORTED void *memalign(size_t a, size_t n)
{
    note();
    return __libc_memalign(a, n);
}

EXPORTED void *aligned_alloc(size_t a, size_t n)
{
    note();
    return __libc_memalign(a, n);
}

EXPORTED int posix_memalign(void **out, size_t a, size_t n)
{
    note();
    void *p = __libc_memalign(a, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

static void begin(void)
{
    allocations = 0;
    __atomic_store_n(&counting, 1, __ATOMIC_SEQ_CST);
}

static unsigned long end(void)
{
    __atomic_store_n(&counting, 0, __ATOMIC_SEQ_CST);
    return allocations;
}

/* A live table of 20000 allocations for allocations.json: more than it
 * lists one by one, so the bounded heap is exercised. */
static void fake_live(gmp_live_visit_fn visit, void *ctx, void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= 20000; i++) {
        gmp_live_allocation a = {.address = i << 20, .size = (i * 7919) % 100003,
                                 .time_ns = i, .stack_id = (uint32_t)(i % 300),
                                 .device = 0, .backend = GMP_BACKEND_CUDA,
                                 .api = GMP_API_CUDA_MALLOC};
        visit(&a, ctx);
    }
}

/* The 10000 largest of them, largest first; totals over all 20000. */
static void check_allocations(const char *bundle)
{
    json_t *a = bundle_file(bundle, "allocations.json");
    uint64_t all = 0, smallest_listed = UINT64_MAX, largest_omitted = 0;
    static uint64_t sizes[20001];
    for (uint64_t i = 1; i <= 20000; i++) {
        sizes[i] = (i * 7919) % 100003;
        all += sizes[i];
    }
    assert_int_equal(json_int(a, "live_count"), 20000);
    assert_int_equal((uint64_t)json_int(a, "live_bytes"), all);
    assert_int_equal(json_int(a, "listed_count"), 10000);
    assert_int_equal(json_int(a, "omitted_count"), 10000);
    json_t *list = json_object_get(a, "allocations");
    assert_int_equal(json_array_size(list), 10000);
    uint64_t previous = UINT64_MAX, listed = 0;
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x) {
        uint64_t size = (uint64_t)json_int(x, "size");
        assert_true(size <= previous);
        previous = smallest_listed = size;
        listed += size;
        sizes[strtoull(json_str(x, "address"), NULL, 16) >> 20] = UINT64_MAX; /* taken */
    }
    for (uint64_t k = 1; k <= 20000; k++)
        if (sizes[k] != UINT64_MAX && sizes[k] > largest_omitted)
            largest_omitted = sizes[k];
    assert_true(largest_omitted <= smallest_listed);
    assert_int_equal((uint64_t)json_int(a, "omitted_bytes"), all - listed);
    json_decref(a);
}

static void test_record_dump_prune_allocate_nothing(void **state)
{
    (void)state;
    char dir[256], path[4096], dumps[512];
    scratch_make(dir, sizeof dir, "noalloc");
    snprintf(dumps, sizeof dumps, "%s/dumps", dir);
    gmp_config cfg;
    gmp_config_defaults(&cfg);
    snprintf(cfg.dump_dir, sizeof cfg.dump_dir, "%s", dumps);
    snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s/run", dir);
    snprintf(cfg.metadata_json, sizeof cfg.metadata_json, "{\"k\":[1,2,{\"x\":\"y\"}]}");
    cfg.buffer_size = 50000;
    cfg.max_dumps = 2;
    gmp_recorder *rec = gmp_recorder_create(&cfg);
    gmp_event ev = {.type = GMP_EV_ALLOC, .backend = GMP_BACKEND_CUDA, .device = 0,
                    .api = GMP_API_CUDA_MALLOC, .size = 4096};
    assert_int_equal(gmp_record(rec, &ev), 0); /* creates the ring */
    /* one bundle first, so the counted dumps below also prune */
    gmp_dump_request req = {.reason = "cudaErrorMemoryAllocation",
                            .exception_message = "cudaMalloc failed",
                            .backend = GMP_BACKEND_CUDA,
                            .failed = {1, GMP_API_CUDA_MALLOC, 1ull << 40, 0, 2},
                            .live_foreach = fake_live};
    assert_non_null(gmp_dump(rec, &req, path, sizeof path));

    begin();
    for (int i = 0; i < 60000; i++) {
        ev.size = (uint64_t)i;
        gmp_record(rec, &ev);
    }
    assert_int_equal(end(), 0);

    static gmp_event out[50000];
    begin();
    size_t n = gmp_snapshot(rec, out, 50000);
    gmp_classification c = gmp_classify_result(GMP_BACKEND_CUDA, GMP_API_CUDA_MALLOC, 2);
    c = gmp_classify_exception("RuntimeError", "builtins", "CUDA out of memory. Tried");
    assert_int_equal(end(), 0);
    assert_int_equal(n, 50000);
    assert_true(c.is_oom);

    begin();
    const char *p1 = gmp_dump(rec, &req, path, sizeof path);
    const char *p2 = gmp_dump(rec, &req, path, sizeof path);
    unsigned long during_dumps = end();
    assert_non_null(p1);
    assert_non_null(p2);
    assert_int_equal(count_prefixed(dumps, "oom_dump_"), 2); /* pruned one */
    assert_int_equal(during_dumps, 0);
    check_allocations(p2);

    /* the error path too: an unwritable dump directory is one stderr line */
    assert_int_equal(chmod(dumps, 0500), 0);
    char err[1024];
    int can_write = access(dumps, W_OK) == 0; /* root ignores the mode */
    stderr_capture_begin();
    begin();
    const char *p3 = gmp_dump(rec, &req, path, sizeof path);
    unsigned long during_error = end();
    stderr_capture_end(err, sizeof err);
    assert_int_equal(during_error, 0);
    if (!can_write) {
        assert_null(p3);
        assert_int_equal(count_lines(err), 1);
    }
    chmod(dumps, 0700);
    gmp_recorder_destroy(rec);
    scratch_remove(dir);
}

/* The counter itself works: direct calls and libc-internal ones (strdup). */
static void test_counter_sees_allocations(void **state)
{
    (void)state;
    begin();
    void *volatile p = malloc(64); /* volatile: the pair must not be elided */
    char *s = strdup("x");
    unsigned long seen = end();
    free(p);
    free(s);
    assert_int_equal(seen, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_sees_allocations),
        cmocka_unit_test(test_record_dump_prune_allocate_nothing),
    };
    return cmocka_run_group_tests_name("noalloc", tests, NULL, NULL);
}
