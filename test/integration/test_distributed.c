/*
 * test_distributed.c — a run, not a process: the ranks of a distributed
 * job that ran out of memory, told as one story by `gmp-inspect triage`.
 *
 * A small stand-in launcher (python3, the standard library alone) does
 * what torchrun does to its ranks: starts three with RANK, WORLD_SIZE and
 * the rendezvous in their environment (and TORCHELASTIC_RUN_ID when asked),
 * waits for the first to end, and stops the others with SIGTERM.  A rank
 * runs out of host memory under RLIMIT_AS (a MemoryError nobody catches);
 * in the cascade every rank does, and the others are still handling it
 * when the SIGTERM comes.  Checked: the verdict names the rank that ran
 * out first, its site, what followed and which ranks left nothing; two runs
 * in one directory are two; one run id over two launchers (two nodes) is
 * one run; JUnit has one failing test per run and signature.  Then the
 * real torchrun and torch.multiprocessing.spawn on examples/train_ddp.py,
 * with the torch mk/torch-venv.sh keeps outside the clone (skipped with a
 * line where there is none).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static preload_paths paths;
static char out[1 << 17], err[1 << 16];
static char launcher[700];

/* launcher.py MODE [NODE] [RUN_ID]: MODE "one" (local rank 1 runs out),
 * "every" (all do; local rank 1 raises last), "staggered" (all do, rank
 * 1 first, the others once it has, and rank 1 raises 4 s after its
 * failure), "killed" (rank 1 runs out and holds its MemoryError, rank 0
 * allocates 8 MiB and kills itself with SIGKILL 1.2 s after rank 1's
 * failure, which rank 1 marks with a file, the launcher exits 3 s after
 * stopping the others) or "healthy" (all exit 0 at once).
 * Ranks NODE*3 .. NODE*3+2 of a world of 3 per node (NODES in the
 * environment, 1 unless set).  SLOW_REAPER in the environment: it reaps
 * the ranks it stopped as a busy machine may let a preloaded launcher do,
 * its look at the run directory (gmp_rings_reaped, which the preload's
 * wait hook calls) 0.5 s after the wait (libc's own, not the hook).
 * POLL_EVERY: seconds between its looks at its ranks (0.05 unless set; the
 * torchrun of older PyTorch releases looked every 5). */
