/*
 * test_ring.c — the event ring: wrap-around keeps exactly the newest N in
 * order; a push takes its slot from any earlier lap, and leaves a busy one
 * or one a later lap holds; 8 writers x 1M events with a reader snapshotting all along never
 * see a torn, duplicated or out-of-order record; another process reads the
 * ring after the writer is SIGKILLed; a proxy ring of an exiting process
 * names its cgroup, not cgroup v1's root; damaged ring files are refused;
 * site records (stacks and objects) are found by id and bounded when
 * damaged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ring_recovery.h"
#include "ring.h"
#include "support.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WRITERS 8
#define PER_WRITER 1000000u

/* Every field derives from (writer, counter): a torn record cannot pass. */
static gmp_event make_event(uint32_t writer, uint64_t i)
{
    gmp_event ev = {0};
    ev.time_ns = i * 1000 + writer;
    ev.address = (i << 8) | writer;
    ev.size = i ^ 0x5a5a5a5aull;
    ev.in_use = ~i;
    ev.thread_id = writer;
    ev.result = (int32_t)(i & 0x7fff);
    ev.stack_id = (uint32_t)(i * 7);
    ev.device = (int16_t)(writer % 3);
    ev.api = (uint16_t)(i % GMP_API_COUNT);
    ev.type = GMP_EV_ALLOC;
    ev.backend = GMP_BACKEND_CUDA;
    ev.flags = (uint16_t)i;
    return ev;
}

static int event_is_whole(const gmp_event *ev)
{
    uint64_t i = (ev->time_ns - ev->thread_id) / 1000;
    gmp_event want = make_event(ev->thread_id, i);
    want.seq = ev->seq;
    return ev->thread_id < WRITERS && memcmp(&want, ev, sizeof want) == 0;
}

static void wrap_keeps_newest(uint32_t capacity, uint64_t pushes)
{
    gmp_ring ring;
    assert_int_equal(gmp_ring_create(&ring, NULL, capacity), 0);
    for (uint64_t i = 0; i < pushes; i++) {
        gmp_event ev = make_event(0, i);
        assert_int_equal(gmp_ring_push(&ring, &ev), i);
    }
    gmp_event *out = calloc(capacity + 8, sizeof *out);
    uint64_t torn = 99;
    size_t n = gmp_ring_snapshot(&ring, out, capacity + 8, &torn);
    uint64_t expect = pushes < capacity ? pushes : capacity;
    assert_int_equal(n, expect);
    assert_int_equal(torn, 0);
    for (size_t k = 0; k < n; k++) {
        uint64_t i = pushes - expect + k;
        assert_int_equal(out[k].seq, i);
        assert_int_equal(out[k].size, i ^ 0x5a5a5a5aull);
        assert_true(event_is_whole(&out[k]));
    }
    /* a smaller buffer gets the newest events, still oldest first */
    if (n > 3) {
        size_t m = gmp_ring_snapshot(&ring, out, 3, NULL);
        assert_int_equal(m, 3);
        assert_int_equal(out[2].seq, pushes - 1);
        assert_int_equal(out[0].seq, pushes - 3);
    }
    free(out);
    gmp_ring_close(&ring, 0);
}

static void test_wrap_around(void **state)
{
    (void)state;
    wrap_keeps_newest(100, 1000);   /* not a power of two: 128 slots, 100 kept */
    wrap_keeps_newest(128, 1000);   /* exactly the slot count */
    wrap_keeps_newest(10000, 25037);
    wrap_keeps_newest(64, 10);      /* never wrapped */
    wrap_keeps_newest(16, 0);       /* empty */
}

/* A push takes its slot whatever the last lap left there: a stamp from a
 * lap before (a push into it was dropped, or never finished before its
 * writer lapped) is taken; a busy one (a writer killed mid-record) and
 * one a later lap already holds are left as they are, the push counted
 * as dropped; and a snapshot has what landed. */
