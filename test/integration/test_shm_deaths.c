/*
 * test_shm_deaths.c — a death of shared memory that no call returns: a
 * process maps a file of a full tmpfs (/dev/shm of 20 MiB in a mount
 * namespace of the test's own; a container's is 64 MiB) and the kernel,
 * with no page to back its touch, kills it with SIGBUS.  Python's
 * multiprocessing.shared_memory dies so, and a program whose own handler
 * prints its words and raises SIGBUS again (as PyTorch's DataLoader
 * workers do): one bundle each that says the tmpfs was full, the status
 * unchanged.  A SIGBUS past a file's end, or raised with room to spare, is
 * no death of memory.  Skipped with a line where there is no mount
 * namespace of our own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

static preload_paths paths;
static char out[1 << 16], err[1 << 16];

/* command (its status echoed last) run with a /dev/shm of 20 MiB of its
 * own: it ended with status 135 (SIGBUS) either way; when died, one
 * bundle, a crash after a failed allocation that says the tmpfs was full
 * (its metadata returned, its path in bundle), else none (an empty
 * object).  NULL after a SKIP line for test where there is no mount
 * namespace of our own. */
static json_t *shm_death_bundle(const char *command, int died, const char *test, char *bundle,
                                size_t cap)
{
    char script[8192];
    small_shm_script(script, sizeof script, command);
    if (exit_code_of(run_script(&paths, script, out, sizeof out, err, sizeof err)) == 77) {
        printf("SKIP  %s: no mount namespace of its own here\n", test);
        return NULL;
    }
    assert_string_equal(out, "status 135\n");
    if (!died) {
        assert_int_equal(count_prefixed(paths.dumps, "oom_dump_"), 0);
        return json_object();
    }
    json_t *md = only_bundle_file(paths.dumps, "metadata.json", bundle, cap);
    if (strcmp(json_str(md, "kind"), "crash_after_failed_allocation") ||
        strcmp(json_str(md, "reason"), "SIGBUS after failed allocation"))
        fail_msg("kind %s, reason %s", json_str(md, "kind"), json_str(md, "reason"));
    expect_headline(bundle, "the process ran out of memory: a tmpfs it shared memory "
                            "through (/dev/shm, as a rule) was full");
    return md;
}

/* Python's multiprocessing.shared_memory fills a segment larger than the
 * room /dev/shm has (20 MiB here, a mount namespace of its own; a
 * container's is 64 MiB): the kernel backs its pages only at the touch,
 * and the first it cannot back kills the process with SIGBUS.  No call
 * failed, and no large malloc made a ring before it.  The status stays
 * 135; one bundle, an out-of-memory death, that says the tmpfs was full,
 * with its size and the file, failed at the line that wrote.  A SIGBUS
 * past the end of a tmpfs file with room to spare (truncated under its
 * mapping) is no death of memory: no bundle, the same status.  Skipped
 * with a line where there is no mount namespace of our own. */
static void test_shared_memory_full(void **state)
{
    (void)state;
    char file[700], command[4096], bundle[1024];
    snprintf(file, sizeof file, "%s/fill.py", paths.scratch);
    static const char fill[] =
        "import mmap, os, sys\n"
        "from multiprocessing import shared_memory\n"
        "if sys.argv[1] == 'full':\n"
        "    shm = shared_memory.SharedMemory(create=True, size=64 << 20)\n"
        "    for at in range(0, 64 << 20, 4096):\n"
        "        shm.buf[at:at + 4096] = b'x' * 4096\n"
        "else:\n"
        "    fd = os.open('/dev/shm/gmp-short', os.O_CREAT | os.O_RDWR)\n"
        "    os.ftruncate(fd, 8 << 20)\n"
        "    m = mmap.mmap(fd, 8 << 20)\n"
        "    os.ftruncate(fd, 4096)\n"
        "    m[1 << 20] = 1\n";
    write_file(file, fill, sizeof fill - 1);
    const char *mode[] = {"full", "past-end"};
    for (int i = 0; i < 2; i++) {
        snprintf(command, sizeof command,
                 "LD_PRELOAD=\"%s\" python3 %s %s 2>/dev/null; echo status $?", paths.preload,
                 file, mode[i]);
        json_t *md = shm_death_bundle(command, i == 0, "test_shared_memory_full", bundle,
                                      sizeof bundle);
        if (!md)
            return;
        json_decref(md);
        if (i == 1)
            break;
        const char *shown = show_output(bundle);
        if (!strstr(shown, "It touched a page of /dev/shm/psm_") ||
            !strstr(shown, ", shared memory on a tmpfs of 20.0 MiB with 0 B free.") ||
            !strstr(shown, "\nFailed at:        fill.py:6 in <module>\n") ||
            strstr(shown, "\nHeld by:"))
            fail_msg("show:\n%s", shown);
    }
}

/* The same death under a SIGBUS handler of the program's own, which
 * writes its words (with a C string's NUL, as PyTorch's DataLoader workers'
 * handlers do), puts the default action back and raises the signal again:
 * the address is gone, and the process sent the signal itself.  Still one
 * bundle, the tmpfs full, the mapped file named; our line follows the
 * program's words on stderr (their NUL does not leave a line open).  A
 * SIGBUS the program raises while its tmpfs has room is none: no bundle.
 * The status is 135 either way. */
static void test_shared_memory_full_under_its_handler(void **state)
{
    (void)state;
    char command[8192], bundle[1024];
    char program[1200];
    snprintf(program, sizeof program, "%s/test/programs/shm_bus_handler", paths.build);
    const char *mode[] = {"", "raise"};
    for (int i = 0; i < 2; i++) {
        scratch_remove(paths.dumps);
        snprintf(command, sizeof command,
                 "LD_PRELOAD=\"%s\" %s /dev/shm %s 2>%s/bus.err; echo status $?; "
                 "tr \"\\000\" @ <%s/bus.err >&2",
                 paths.preload, program, mode[i], paths.scratch, paths.scratch);
        json_t *md = shm_death_bundle(command, i == 0,
                                      "test_shared_memory_full_under_its_handler", bundle,
                                      sizeof bundle);
        if (!md)
            return;
        if (i == 1) {
            json_decref(md);
            break;
        }
        if (!strstr(json_str(md, "exception_message"),
                    " A handler of its own raised it again, its address gone; it had mapped "
                    "/dev/shm/gmp-bus-handler, shared memory on a tmpfs of 20.0 MiB with 0 B "
                    "free."))
            fail_msg("message %s", json_str(md, "exception_message"));
        json_decref(md);
        /* the program's NUL (shown as @) after its line, then ours */
        if (!strstr(err, "insufficient shared memory (shm).\n@gpumemprof: SIGBUS after "
                         "failed allocation (mmap 4.0 KiB on host, ENOSPC); bundle: "))
            fail_msg("stderr: %s", err);
    }
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "shm-deaths");
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core); /* the children dump no core */
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_memory_full),
        cmocka_unit_test(test_shared_memory_full_under_its_handler),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