static const char launcher_py[] =
    "import os, signal, subprocess, sys, time\n"
    "mode = sys.argv[1]\n"
    "node = int(sys.argv[2]) if len(sys.argv) > 2 else 0\n"
    "nodes = int(os.environ.get('NODES', '1'))\n"
    "rank_code = r'''\n"
    "import os, resource, sys, time\n"
    "rank, mode, mark = int(os.environ['LOCAL_RANK']), sys.argv[1], os.environ['RUN_MARK']\n"
    "if mode == 'staggered' and rank != 1:  # rank 1 runs out first, the others after it\n"
    "    while not os.path.exists(mark): time.sleep(0.01)  # however busy the machine\n"
    "if mode not in ('one', 'killed', 'healthy') or rank == 1 and mode in ('one', 'killed'):\n"
    "    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    "    hold = []\n"
    "    def fill():\n"
    "        while True:\n"
    "            hold.append(bytearray(64 << 20))\n"
    "    try:\n"
    "        fill()\n"
    "    except MemoryError:\n"
    "        # the others still at it when stopped; staggered, they have run out\n"
    "        # by then (they start when rank 1 has)\n"
    "        if rank == 1 and mode in ('killed', 'staggered'):\n"
    "            open(mark, 'w').close()  # the others may go on\n"
    "        time.sleep((4 if mode == 'staggered' else 1.5) if rank == 1 and mode != 'killed'\n"
    "                   else 60)\n"
    "        raise\n"
    "if mode == 'killed' and rank == 0:\n"
    "    held = [bytearray(1 << 20) for _ in range(8)]  # a ring of its own\n"
    "    while not os.path.exists(mark): time.sleep(0.01)\n"
    "    time.sleep(1.2)\n"
    "    os.kill(os.getpid(), 9)\n"
    "if mode != 'healthy':\n"
    "    time.sleep(60)\n"
    "'''\n"
    "env = dict(os.environ, WORLD_SIZE=str(3 * nodes), LOCAL_WORLD_SIZE='3', "
    "MASTER_ADDR='127.0.0.1', MASTER_PORT='29511', GROUP_RANK=str(node),\n"
    "           RUN_MARK='/tmp/gmp-test-launcher-%d' % os.getpid())\n"
    "if len(sys.argv) > 3:\n"
    "    env['TORCHELASTIC_RUN_ID'] = sys.argv[3]\n"
    "ranks = [subprocess.Popen([sys.executable, '-c', rank_code, mode],\n"
    "                          env=dict(env, RANK=str(3 * node + r), LOCAL_RANK=str(r)))\n"
    "         for r in range(3)]\n"
    "if mode == 'healthy':\n"
    "    sys.exit(max(p.wait() for p in ranks))\n"
    "while all(p.poll() is None for p in ranks):\n"
    "    time.sleep(float(os.environ.get('POLL_EVERY', '0.05')))\n"
    "for p in ranks:\n"
    "    if p.poll() is None:\n"
    "        p.send_signal(signal.SIGTERM)\n"
    "def reap(p):\n"
    "    if not os.environ.get('SLOW_REAPER') or p.returncode is not None:\n"
    "        return abs(p.wait())\n"
    "    import ctypes\n"
    "    status = ctypes.c_int()\n"
    "    ctypes.CDLL('libc.so.6').waitpid(p.pid, ctypes.byref(status), 0)\n"
    "    time.sleep(0.5)\n"
    "    ctypes.CDLL(None).gmp_rings_reaped(os.environ['GMP_RUN_DIR'].encode(), p.pid,\n"
    "                                       status.value)\n"
    "    p.returncode = -(status.value & 0x7f) or status.value >> 8\n"
    "    return abs(p.returncode)\n"
    "status = max(reap(p) for p in ranks)\n"
    "if os.path.exists(env['RUN_MARK']):\n"
    "    os.unlink(env['RUN_MARK'])\n"
    "if mode == 'killed':\n"
    "    time.sleep(3)  # the job ends, and its rings are recovered, later\n"
    "sys.exit(status)\n";

/* The launcher run under the preload with ARGS, and then `triage FORMAT`
 * of the dump directory in out. */
static void run_launchers(const char *commands, const char *format)
{
    char script[4096];
    snprintf(script, sizeof script,
             "export LD_PRELOAD='%s' L='%s'; %s; unset LD_PRELOAD; "
             "'%s' triage \"$GMP_DUMP_DIR\" --format %s; echo \"status $?\"",
             paths.preload, launcher, commands, inspect_path(), format);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
}

static void expect_said(const char *what, const char *text)
{
    if (!strstr(out, text))
        fail_msg("triage does not say %s (\"%s\"):\n%s\nstderr: %s", what, text, out, err);
}

/* Rank 1 runs out; the launcher stops 0 and 2, which were not short of
 * memory and so leave no bundle. */
static void test_one_rank_runs_out(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    run_launchers("python3 \"$L\" one", "text");
    expect_said("the run", "\n1 run(s), 1 with an out-of-memory death:\n"
                           "  run 1  run at rendezvous 127.0.0.1:29511 (launcher pid ");
    expect_said("its size and host", "), 3 ranks on ");
    expect_said("who ran out, of what", "\n    rank 1 ran out of host memory at ");
    expect_said("where, and the silent ranks",
                " at <string>:11 in fill); ranks 0 and 2 left no bundle\n");
    expect_said("the exit status", "status 3\n");
}

/* Every rank runs out on the same step; rank 1 raises first and the
 * launcher's SIGTERM reaches 0 and 2 while theirs are still open: three
 * deaths of memory, one run, the first named. */
static void test_every_rank_runs_out(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    run_launchers("python3 \"$L\" every", "text");
    expect_said("the run", "\n1 run(s), 1 with an out-of-memory death:\n");
    expect_said("the first", " ran out of host memory first, at ");
    if (!strstr(out, " ran out of memory too, ") || !strstr(out, "then ended by SIGTERM") ||
        strstr(out, "left no bundle"))
        fail_msg("triage does not tell the cascade:\n%s\nstderr: %s", out, err);
    /* the first is whichever rank's allocation failed first, not rank 1's exit */
    run_launchers("python3 \"$L\" every", "junit");
    expect_said("one failing test for the run's signature",
                "<testsuite name=\"gpumemprof.oom\" tests=\"1\" failures=\"1\" errors=\"0\">");
    expect_said("the run in the test's name", "name=\"run at rendezvous 127.0.0.1:29511");
    expect_said("the verdict in its text", "the run: rank ");
}