static void test_slot_taken_whatever_its_last_lap_left(void **state)
{
    (void)state;
    gmp_ring ring;
    assert_int_equal(gmp_ring_create(&ring, NULL, 16), 0);
    uint64_t slots = ring.mask + 1;
    for (uint64_t i = 0; i < slots; i++) {
        gmp_event ev = make_event(0, i);
        assert_int_equal(gmp_ring_push(&ring, &ev), i);
    }
    /* the next lap's slots 0, 1 and 2: two laps old, busy, a lap ahead */
    ring.slots[0].stamp = 0;
    ring.slots[1].stamp = (2 << 1) | 1;
    ring.slots[2].stamp = (slots * 2 + 3) << 1;
    uint64_t dropped = ring.hdr->dropped;
    for (uint64_t i = slots; i < slots + 4; i++) {
        gmp_event ev = make_event(0, i);
        uint64_t got = gmp_ring_push(&ring, &ev);
        assert_int_equal(got, i == slots || i == slots + 3 ? i : UINT64_MAX);
    }
    assert_int_equal(ring.hdr->dropped, dropped + 2);
    assert_int_equal(ring.slots[1].stamp, (2 << 1) | 1);
    assert_int_equal(ring.slots[2].stamp, (slots * 2 + 3) << 1);
    gmp_event out[64];
    uint64_t torn = 0;
    size_t n = gmp_ring_snapshot(&ring, out, 64, &torn);
    int saw_first = 0, saw_last = 0;
    for (size_t k = 0; k < n; k++) {
        assert_true(event_is_whole(&out[k]));
        saw_first |= out[k].seq == slots;
        saw_last |= out[k].seq == slots + 3;
        assert_true(out[k].seq != slots + 1 && out[k].seq != slots + 2);
    }
    assert_true(saw_first && saw_last);
    gmp_ring_close(&ring, 0);
}

typedef struct writer_arg {
    gmp_ring *ring;
    uint32_t id;
} writer_arg;

static void *writer_main(void *p)
{
    writer_arg *a = p;
    for (uint64_t i = 0; i < PER_WRITER; i++) {
        gmp_event ev = make_event(a->id, i);
        gmp_ring_push(a->ring, &ev);
    }
    return NULL;
}

static int writers_done;

static int check_snapshot(const gmp_event *out, size_t n)
{
    uint64_t last_i[WRITERS];
    memset(last_i, 0xff, sizeof last_i);
    for (size_t k = 0; k < n; k++) {
        if (!event_is_whole(&out[k]))
            return -1; /* torn */
        if (k && out[k].seq <= out[k - 1].seq)
            return -2; /* out of order or duplicated */
        uint64_t i = (out[k].time_ns - out[k].thread_id) / 1000;
        uint32_t w = out[k].thread_id;
        if (last_i[w] != UINT64_MAX && i <= last_i[w])
            return -3; /* a writer's own events out of order */
        last_i[w] = i;
    }
    return 0;
}

static void test_concurrent_writers_and_reader(void **state)
{
    (void)state;
    gmp_ring ring;
    const uint32_t capacity = 4096;
    assert_int_equal(gmp_ring_create(&ring, NULL, capacity), 0);
    pthread_t th[WRITERS];
    writer_arg args[WRITERS];
    __atomic_store_n(&writers_done, 0, __ATOMIC_RELEASE);
    for (uint32_t w = 0; w < WRITERS; w++) {
        args[w] = (writer_arg){&ring, w};
        assert_int_equal(pthread_create(&th[w], NULL, writer_main, &args[w]), 0);
    }
    gmp_event *out = calloc(capacity, sizeof *out);
    unsigned snapshots = 0;
    size_t seen = 0;
    for (;;) {
        int done = __atomic_load_n(&writers_done, __ATOMIC_ACQUIRE);
        size_t n = gmp_ring_snapshot(&ring, out, capacity, NULL);
        assert_int_equal(check_snapshot(out, n), 0);
        snapshots++;
        seen += n;
        if (done)
            break;
        if (__atomic_load_n(&ring.hdr->head, __ATOMIC_RELAXED) >=
            (uint64_t)WRITERS * PER_WRITER)
            __atomic_store_n(&writers_done, 1, __ATOMIC_RELEASE);
    }
    for (uint32_t w = 0; w < WRITERS; w++)
        pthread_join(th[w], NULL);
    /* after the writers: the newest `capacity` sequence numbers, whole */
    uint64_t torn = 0;
    size_t n = gmp_ring_snapshot(&ring, out, capacity, &torn);
    uint64_t head = ring.hdr->head, dropped = ring.hdr->dropped;
    assert_int_equal(head, (uint64_t)WRITERS * PER_WRITER);
    assert_int_equal(check_snapshot(out, n), 0);
    assert_int_equal(n + torn, capacity);
    assert_true(n > capacity / 2);
    assert_true(out[0].seq >= head - capacity);
    assert_true(out[n - 1].seq <= head - 1);
    print_message("ring: %u snapshots (%zu events checked) during %llu pushes, %llu dropped\n",
                  snapshots, seen, (unsigned long long)head, (unsigned long long)dropped);
    assert_true(snapshots > 1);
    free(out);
    gmp_ring_close(&ring, 0);
}

