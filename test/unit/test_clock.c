/*
 * test_clock.c — the time every event is stamped with: from two threads at
 * once, over a second and a half (the first rate measured, the anchor
 * renewed several times), each reading lies between two clock_gettime
 * calls around it, give or take 20 µs, and a thread's readings never go back by
 * more than that; and in a forked child it still agrees.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLACK_NS 20000
#define RUN_NS 1500000000ull

static uint64_t realtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct {
    uint64_t readings, outside, worst_ns, went_back;
} agreement;

/* Reads the clock for run_ns between clock_gettime calls, with short
 * sleeps now and then so that readings fall across the anchors' ends. */
static void compare_for(uint64_t run_ns, agreement *out)
{
    uint64_t start = realtime(), last = 0;
    for (uint64_t i = 0;; i++) {
        uint64_t before = realtime();
        uint64_t t = gmp_now_realtime_ns();
        uint64_t after = realtime();
        uint64_t off = t + SLACK_NS < before ? before - t : t > after + SLACK_NS ? t - after : 0;
        if (off) {
            out->outside++;
            if (off > out->worst_ns)
                out->worst_ns = off;
        }
        if (last > t + SLACK_NS)
            out->went_back++;
        last = t;
        out->readings++;
        if (after - start > run_ns)
            break;
        if (i % 4096 == 0)
            nanosleep(&(struct timespec){0, 300000}, NULL);
    }
}

static void *reader(void *arg)
{
    compare_for(RUN_NS, arg);
    return NULL;
}

static void assert_agreed(const agreement *a, const char *who)
{
    if (a->outside || a->went_back)
        fprintf(stderr, "%s: %llu of %llu readings off by up to %llu ns, %llu went back\n",
                who, (unsigned long long)a->outside, (unsigned long long)a->readings,
                (unsigned long long)a->worst_ns, (unsigned long long)a->went_back);
    assert_true(a->readings > 1000);
    assert_int_equal(a->outside, 0);
    assert_int_equal(a->went_back, 0);
}

static void two_threads_agree_with_clock_gettime(void **state)
{
    (void)state;
    agreement mine = {0}, other = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, reader, &other), 0);
    compare_for(RUN_NS, &mine);
    pthread_join(t, NULL);
    fprintf(stderr, "clock: %s\n", gmp_clock_uses_tsc() ? "the TSC, anchored to CLOCK_REALTIME"
                                                       : "clock_gettime (no usable TSC)");
    assert_agreed(&mine, "main thread");
    assert_agreed(&other, "second thread");
}

static void a_forked_child_agrees(void **state)
{
    (void)state;
    gmp_now_realtime_ns();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gmp_clock_after_fork();
        agreement a = {0};
        compare_for(200000000ull, &a);
        _exit(a.outside || a.went_back || a.readings < 1000 ? 1 : 0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_threads_agree_with_clock_gettime),
        cmocka_unit_test(a_forked_child_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