/* Two runs of the same launcher, one after the other, into one directory:
 * two runs, each with its own verdict.  One torchrun run id over two
 * launchers (its two nodes): one run of six ranks, told the same from the
 * manifests alone. */
static void test_runs_told_apart_and_joined(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    run_launchers("python3 \"$L\" one; python3 \"$L\" one", "json");
    expect_said("two runs", "\"run\": \"run at rendezvous 127.0.0.1:29511 (launcher pid ");
    json_error_t jerr;
    char *status = strstr(out, "status ");
    if (status)
        *status = '\0';
    json_t *doc = json_loads(out, 0, &jerr);
    if (!doc)
        fail_msg("triage --format json is no JSON (%s):\n%s", jerr.text, out);
    json_t *runs = json_object_get(doc, "runs");
    if (json_array_size(runs) != 2)
        fail_msg("want 2 runs, have %zu:\n%s", json_array_size(runs), out);
    for (size_t i = 0; i < 2; i++) {
        json_t *r = json_array_get(runs, i);
        assert_int_equal(json_int(r, "out_of_memory_deaths"), 1);
        if (!strstr(json_str(r, "verdict"), "rank 1 ran out of host memory at "))
            fail_msg("run %zu: %s", i, json_str(r, "verdict"));
    }
    json_decref(doc);

    run_launchers("export NODES=2; python3 \"$L\" one 0 job42 & python3 \"$L\" one 1 job42; wait",
                  "text");
    expect_said("one run over two launchers", "\n1 run(s), 1 with an out-of-memory death:\n"
                                              "  run 1  torchrun run job42, 6 ranks on ");
    expect_said("the first of the two", "ran out of host memory first, at ");
    expect_said("the second", " ran out of memory too, ");
    expect_said("the silent ranks", "; ranks 0, 2, 3 and 5 left no bundle\n");

    /* the manifest names the run, rank, host and world size: triage tells
     * the same from it with every environment.json gone (and so reads
     * none of them, at a cluster's scale) */
    run_launchers("export NODES=2; python3 \"$L\" one 0 job43 & python3 \"$L\" one 1 job43; wait; "
                  "rm \"$GMP_DUMP_DIR\"/oom_dump_*/environment.json",
                  "text");
    expect_said("the run from the manifests", "\n1 run(s), 1 with an out-of-memory death:\n"
                                              "  run 1  torchrun run job43, 6 ranks on ");
    expect_said("the silent ranks from them", "; ranks 0, 2, 3 and 5 left no bundle\n");
}

/* Ranks running out 1, then 0 and 2, with room for two bundles: rank 1's,
 * the root cause, is kept and a rank that followed it goes (it was the
 * first to go, the oldest).  A node's ranks sharing the directory with no
 * GMP_MAX_DUMPS keep a bundle each. */
static void test_retention_keeps_the_first(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    run_launchers("GMP_MAX_DUMPS=2 python3 \"$L\" staggered; ls \"$GMP_DUMP_DIR\"", "text");
    if (count_prefixed(paths.dumps, "oom_dump_") != 2 || !strstr(out, "_cpu_r1_"))
        fail_msg("want rank 1's bundle and one other:\n%s\nstderr: %s", out, err);
    expect_said("the first kept", "rank 1 ran out of host memory first, at ");
}

/* gmp-run around the launcher: its last line is the run's verdict, the two
 * ranks the launcher stopped told from the ends the launcher noted ("ended
 * by SIGTERM"), and triage later says the same from the notes kept beside
 * the bundle.  So too when the launcher looks 0.5 s after its wait: the
 * ranks (sleeping Python, no ring of their own) have only gmp-run's proxy
 * rings to be noted from, which gmp-run must not remove the moment they
 * are gone (in CI, a launcher slowed by the machine once missed rank 0's).
 * A healthy run says nothing and leaves nothing. */