static void test_read_after_sigkill(void **state)
{
    (void)state;
    char dir[256];
    scratch_make(dir, sizeof dir, "ring");
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        gmp_ring ring;
        if (gmp_ring_create(&ring, dir, 1000) < 0 || !ring.is_file)
            _exit(1);
        for (uint64_t i = 0; i < 2500; i++) {
            gmp_event ev = make_event(1, i);
            gmp_ring_push(&ring, &ev);
        }
        /* a writer killed inside a slot: its stamp stays odd */
        uint64_t seq = __atomic_fetch_add(&ring.hdr->head, 1, __ATOMIC_RELAXED);
        ring.slots[seq & ring.mask].stamp = ((seq + 1) << 1) | 1;
        if (write(pipefd[1], ring.path, strlen(ring.path) + 1) < 0)
            _exit(1);
        pause();
        _exit(0);
    }
    char path[4096] = "";
    assert_true(read(pipefd[0], path, sizeof path) > 0);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFSIGNALED(status));

    gmp_ring ring;
    char why[128];
    assert_int_equal(gmp_ring_attach(&ring, path, why, sizeof why), 0);
    assert_int_equal(ring.hdr->pid, pid);
    gmp_event out[1000];
    uint64_t torn = 0;
    size_t n = gmp_ring_snapshot(&ring, out, 1000, &torn);
    assert_int_equal(torn, 1);
    assert_int_equal(n, 999);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(out[k].seq, 1501 + k);
        assert_true(event_is_whole(&out[k]));
    }
    gmp_ring_close(&ring, 0);
    scratch_remove(dir);
}

static void *sleep_for_ever(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* A process that has begun to exit, its main thread gone while another
 * runs on: cgroup v1 names the root cgroup for it.  A proxy ring made for
 * it (gmp-run's, for a process it sees) names the cgroup it lives in, or
 * none, never that root: a bundle written from it would say the root's
 * limit and count the root's OOM kills. */
static void test_proxy_of_an_exiting_process(void **state)
{
    (void)state;
    char dir[256], own[512];
    if (gmp_cgroup_oom_file(own, sizeof own) < 0) {
        print_message("SKIP  no memory cgroup here\n");
        return;
    }
    scratch_make(dir, sizeof dir, "ring");
    pid_t pid = fork();
    if (pid == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, sleep_for_ever, NULL) != 0)
            _exit(1);
        pthread_exit(NULL);
    }
    assert_true(pid > 0);
    for (int i = 0; i < 500 && gmp_proc_state(pid) != 'Z'; i++)
        usleep(10000);
    if (gmp_proc_state(pid) != 'Z') { /* its main thread has not exited */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("the process's main thread did not exit");
    }
    gmp_ring ring;
    int made = gmp_ring_create_proxy(&ring, dir, 1000, pid);
    char named[sizeof ring.hdr->cgroup_oom_file] = "", cgroup_dir[512], its_file[600] = "";
    if (made == 0)
        memcpy(named, ring.hdr->cgroup_oom_file, sizeof named);
    int version = gmp_cgroup_memory_dir_of(pid, cgroup_dir, sizeof cgroup_dir);
    if (version >= 0)
        gmp_cgroup_oom_file_in(cgroup_dir, version, its_file, sizeof its_file);
    kill(pid, SIGKILL); /* before any assertion: its thread holds our output open */
    waitpid(pid, NULL, 0);
    assert_int_equal(made, 0);
    gmp_ring_close(&ring, 1);
    scratch_remove(dir);
    if (named[0] && strcmp(named, own))
        fail_msg("the proxy names %s; the process lives in %s", named, own);
    if (version >= 0 && strcmp(its_file, own))
        fail_msg("its cgroup read as %s; it lives in %s", its_file, own);
}

