/*
 * fuzz_ring.c — libFuzzer harness for the readers of another process's
 * ring file: the input is the file.  gmp_ring_attach must refuse a damaged
 * one or map it; a mapped one is walked and snapshotted (every event whole
 * or counted torn); `gmp-inspect watch --once --json` shows it; and
 * gmp_rings_recover, as gmp-run after a SIGKILL, writes its bundle.
 */
#include "ring_recovery.h"
#include "fuzz_common.h"
#include "verbs.h"
#include "ring.h"

#include <stdint.h>

static char run_dir[512], dumps[512], ring_path[600];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup("ring");
    snprintf(run_dir, sizeof run_dir, "%s/run", fuzz_dir);
    snprintf(dumps, sizeof dumps, "%s/dumps", fuzz_dir);
    /* the name recover expects: ring_<pid>_<ns>.gmr; pid 2^22+1 is never a process */
    snprintf(ring_path, sizeof ring_path, "%s/ring_4194305_1.gmr", run_dir);
    return 0;
}

static int count(const gmp_event *ev, void *arg)
{
    (void)ev;
    ++*(size_t *)arg;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gmp_event out[4096];
    fuzz_empty(fuzz_dir);
    mkdir(run_dir, 0700);
    fuzz_write(ring_path, data, size);
    gmp_ring ring;
    char why[256];
    if (gmp_ring_attach(&ring, ring_path, why, sizeof why) == 0) {
        size_t n = 0;
        uint64_t torn = 0;
        gmp_ring_foreach(&ring, UINT64_MAX, count, &n, &torn);
        size_t got = gmp_ring_snapshot(&ring, out, 4096, &torn);
        if (got > 4096 || n > ring.capacity)
            abort();
        gmp_ring_close(&ring, 0);
    }
    char *watch[] = {(char *)"watch", ring_path, (char *)"--once", (char *)"--json", NULL};
    cmd_watch(4, watch);
    gmp_recover_options opt = {.dump_dir = dumps};
    gmp_rings_recover(run_dir, &opt, NULL, NULL);
    return 0;
}