static void test_gmp_run_tells_the_run(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    char script[4096];
    for (int slow = 0; slow <= 1; slow++) {
        snprintf(script, sizeof script,
                 "rm -rf \"$GMP_DUMP_DIR\"/*; %s'%s/gmp-run' --dump-dir \"$GMP_DUMP_DIR\" -- "
                 "python3 '%s' one 2>&1 | tail -1; '%s' triage \"$GMP_DUMP_DIR\"",
                 slow ? "SLOW_REAPER=1 " : "", paths.build, launcher, inspect_path());
        run_script(&paths, script, out, sizeof out, err, sizeof err);
        expect_said("gmp-run's last line",
                    "gpumemprof: run at rendezvous 127.0.0.1:29511 (launcher pid ");
        expect_said("the verdict", "), 3 ranks on ");
        expect_said("the ranks it stopped", "; ranks 0 and 2 ended by SIGTERM ");
        char *later = strstr(out, "\n1 run(s)");
        if (!later || !strstr(later, "; ranks 0 and 2 ended by SIGTERM ") ||
            !strstr(later, "(1 bundle(s))"))
            fail_msg("triage after gmp-run does not tell the stopped ranks:\n%s", out);
    }

    snprintf(script, sizeof script,
             "'%s/gmp-run' --dump-dir \"$GMP_DUMP_DIR\" -- python3 '%s' healthy; echo \"status $?\"; "
             "ls -A \"$GMP_DUMP_DIR\" 2>/dev/null | wc -l",
             paths.build, launcher);
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    if (strcmp(out, "status 0\n0\n") || strstr(err, "gpumemprof"))
        fail_msg("a healthy run: %s\nstderr: %s", out, err);
}

/* Under gmp-run, a rank killed by SIGKILL (as the OOM killer kills) leaves
 * a ring its launcher keeps; gmp-run writes its bundle when the job ends,
 * here 3 s later.  Its death is dated when it was seen, noted in the ring,
 * not by that writing: the verdict puts it about 1.2 s after rank 1's
 * failure, which rank 0 waits for, and `show` says so.  Seen by the launcher's reap; and by
 * gmp-run's look at the job, where the launcher looks at its ranks every
 * 4 s (POLL_EVERY) and reaps the dead rank 3 s late. */
static void test_killed_rank_dated_by_its_death(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    for (int slow = 0; slow < 2; slow++) {
        char script[4096];
        snprintf(script, sizeof script,
                 "rm -rf \"$GMP_DUMP_DIR\"/*; %s'%s/gmp-run' --dump-dir \"$GMP_DUMP_DIR\" -- "
                 "python3 '%s' killed 2>&1 | tail -2",
                 slow ? "export POLL_EVERY=4; " : "", paths.build, launcher);
        run_script(&paths, script, out, sizeof out, err, sizeof err);
        expect_said("the first death", "rank 1 ran out of host memory first, at ");
        expect_said("its bundle", "died (SIGKILL); bundle: ");
        const char *killed = strstr(out, "rank 0 ended by SIGKILL ");
        double later = killed ? strtod(killed + strlen("rank 0 ended by SIGKILL "), NULL) : -1;
        if (!killed || later < 0.5 || later > 2.5)
            fail_msg("rank 0's SIGKILL is not dated near its death (1.2 s after rank 1's "
                     "failure, 3 s before the job's end)%s:\n%s\nstderr: %s",
                     slow ? ", its launcher looking every 4 s" : "", out, err);
    }
}

/* ---- the real torchrun and torch.multiprocessing.spawn ------------------ */

/* The venv's python with torch (mk/torch-venv.sh), else skip with a line. */
static const char *torch_python(void)
{
    const char *python = torch_python_or_skip_line("a test of the real torch");
    if (!python)
        skip();
    return python;
}

/* COMMAND in a scratch directory holding train.py, with torch's venv on
 * the PATH and the scratch directory as TMPDIR (torchrun's
 * torchelastic_* directories and error files go with it); its output's
 * last line, then `triage FORMAT`, in out. */