static void test_attach_refuses_damaged_files(void **state)
{
    (void)state;
    char dir[256], path[512], why[128];
    scratch_make(dir, sizeof dir, "ringbad");
    gmp_ring ring;

    snprintf(path, sizeof path, "%s/random.gmr", dir);
    char junk[GMP_RING_HEADER_SIZE + 4096];
    srand(7);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)rand();
    write_file(path, junk, sizeof junk);
    assert_int_equal(gmp_ring_attach(&ring, path, why, sizeof why), -1);
    assert_non_null(strstr(why, "magic"));

    /* a real header, then the file cut short */
    gmp_ring real;
    assert_int_equal(gmp_ring_create(&real, dir, 1000), 0);
    assert_int_equal(truncate(real.path, GMP_RING_HEADER_SIZE + 64), 0);
    assert_int_equal(gmp_ring_attach(&ring, real.path, why, sizeof why), -1);
    assert_non_null(strstr(why, "size"));
    gmp_ring_close(&real, 1);

    snprintf(path, sizeof path, "%s/short.gmr", dir);
    write_file(path, "GMPRING", 7);
    assert_int_equal(gmp_ring_attach(&ring, path, why, sizeof why), -1);

    char link[512];
    snprintf(link, sizeof link, "%s/link.gmr", dir);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(gmp_ring_attach(&ring, link, why, sizeof why), -1);
    scratch_remove(dir);
}

/* A ring truncated under its readers (its owner shrank the file while
 * gmp-run, watch or recover had it mapped): they read nothing more from it,
 * and go on; a SIGBUS of any other mapping still ends the process. */
static void test_truncated_under_reader(void **state)
{
    (void)state;
    char dir[256], why[128];
    scratch_make(dir, sizeof dir, "ringcut");
    struct sigaction cmocka_s, dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGBUS, &dfl, &cmocka_s); /* as a tool starts: the default */
    gmp_ring real, seen, pushed;
    assert_int_equal(gmp_ring_create(&real, dir, 1000), 0);
    gmp_event ev = {.type = GMP_EV_ALLOC, .size = 4096, .address = 0x1000};
    for (int i = 0; i < 100; i++)
        gmp_ring_push(&real, &ev);
    assert_int_equal(gmp_ring_attach(&seen, real.path, why, sizeof why), 0);
    assert_int_equal(gmp_ring_attach_writable(&pushed, real.path, why, sizeof why), 0);
    gmp_event out[200];
    assert_int_equal(gmp_ring_snapshot(&seen, out, 200, NULL), 100);
    assert_int_equal(truncate(real.path, 0), 0);
    assert_int_equal(gmp_ring_snapshot(&seen, out, 200, NULL), 0);
    gmp_ring_push(&pushed, &ev); /* gmp-run's host sample: into the zeroes, not the file */
    struct stat st;
    assert_int_equal(stat(real.path, &st), 0);
    assert_int_equal(st.st_size, 0);
    gmp_ring_close(&seen, 0);
    gmp_ring_close(&pushed, 0);

    pid_t child = fork();
    if (child == 0) { /* a file of its own, not a ring, cut short under its map */
        char other[512];
        snprintf(other, sizeof other, "%s/other", dir);
        int fd = open(other, O_RDWR | O_CREAT, 0600);
        if (fd < 0 || ftruncate(fd, 8192) != 0)
            _exit(2);
        volatile char *p = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED || ftruncate(fd, 0) != 0)
            _exit(3);
        _exit(p[4096]);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS);
    sigaction(SIGBUS, &cmocka_s, NULL);
    gmp_ring_close(&real, 1);
    scratch_remove(dir);
}