static void run_torch(const char *command, const char *format)
{
    const char *python = torch_python();
    /* examples/train_ddp.py, beside test/fixtures in the checkout */
    const char *fixtures = getenv("GMP_TEST_FIXTURES");
    char commands[3000];
    snprintf(commands, sizeof commands,
             "export PATH=\"$(dirname '%s'):$PATH\" OMP_NUM_THREADS=1 TMPDIR='%s'; "
             "cp '%s/../../examples/train_ddp.py' '%s/train.py' && cd '%s' && "
             "{ %s; } >torch.out 2>&1; tail -1 torch.out",
             python, paths.scratch, fixtures ? fixtures : "test/fixtures", paths.scratch,
             paths.scratch, command);
    run_launchers(commands, format);
}

/* torchrun, rank 1 out of host memory: its run id and world, the line
 * that asked, and the two ranks torchrun stopped leaving nothing.  torchrun
 * relays rank 1's traceback (@record's error file) in its own summary: no
 * death of torchrun's (it was one). */
static void test_torchrun_one_rank(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    run_torch("torchrun --nproc-per-node 3 train.py", "text");
    expect_said("torchrun's run", "\n1 run(s), 1 with an out-of-memory death:\n"
                                  "  run 1  torchrun run ");
    expect_said("the world", ", 3 ranks on ");
    expect_said("rank 1 and the line", "\n    rank 1 ran out of host memory at ");
    expect_said("the line", " at train.py:39 in main); ranks 0 and 2 left no bundle\n");
    expect_said("one death", " 1 out-of-memory death(s), 0 memory-pressure warning(s)");
}

/* torchrun, every rank out on the same step: one run, three deaths of
 * memory, the others' ended by torchrun's SIGTERM.  With --tee, torchrun
 * copies each rank's log to its own stderr ("[default1]:..."): the ranks'
 * words, no deaths of torchrun's. */
static void test_torchrun_every_rank(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    run_torch("ONE=0 torchrun --nproc-per-node 3 --tee 3 train.py", "text");
    expect_said("one run", "\n1 run(s), 1 with an out-of-memory death:\n");
    expect_said("the first", " ran out of host memory first, at ");
    expect_said("the cascade", " ran out of memory too, ");
    expect_said("torchrun's SIGTERM", "then ended by SIGTERM");
    expect_said("three deaths", " 3 out-of-memory death(s)");
}

/* accelerate's launcher, which is torchrun's machinery in another
 * process: one death, rank 1's (skipped where the venv has no accelerate). */
static void test_accelerate_launch(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    char accelerate[1200];
    const char *python = torch_python(), *bin_end = strrchr(python, '/');
    snprintf(accelerate, sizeof accelerate, "%.*s/accelerate", (int)(bin_end - python), python);
    if (access(accelerate, X_OK)) {
        printf("SKIP: no accelerate beside %s\n", torch_python());
        skip();
    }
    run_torch("accelerate launch --multi_gpu --num_processes 3 --num_machines 1 "
              "--mixed_precision no --dynamo_backend no train.py",
              "text");
    expect_said("one death", " 1 out-of-memory death(s), 0 memory-pressure warning(s)");
    expect_said("rank 1 and the line", "\n    rank 1 ran out of host memory at ");
    expect_said("the site", " at train.py:39 in main); ranks 0 and 2 left no bundle\n");
}

/* gmp-run around torchrun, rank 1 out: gmp-run's last line tells the
 * two ranks torchrun stopped, from the ends torchrun's preload noted. */
static void test_torchrun_under_gmp_run(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    char command[sizeof paths.build + 128];
    snprintf(command, sizeof command,
             "'%s/gmp-run' --dump-dir \"$GMP_DUMP_DIR\" -- torchrun --nproc-per-node 3 train.py",
             paths.build);
    run_torch(command, "text");
    expect_said("gmp-run's last line", "gpumemprof: torchrun run ");
    expect_said("rank 1 first", ": rank 1 ran out of host memory first, at ");
    expect_said("the ranks torchrun stopped", "; ranks 0 and 2 ended by SIGTERM ");
}

/* Ranks for torchrun: rank 1 runs out (RLIMIT_AS) and holds its
 * MemoryError; rank 0, with a ring of its own, kills itself with SIGKILL
 * (as the OOM killer kills) 0.5 s after rank 1's failure. */