/* A ring an older preload left (another layout version): nothing reads it,
 * so the reaper takes it once it is older than max_age_s, and leaves a
 * fresh one (its process may still run) and anything not a ring's. */
static void test_reap_takes_old_layouts(void **state)
{
    (void)state;
    char dir[256], old[512], fresh[512], other[512];
    scratch_make(dir, sizeof dir, "ringold");
    char head[GMP_RING_HEADER_SIZE] = "GMPRING";
    uint32_t version = GMP_RING_VERSION - 1;
    memcpy(head + 8, &version, sizeof version);
    snprintf(old, sizeof old, "%s/ring_%d_1.gmr", dir, 999999);
    snprintf(fresh, sizeof fresh, "%s/ring_%d_2.gmr", dir, 999998);
    snprintf(other, sizeof other, "%s/ring_%d_3.gmr", dir, 999997);
    write_file(old, head, sizeof head);
    write_file(fresh, head, sizeof head);
    write_file(other, "not a ring at all, only its name", 32);
    struct timespec two_days_ago[2] = {{time(NULL) - 2 * 86400, 0}, {time(NULL) - 2 * 86400, 0}};
    assert_int_equal(utimensat(AT_FDCWD, old, two_days_ago, 0), 0);
    assert_int_equal(utimensat(AT_FDCWD, other, two_days_ago, 0), 0);
    assert_int_equal(gmp_rings_reap(dir, NULL), 1);
    assert_int_equal(access(old, F_OK), -1);
    assert_int_equal(access(fresh, F_OK), 0);
    assert_int_equal(access(other, F_OK), 0);
    scratch_remove(dir);
}

static void count_module(const gmp_ring_module_record *m, void *arg)
{
    gmp_ring_module_record *last = arg;
    *last = *m;
    last->ready++; /* counts the visits */
}

/* Site records: what a writer adds, a reader in another process finds by
 * id; past a full region, the newest stacks and Python frames are named
 * still, in its second half written over, and the first half is kept; a
 * hostile file's records are bounded. */