static const char killed_rank_py[] =
    "import os, resource, signal, time\n"
    "rank = int(os.environ['RANK'])\n"
    "if rank == 1:\n"
    "    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
    "    hold = []\n"
    "    try:\n"
    "        while True:\n"
    "            hold.append(bytearray(64 << 20))\n"
    "    except MemoryError:\n"
    "        open('rank1-failed', 'w').close()\n"
    "        time.sleep(60)\n"
    "        raise\n"
    "if rank == 0:\n"
    "    keep = [bytearray(8 << 20) for _ in range(4)]\n"
    "    while not os.path.exists('rank1-failed'):\n"
    "        time.sleep(0.05)\n"
    "    time.sleep(0.5)\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
    "time.sleep(60)\n";

/* torchrun looking at its ranks every 10 s (--monitor-interval; 5 s was
 * the default of older releases), under gmp-run: rank 0's SIGKILL is dated
 * by gmp-run's look at the job, 0.5 s after rank 1's failure, not by
 * torchrun's reap seconds later. */
static void test_torchrun_slow_monitor_under_gmp_run(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    const char *python = torch_python();
    char file[sizeof paths.scratch + 16], commands[3000];
    snprintf(file, sizeof file, "%s/killed.py", paths.scratch);
    write_file(file, killed_rank_py, strlen(killed_rank_py));
    snprintf(commands, sizeof commands,
             "export PATH=\"$(dirname '%s'):$PATH\" TMPDIR='%s'; cd '%s' && rm -f rank1-failed && "
             "{ '%s/gmp-run' --dump-dir \"$GMP_DUMP_DIR\" -- torchrun --nproc-per-node 3 "
             "--monitor-interval 10 killed.py; } >torch.out 2>&1; tail -1 torch.out",
             python, paths.scratch, paths.scratch, paths.build);
    run_launchers(commands, "text");
    expect_said("rank 1 first", ": rank 1 ran out of host memory first, at ");
    const char *killed = strstr(out, "rank 0 ended by SIGKILL ");
    char *end = NULL;
    double later = killed ? strtod(killed + strlen("rank 0 ended by SIGKILL "), &end) : -1;
    if (!killed || strncmp(end, " s later", 8) || later < 0.3 || later > 2)
        fail_msg("rank 0's SIGKILL, 0.5 s after rank 1's failure, is not dated so:\n%s\n"
                 "stderr: %s", out, err);
}

/* torch.multiprocessing.spawn: the parent's relay of rank 1's error is no
 * death; the ranks are one run, of their launcher. */
static void test_mp_spawn(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("RLIMIT_AS");
    run_torch("python train.py spawn", "text");
    expect_said("one death", " 1 out-of-memory death(s), 0 memory-pressure warning(s)");
    expect_said("the launcher's run", "\n  run 1  multiprocessing run of launcher pid ");
    expect_said("the rank spawn gave it", "\n    rank 1 ran out of host memory at ");
    expect_said("the site", " at train.py:39 in main)\n");
    char bundle[1024];
    json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
    const char *shown = show_output(bundle);
    if (!strstr(bundle, "_cpu_r1_") ||
        !strstr(shown, "\nRun:              rank 1 (torch.multiprocessing.spawn's process "
                       "index), launcher pid "))
        fail_msg("rank 1 of the spawn is not named:\n%s\n%s", bundle, shown);
}

/* A stand-in of torch.multiprocessing.spawn's _wrap (its file's path and
 * the function's name and arguments, which is what the preload goes by):
 * the program's fn(i, *args) under it. */
static const char spawn_standin[] = "def _wrap(fn, i, args, error_file):\n"
                                    "    fn(i, *args)\n";

/* SCRIPT's lines after a stand-in spawn's import, in scratch/x.py. */
static void write_spawned(const char *script)
{
    char path[1200], text[2048];
    snprintf(path, sizeof path, "mkdir -p '%s/standin/torch/multiprocessing' && "
             "touch '%s/standin/torch/__init__.py' '%s/standin/torch/multiprocessing/__init__.py'",
             paths.scratch, paths.scratch, paths.scratch);
    run_script(&paths, path, out, sizeof out, err, sizeof err);
    snprintf(path, sizeof path, "%s/standin/torch/multiprocessing/spawn.py", paths.scratch);
    write_file(path, spawn_standin, sizeof spawn_standin - 1);
    snprintf(text, sizeof text,
             "import os, signal, sys\n"
             "sys.path.insert(0, %s + '/standin')\n"
             "from torch.multiprocessing.spawn import _wrap\n%s",
             "os.path.dirname(os.path.abspath(__file__))", script);
    snprintf(path, sizeof path, "%s/x.py", paths.scratch);
    write_file(path, text, strlen(text));
}

/* The rank a spawned process was given is read from _wrap's frame, as
 * each CPython lays its frames and ints out: the system's, pyenv's 3.9 to
 * 3.13, Debian unstable's 3.14 and 3.15 (an index past the interpreter's
 * cache of small ints, an int object of its own). */
static void test_spawn_rank_on_every_cpython(void **state)
{
    (void)state;
    skip_under_preload_sanitizer("`ulimit -v`");
    write_spawned("def main(rank):\n"
                  "    hold = []\n"
                  "    while True:\n"
                  "        hold.append(bytearray(64 << 20))\n"
                  "_wrap(main, 1001, (), None)\n");
    glob_t g;
    size_t from_pyenv, others = other_cpythons(&g, paths.build, &from_pyenv);
    for (size_t i = 0; i <= others; i++) {
        const char *python = i < others ? g.gl_pathv[i] : "python3";
        char script[4096], bundle[1024];
        snprintf(script, sizeof script,
                 "rm -rf \"$GMP_DUMP_DIR\"/*; ulimit -v 1048576; "
                 "LD_PRELOAD='%s' GMP_WATCHDOG=0 %s '%s/x.py' 2>/dev/null; echo \"status $?\"",
                 paths.preload, python, paths.scratch);
        run_script(&paths, script, out, sizeof out, err, sizeof err);
        json_decref(only_bundle_file(paths.dumps, "manifest.json", bundle, sizeof bundle));
        const char *shown = show_output(bundle);
        if (!strstr(bundle, "_cpu_r1001_") ||
            !strstr(shown, "\nRun:              rank 1001 (torch.multiprocessing.spawn's "))
            fail_msg("%s: the spawned rank is not named:\n%s\n%s", python, bundle, shown);
    }
    printf("tried the system's python3 and %zu other CPython(s)\n", others);
    if (others)
        globfree(&g);
}

/* A spawned rank killed by SIGKILL (as the OOM killer kills) under
 * gmp-run: the bundle written from its ring names its rank too. */
static void test_killed_spawn_rank_named(void **state)
{
    (void)state;
    write_spawned("def main(rank):\n"
                  "    hold = [bytearray(64 << 20) for _ in range(4)]\n"
                  "    os.kill(os.getpid(), signal.SIGKILL)\n"
                  "_wrap(main, 2, (), None)\n");
    char script[2400];
    snprintf(script, sizeof script,
             "'%s/gmp-run' --dump-dir \"$GMP_DUMP_DIR\" -- python3 '%s/x.py'; "
             "ls \"$GMP_DUMP_DIR\"; '%s' triage \"$GMP_DUMP_DIR\"",
             paths.build, paths.scratch, inspect_path());
    run_script(&paths, script, out, sizeof out, err, sizeof err);
    expect_said("its rank in the bundle's name", "_r2_");
    expect_said("its rank in the verdict", "; rank 2 ended by SIGKILL at ");
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "distributed");
    snprintf(launcher, sizeof launcher, "%s/launcher.py", paths.scratch);
    write_file(launcher, launcher_py, sizeof launcher_py - 1);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank_runs_out),
        cmocka_unit_test(test_every_rank_runs_out),
        cmocka_unit_test(test_runs_told_apart_and_joined),
        cmocka_unit_test(test_retention_keeps_the_first),
        cmocka_unit_test(test_gmp_run_tells_the_run),
        cmocka_unit_test(test_killed_rank_dated_by_its_death),
        cmocka_unit_test(test_torchrun_one_rank),
        cmocka_unit_test(test_torchrun_every_rank),
        cmocka_unit_test(test_torchrun_under_gmp_run),
        cmocka_unit_test(test_torchrun_slow_monitor_under_gmp_run),
        cmocka_unit_test(test_accelerate_launch),
        cmocka_unit_test(test_mp_spawn),
        cmocka_unit_test(test_spawn_rank_on_every_cpython),
        cmocka_unit_test(test_killed_spawn_rank_named),
    };
    return cmocka_run_group_tests(tests, setup, preload_paths_teardown);
}