static void test_site_records(void **state)
{
    (void)state;
    char dir[256], why[128];
    scratch_make(dir, sizeof dir, "ringsites");
    gmp_ring ring, seen;
    assert_int_equal(gmp_ring_create(&ring, dir, 100), 0);
    uint64_t frames[GMP_RING_STACK_DEPTH + 4], got[GMP_STACK_MAX];
    for (int i = 0; i < GMP_RING_STACK_DEPTH + 4; i++)
        frames[i] = 0x1000u + (uint64_t)i;
    for (uint32_t id = 1; id <= GMP_RING_STACK_RECORDS; id++)
        assert_int_equal(gmp_ring_add_stack(&ring, id * 3, frames, 1 + id % 4), 0);
    /* past the end: the newest is named, over the first of the second half */
    assert_int_equal(gmp_ring_add_stack(&ring, 9999, frames, 2), 0);
    gmp_ring_module_record m = {.start = 0x1000, .end = 0x9000, .base = 0x1000};
    strcpy(m.path, "/usr/lib/libdemo.so");
    strcpy(m.build_id, "00ff");
    assert_int_equal(gmp_ring_add_module(&ring, &m), 0);
    /* Python frames alike: ids 1..N+5, each named by its id's line */
    for (uint32_t id = 1; id <= GMP_RING_PYTHON_RECORDS + 5; id++) {
        gmp_python_frame f = {.line = id};
        snprintf(f.file, sizeof f.file, "x%u.py", id);
        strcpy(f.function, "step");
        assert_int_equal(gmp_ring_add_python(&ring, id, &f), 0);
    }

    assert_int_equal(gmp_ring_attach(&seen, ring.path, why, sizeof why), 0);
    gmp_python_frame named;
    uint32_t py_half = GMP_RING_PYTHON_RECORDS / 2;
    assert_int_equal(gmp_ring_python_lookup(GMP_RING_PYTHON_RECORDS + 5, &named, &seen), 0);
    assert_int_equal(named.line, GMP_RING_PYTHON_RECORDS + 5);
    char want_file[32];
    snprintf(want_file, sizeof want_file, "x%u.py", py_half);
    assert_int_equal(gmp_ring_python_lookup(py_half, &named, &seen), 0);
    assert_string_equal(named.file, want_file);
    assert_int_equal(gmp_ring_python_lookup(py_half + 1, &named, &seen), -1);
    assert_int_equal(gmp_ring_stack_lookup(6, got, GMP_STACK_MAX, &seen), 3);
    assert_int_equal(got[2], 0x1002);
    assert_int_equal(gmp_ring_stack_lookup(7, got, GMP_STACK_MAX, &seen), 0);
    assert_int_equal(gmp_ring_stack_lookup(9999, got, GMP_STACK_MAX, &seen), 2);
    /* the first of the second half is gone, the last of the first half kept */
    uint32_t half = GMP_RING_STACK_RECORDS / 2;
    assert_int_equal(gmp_ring_stack_lookup((half + 1) * 3, got, GMP_STACK_MAX, &seen), 0);
    assert_int_equal(gmp_ring_stack_lookup(half * 3, got, GMP_STACK_MAX, &seen),
                     1 + half % 4);
    assert_int_equal(gmp_ring_stack_lookup((half + 2) * 3, got, GMP_STACK_MAX, &seen),
                     1 + (half + 2) % 4);
    gmp_ring_module_record last = {0};
    gmp_ring_foreach_module(&seen, count_module, &last);
    assert_int_equal(last.ready, 2);
    assert_string_equal(last.path, "/usr/lib/libdemo.so");
    assert_string_equal(last.build_id, "00ff");
    gmp_ring_close(&seen, 0);

    /* damage: an over-long depth, an unterminated path, a build-id that
     * is not hex, a count of claims past the region */
    ring.stacks[0].depth = 1000000;
    memset(ring.modules[0].path, 'a', sizeof ring.modules[0].path);
    strcpy(ring.modules[0].build_id, "zz\"");
    ring.hdr->stacks_used = UINT64_MAX;
    assert_int_equal(gmp_ring_attach(&seen, ring.path, why, sizeof why), 0);
    assert_int_equal(gmp_ring_stack_lookup(3, got, GMP_STACK_MAX, &seen), GMP_RING_STACK_DEPTH);
    memset(&last, 0, sizeof last);
    gmp_ring_foreach_module(&seen, count_module, &last);
    assert_int_equal(last.ready, 2);
    assert_int_equal(strlen(last.path), sizeof last.path - 1);
    assert_string_equal(last.build_id, "");
    gmp_ring_close(&seen, 0);

    /* a header that claims more records than a ring may have */
    ring.hdr->stack_records = GMP_RING_STACK_RECORDS + 1;
    assert_int_equal(gmp_ring_attach(&seen, ring.path, why, sizeof why), -1);
    assert_non_null(strstr(why, "size"));
    gmp_ring_close(&ring, 1);
    scratch_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrap_around),
        cmocka_unit_test(test_slot_taken_whatever_its_last_lap_left),
        cmocka_unit_test(test_concurrent_writers_and_reader),
        cmocka_unit_test(test_read_after_sigkill),
        cmocka_unit_test(test_proxy_of_an_exiting_process),
        cmocka_unit_test(test_attach_refuses_damaged_files),
        cmocka_unit_test(test_truncated_under_reader),
        cmocka_unit_test(test_site_records),
        cmocka_unit_test(test_reap_takes_old_layouts),
    };
    return cmocka_run_group_tests_name("ring", tests, NULL, NULL);
}
