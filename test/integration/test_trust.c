/*
 * test_trust.c — what another user, or the author of a ring, may not
 * decide.  A run directory must be the caller's and closed to others for
 * every reader (recover, watch), as the preload wants it; a ring the caller
 * does not own never chooses where its bundle goes nor what retention
 * removes; a path named inside a ring is never a FIFO that hangs the reader;
 * a dump directory is never reached through a symlink at its end or one
 * another user owns on the way, and retention removes only bundles of
 * ours, passing over what it may not remove; credentials inside values
 * (URLs, headers, password flags) reach no bundle and no ring; watch
 * survives a ring truncated under it; list and the outputs follow no
 * symlink.  The cases that need another owner run as root (chown to
 * nobody) and skip with a line otherwise; one plays the whole attack with
 * two throwaway accounts, made when missing.  A bundle made to hurt its
 * reader is test_hostile_bundles.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ring.h"
#include "support.h"

#include <dirent.h>
#include <pwd.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOBODY 65534

static preload_paths paths;
static char program[1200], inspector[1024]; /* absolute: scripts here change directory */
static char out[1 << 16], err[1 << 16];

static int run_preloaded(const char *script)
{
    return run_script_preloaded(&paths, script, out, sizeof out, err, sizeof err);
}

static int run_bare(const char *script)
{
    return run_script_bare(&paths, script, out, sizeof out, err, sizeof err);
}

/* The one ring in the run directory, its path in out_path. */
static void only_ring(char *out_path, size_t cap)
{
    DIR *d = opendir(paths.rundir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "ring_", 5) && n++ == 0)
            snprintf(out_path, cap, "%s/%s", paths.rundir, e->d_name);
    closedir(d);
    if (n != 1)
        fail_msg("%d rings in %s", n, paths.rundir);
}

/* A run directory open to others, a symlink to a good one (named with a
 * trailing slash, which would follow it), and, as root, one owned by
 * someone else: recover and watch refuse each, with one line and exit 1. */
static void test_run_dir_not_ours_is_refused(void **state)
{
    (void)state;
    char script[8192];
    snprintf(script, sizeof script,
             "d='%s/open'; mkdir -p \"$d\"; chmod 0755 \"$d\"; "
             "%s recover \"$d\"; echo \"recover $?\"; "
             "GMP_RUN_DIR=\"$d\" %s watch 1 --once; echo \"watch $?\"; "
             "ln -sfn '%s' '%s/link'; %s recover '%s/link/'; echo \"link $?\"",
             paths.scratch, inspector, inspector, paths.rundir, paths.scratch,
             inspector, paths.scratch);
    run_bare(script);
    if (!strstr(out, "recover 1\n") || !strstr(out, "watch 1\n") || !strstr(out, "link 1\n") ||
        count_lines(err) != 3 || !strstr(err, "open to group or others") ||
        !strstr(err, "symbolic link"))
        fail_msg("out: %s\nstderr: %s", out, err);

    if (geteuid() != 0) {
        print_message("[     SKIP ] a run directory of another owner: needs root to chown\n");
        return;
    }
    /* someone else made it first and planted a ring naming our dump
     * directory with max_dumps=1: the ring is not even read */
    snprintf(script, sizeof script,
             "d='%s/theirs'; mkdir -p \"$d\"; chmod 0700 \"$d\"; "
             "GMP_RUN_DIR=\"$d\" GMP_MAX_DUMPS=1 LD_PRELOAD='%s' %s hold-die KILL; "
             "chown -R %d \"$d\"; %s recover \"$d\"; echo \"recover $?\"; ls \"$d\" | wc -l",
             paths.scratch, paths.preload, program, NOBODY, inspector);
    run_bare(script);
    if (strcmp(out, "recover 1\n1\n") || !strstr(err, "belongs to another user") ||
        count_prefixed(paths.dumps, "oom_dump_") != 0)
        fail_msg("out: %s\nstderr: %s", out, err);
}

/* A ring that another user owns, in our run directory, names our dump
 * directory and max_dumps=1: its bundle goes to ./oom_dumps under our
 * limits, and our three bundles stay. */
static void test_foreign_ring_chooses_nothing(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("[     SKIP ] a ring of another owner: needs root to chown\n");
        return;
    }
    char script[4096], ring[1024], ours[600], here[600];
    snprintf(ours, sizeof ours, "%s/ours", paths.scratch);
    snprintf(here, sizeof here, "%s/cwd/oom_dumps", paths.scratch);
    snprintf(script, sizeof script,
             "export GMP_DUMP_DIR='%s'; for i in 1 2 3; do %s hold-fail 1 >/dev/null; done; "
             "GMP_MAX_DUMPS=1 %s hold-die KILL",
             ours, program, program);
    run_preloaded(script);
    assert_int_equal(count_prefixed(ours, "oom_dump_"), 3);
    only_ring(ring, sizeof ring);
    assert_int_equal(chown(ring, NOBODY, NOBODY), 0);
    snprintf(script, sizeof script, "mkdir -p '%s/cwd' && cd '%s/cwd' && %s recover '%s'",
             paths.scratch, paths.scratch, inspector, paths.rundir);
    run_bare(script);
    if (!strstr(out, "bundle: ") || !strstr(out, here) || count_prefixed(ours, "oom_dump_") != 3 ||
        count_prefixed(here, "oom_dump_") != 1 || count_prefixed(paths.rundir, "ring_") != 0)
        fail_msg("out: %s\nstderr: %s\n%d bundle(s) of ours", out, err,
                 count_prefixed(ours, "oom_dump_"));
}

/* The ring of a process killed by SIGKILL names a FIFO as its cgroup's OOM
 * file: recover writes the bundle without opening it, and never hangs. */
static void test_fifo_named_by_a_ring_does_not_hang(void **state)
{
    (void)state;
    char script[4096], ring[1024], fifo[600];
    snprintf(script, sizeof script, "%s hold-die KILL", program);
    run_preloaded(script);
    only_ring(ring, sizeof ring);
    snprintf(fifo, sizeof fifo, "%s/fifo", paths.scratch);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    char names[2][sizeof fifo + 64] = {{0}};
    snprintf(names[0], sizeof names[0], "%s", fifo);
    /* named as a cgroup's file would be, and out of /sys/fs/cgroup by ".." */
    snprintf(fifo, sizeof fifo, "%s/memory.events", paths.scratch);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(names[1], sizeof names[1], "/sys/fs/cgroup/x/../../..%s", fifo);
    for (int i = 0; i < 2; i++) {
        if (i) {
            snprintf(script, sizeof script, "%s hold-die KILL", program);
            run_preloaded(script);
            only_ring(ring, sizeof ring);
        }
        int fd = open(ring, O_WRONLY);
        assert_true(fd >= 0);
        char field[sizeof ((gmp_ring_header *)0)->cgroup_oom_file] = {0};
        assert_true(strlen(names[i]) < sizeof field);
        memcpy(field, names[i], strlen(names[i]));
        assert_int_equal(pwrite(fd, field, sizeof field,
                                offsetof(gmp_ring_header, cgroup_oom_file)),
                         (ssize_t)sizeof field);
        close(fd);
        snprintf(script, sizeof script, "timeout 20 %s recover '%s'; echo \"status $?\"",
                 inspector, paths.rundir);
        run_bare(script);
        if (!strstr(out, "bundle: ") || !strstr(out, "status 0\n"))
            fail_msg("%s: out: %s\nstderr: %s", names[i], out, err);
    }
    /* a FIFO named as a ring itself: watch and export refuse it at once */
    snprintf(script, sizeof script,
             "timeout 20 %s watch '%s' --once; echo \"watch $?\"; "
             "timeout 20 %s export '%s' --format trace-json -o '%s/fifo.json'; echo \"export $?\"",
             inspector, names[0], inspector, names[0], paths.scratch);
    run_bare(script);
    if (strcmp(out, "watch 1\nexport 1\n") || !strstr(err, "not a regular file"))
        fail_msg("a FIFO as a ring: out: %s\nstderr: %s", out, err);
}

/* A failed allocation's bundle with GMP_DUMP_DIR=DIR: what stderr says. */
static void fail_into(const char *dir)
{
    char script[4096];
    snprintf(script, sizeof script, "GMP_DUMP_DIR=\"%s\" %s hold-fail 1 >/dev/null", dir,
             program);
    run_preloaded(script);
}

/* The dump directory named through a symlink at its end (also as "link/"
 * and "link/."), or below a symlink someone else owns, or owned by someone
 * else: one line, no bundle.  A symlink of ours on the way is followed. */
static void test_dump_dir_is_not_redirected(void **state)
{
    (void)state;
    char script[4096], real[700], dir[1200];
    snprintf(real, sizeof real, "%s/real", paths.scratch);
    snprintf(script, sizeof script,
             "cd '%s' && rm -rf real link way && mkdir -m 0700 real && ln -s real link && "
             "ln -s real way",
             paths.scratch);
    assert_int_equal(system(script), 0);
    const char *through_link[] = {"link", "link/", "link/.", "link//./"};
    for (size_t i = 0; i < sizeof through_link / sizeof *through_link; i++) {
        snprintf(dir, sizeof dir, "%s/%s", paths.scratch, through_link[i]);
        fail_into(dir);
        if (count_prefixed(real, "oom_dump_") != 0 || count_lines(err) != 1 ||
            !strstr(err, "symbolic link (refused)"))
            fail_msg("GMP_DUMP_DIR=%s: %d bundle(s), stderr: %s", dir,
                     count_prefixed(real, "oom_dump_"), err);
    }
    snprintf(script, sizeof script, "%s prune '%s/link/'; echo \"status $?\"", inspector,
             paths.scratch);
    run_bare(script);
    if (strcmp(out, "status 1\n"))
        fail_msg("prune through a symlink: %s %s", out, err);
    /* a symlink of ours on the way: followed */
    snprintf(dir, sizeof dir, "%s/way/dumps", paths.scratch);
    fail_into(dir);
    snprintf(dir, sizeof dir, "%s/real/dumps", paths.scratch);
    if (count_prefixed(dir, "oom_dump_") != 1 || strstr(err, "refused"))
        fail_msg("through a symlink of ours: %d bundle(s), stderr: %s",
                 count_prefixed(dir, "oom_dump_"), err);

    if (geteuid() != 0) {
        print_message("[     SKIP ] a symlink or a dump directory of another owner: needs root\n");
        return;
    }
    snprintf(script, sizeof script, "cd '%s' && chown -h %d way && mkdir -p theirs && chown %d theirs",
             paths.scratch, NOBODY, NOBODY);
    assert_int_equal(system(script), 0);
    snprintf(dir, sizeof dir, "%s/way/dumps", paths.scratch);
    fail_into(dir);
    if (count_lines(err) != 1 || !strstr(err, "neither root's nor yours"))
        fail_msg("through a symlink of another owner: stderr: %s", err);
    snprintf(dir, sizeof dir, "%s/theirs", paths.scratch);
    fail_into(dir);
    if (count_prefixed(dir, "oom_dump_") != 0 || count_lines(err) != 1 ||
        !strstr(err, "belongs to another user"))
        fail_msg("a dump directory of another owner: stderr: %s", err);
}

/* Retention counts and removes only bundles whose manifest names them, and
 * in them only the caller's files: a planted oom_dump_* without one stays
 * and is not counted; a bundle holding a subdirectory (or, as root, a file
 * of another owner) is passed over and the next oldest goes instead. */
static void test_retention_removes_only_ours(void **state)
{
    (void)state;
    char dumps[700], script[4096];
    snprintf(dumps, sizeof dumps, "%s/keep", paths.scratch);
    for (int i = 0; i < 3; i++)
        fail_into(dumps);
    assert_int_equal(count_prefixed(dumps, "oom_dump_"), 3);
    /* older than all three by name and by manifest: a copy of the oldest
     * renamed (its manifest saying so) and made hard to remove */
    snprintf(script, sizeof script,
             "cd '%s' && first=$(ls | grep ^oom_dump_ | head -1) && "
             "mkdir oom_dump_19990101T000000Z_1_cpu_1 && "
             "cp -r \"$first\" oom_dump_20000101T000000Z_2_cpu_1 && "
             "sed -i -e 's/\"bundle_name\":\"[^\"]*\"/\"bundle_name\":\"oom_dump_20000101T000000Z_2_cpu_1\"/' "
             "-e 's/\"created_at_ns\":[0-9]*/\"created_at_ns\":946684800000000000/' "
             "oom_dump_20000101T000000Z_2_cpu_1/manifest.json && "
             "mkdir oom_dump_20000101T000000Z_2_cpu_1/sub && "
             "cp -r oom_dump_20000101T000000Z_2_cpu_1 oom_dump_20000101T000000Z_3_cpu_1 && "
             "rmdir oom_dump_20000101T000000Z_3_cpu_1/sub && "
             "sed -i 's/_2_cpu_1/_3_cpu_1/' oom_dump_20000101T000000Z_3_cpu_1/manifest.json && "
             "{ [ $(id -u) != 0 ] || chown %d oom_dump_20000101T000000Z_3_cpu_1/events.json; }",
             dumps, NOBODY);
    assert_int_equal(system(script), 0);
    snprintf(script, sizeof script, "%s prune '%s' --max-dumps 1 && ls '%s'", inspector,
             dumps, dumps);
    run_bare(script);
    /* root: both copies are passed over; otherwise the second is ours */
    int root = geteuid() == 0;
    if (!strstr(out, root ? "removed 2 bundle(s)" : "removed 3 bundle(s)") ||
        !strstr(out, "oom_dump_19990101T000000Z_1_cpu_1\n") ||
        !strstr(out, "oom_dump_20000101T000000Z_2_cpu_1\n") ||
        (root != (strstr(out, "oom_dump_20000101T000000Z_3_cpu_1\n") != NULL)) ||
        count_prefixed(dumps, "oom_dump_2026") + count_prefixed(dumps, "oom_dump_2027") != 1)
        fail_msg("prune: %s %s", out, err);
}

/* Every file of every bundle in dir, and every ring, concatenated. */
static void all_written(const char *dir)
{
    char script[2048];
    snprintf(script, sizeof script, "cat '%s'/oom_dump_*/* '%s'/ring_* 2>/dev/null", dir,
             paths.rundir);
    run_bare(script);
}

/* Secrets in a command line, in allow-listed variables and in an OOM line
 * on stderr: none is written, in a bundle or in a ring; the names around
 * them still are.  Terraform's TF_* variables are not TensorFlow's. */
static void test_credentials_are_masked(void **state)
{
    (void)state;
    char script[8192], dumps[700];
    snprintf(dumps, sizeof dumps, "%s/secrets", paths.scratch);
    snprintf(script, sizeof script,
             "export GMP_DUMP_DIR='%s' TF_CLI_CONFIG_FILE=/home/u/.terraformrc "
             "TF_VAR_db=hunter0 TF_FORCE_GPU_ALLOW_GROWTH=true "
             "NCCL_NET_PLUGIN=https://proxyuser:hunter1@proxy.example:3128/x "
             "XLA_FLAGS='--dump_to=gs://tok:hunter2@bucket/p --token=hunter12 Bearer hunter13' "
             "GMP_CONTEXT='fetch https://u:hunter14@x.example/w' "
             "GMP_METADATA='{\"dsn\":\"admin:hunter15@db.example\"}'; "
             "cp %s '%s/mysqlish'; "
             "%s hold-fail 1 https://user:hunter3@host.example/db postgres://u:hunter4@h/db "
             "--passphrase hunter5 -H 'Authorization: Bearer hunter6' "
             "'https://hunter7@github.com/o/r.git' >/dev/null; "
             "'%s/mysqlish' hold-fail 1 -uroot -phunter8 >/dev/null; "
             "%s hold-die KILL https://user:hunter9@host/ --password=hunter10; "
             /* CUDA's words, from a process with a CUDA runtime loaded (a stand-in) */
             "LD_PRELOAD=\"$LD_PRELOAD %s/test/doubles/speakers/libcudart_standin.so\" "
             "/usr/bin/python3 -c 'import sys; sys.stderr.write(\"RuntimeError: CUDA out of "
             "memory while fetching https://u:hunter11@h.example/w.bin\\n\")'",
             dumps, program, paths.scratch, program, paths.scratch, program, paths.build);
    run_preloaded(script);
    assert_int_equal(count_prefixed(dumps, "oom_dump_"), 3);
    assert_int_equal(count_prefixed(paths.rundir, "ring_"), 1);
    all_written(dumps);
    if (strstr(out, "hunter") || strstr(out, "TF_CLI_CONFIG_FILE") || strstr(out, "TF_VAR_db"))
        fail_msg("a secret or a Terraform variable was written:\n%.4000s",
                 strstr(out, "hunter") ? strstr(out, "hunter") - 200 : out);
    const char *kept[] = {"host.example/db", "@proxy.example:3128", "Authorization: ",
                          "--passphrase", "-uroot", "TF_FORCE_GPU_ALLOW_GROWTH",
                          "CUDA out of memory while fetching https://", "@h.example/w.bin"};
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        if (!strstr(out, kept[i]))
            fail_msg("'%s' is missing: the masking took too much", kept[i]);
}

/* A ring truncated while watch reads it: one line and exit 1, not SIGBUS. */
static void test_watch_survives_a_shrinking_ring(void **state)
{
    (void)state;
    char script[8192];
    snprintf(script, sizeof script,
             "LD_PRELOAD='%s' %s fail-sleep >/dev/null 2>&1 & p=$!; i=0; "
             "until r=$(ls \"$GMP_RUN_DIR\"/ring_${p}_* 2>/dev/null) || [ $i -ge 300 ]; do "
             "sleep 0.1; i=$((i + 1)); done; sleep 0.2; "
             "( %s watch \"$r\" --interval 0.05 >/dev/null; echo \"watch $?\" ) & w=$!; "
             "sleep 0.3; truncate -s 100 \"$r\"; wait $w; wait $p; rm -f \"$r\"",
             paths.preload, program, inspector);
    run_bare(script);
    if (strcmp(out, "watch 1\n") || !strstr(err, "shrank under us"))
        fail_msg("out: %s\nstderr: %s", out, err);
}

/* list reads no bundle through a symlinked entry of the directory. */
static void test_list_follows_no_symlink(void **state)
{
    (void)state;
    char script[4096];
    char *fixtures = fixtures_dir_absolute();
    snprintf(script, sizeof script,
             "cd '%s' && rm -rf listed elsewhere && mkdir listed && "
             "cp -r '%.1000s/python_seed/oom_dump_20260303T120000Z_12345_cuda_1' elsewhere && "
             "ln -s ../elsewhere listed/oom_dump_20260303T120000Z_12345_cuda_1 && "
             "%s list listed; echo \"status $?\"; %s triage listed; echo \"triage $?\"",
             paths.scratch, fixtures, inspector, inspector);
    free(fixtures);
    run_bare(script);
    if (!strstr(out, "is a symbolic link (not followed)") || strstr(out, "OutOfMemoryError") ||
        !strstr(out, "status 1\n"))
        fail_msg("out: %s\nstderr: %s", out, err);
    /* triage counts it unreadable and fails, as list does, not a silent pass */
    if (!strstr(out, "0 signature(s) in 1 bundle(s)") || !strstr(out, "1 unreadable") ||
        !strstr(out, "is a symbolic link (refused)") || !strstr(out, "triage 1\n"))
        fail_msg("triage of a symlinked bundle: %s\nstderr: %s", out, err);
}

/* plot -o and export -o: a symlink another user planted at the name is
 * refused (its target stays as it was), a FIFO nobody reads is refused at
 * once (no hang), a file there is replaced by a whole new one, 0600
 * whatever the umask (it carries the process names, host and module paths
 * of a 0600 bundle); /dev/null stays the device it is, and /dev/stdout
 * (root's symlink to a pipe) is written through. */
static void test_outputs_follow_no_symlink(void **state)
{
    (void)state;
    int other = throwaway_user("gmp-planter");
    char script[8192];
    char *fixtures = fixtures_dir_absolute();
    snprintf(script, sizeof script,
             "cd '%s' && rm -rf outs && mkdir outs && cd outs && umask 022 && "
             "b='%.1000s/python_seed/oom_dump_20260303T120000Z_12345_cuda_1' && "
             "echo precious > target && ln -s target link.svg && %s "
             "echo old > plain.json && chmod 0644 plain.json && mkfifo fifo.svg && "
             "timeout 20 %s plot \"$b\" -o link.svg; echo \"link $?\"; "
             "timeout 20 %s plot \"$b\" -o fifo.svg; echo \"fifo $?\"; "
             "timeout 20 %s export \"$b\" --format trace-json -o plain.json; echo \"plain $?\"; "
             "timeout 20 %s plot \"$b\" -o new.svg; echo \"new $?\"; "
             "timeout 20 %s export \"$b\" --format trace-json -o /dev/null; echo \"null $?\"; "
             "timeout 20 %s export \"$b\" --format trace-json -o /dev/stdout | grep -c traceEvents; "
             "cat target; stat -c '%%F %%a' plain.json new.svg; stat -c '%%F' /dev/null fifo.svg; "
             "ls -A | grep -c gmp-inspect",
             paths.scratch, fixtures,
             other >= 0 ? "chown -h gmp-planter link.svg &&" : "", inspector, inspector,
             inspector, inspector, inspector, inspector);
    free(fixtures);
    run_bare(script);
    char want[512];
    snprintf(want, sizeof want,
             "link %d\nfifo 1\nplain 0\nnew 0\nnull 0\n1\nprecious\nregular file 600\n"
             "regular file 600\ncharacter special file\nfifo\n0\n",
             other >= 0 ? 1 : 0);
    if (strcmp(out, want))
        fail_msg("out: %s\nwant: %s\nstderr: %s", out, want, err);
}

/* The attack as it was seen, with two ordinary accounts: with
 * XDG_RUNTIME_DIR unset, the attacker makes the victim's default run
 * directory first and plants a ring in it that names the victim's dump
 * directory with max_dumps=1.  The victim's recover refuses the directory
 * (one line, exit 1) and the victim's bundles stay; the victim's preloaded
 * program refuses it too and runs on.  A victim with a home of its own
 * keeps its rings there instead (one line says where), and a killed
 * process's ring is recovered from it. */
static void test_two_users(void **state)
{
    (void)state;
    if (geteuid() != 0 || preload_sanitizer()) {
        print_message("[     SKIP ] two throwaway accounts: needs root, and no sanitizer\n");
        return;
    }
    int victim = throwaway_user("gmp-trust-victim"), attacker = throwaway_user("gmp-trust-attacker");
    if (victim < 0 || attacker < 0) {
        print_message("[     SKIP ] two throwaway accounts: useradd failed\n");
        return;
    }
    char script[16384], as_victim[64], as_attacker[64];
    snprintf(as_victim, sizeof as_victim, "setpriv --reuid=%d --regid=%d --clear-groups", victim,
             victim);
    snprintf(as_attacker, sizeof as_attacker, "setpriv --reuid=%d --regid=%d --clear-groups",
             attacker, attacker);
    /* can the accounts run what was built here at all? */
    snprintf(script, sizeof script, "%s %s quiet >/dev/null 2>&1 && %s %s --version >/dev/null",
             as_victim, program, as_victim, inspector);
    if (run_bare(script) != 0) {
        print_message("[     SKIP ] two throwaway accounts: they cannot run this build\n");
        return;
    }
    snprintf(script, sizeof script,
             "unset XDG_RUNTIME_DIR GMP_RUN_DIR GMP_DUMP_DIR; run=/tmp/gpumemprof-%d; "
             "rm -rf \"$run\" /tmp/gmp-trust-victim-dumps; "
             "mkdir -m 0700 /tmp/gmp-trust-victim-dumps && chown %d /tmp/gmp-trust-victim-dumps; "
             "%s mkdir -m 0700 \"$run\"; "
             "%s env GMP_RUN_DIR=\"$run\" GMP_DUMP_DIR=/tmp/gmp-trust-victim-dumps "
             "GMP_MAX_DUMPS=1 LD_PRELOAD='%s' %s hold-die KILL; "
             "echo \"planted $(ls \"$run\" | wc -l)\"; "
             "for i in 1 2 3; do %s env GMP_DUMP_DIR=/tmp/gmp-trust-victim-dumps "
             "LD_PRELOAD='%s' %s hold-fail 1 >/dev/null; echo \"program $?\"; done; "
             "%s %s recover; echo \"recover $?\"; "
             "echo \"bundles $(ls /tmp/gmp-trust-victim-dumps | grep -c ^oom_dump_)\"; "
             /* with a home of its own, the victim's rings go there instead: a
              * killed process's ring is recovered from it, nothing is lost */
             "h=/tmp/gmp-trust-victim-home; rm -rf \"$h\"; mkdir -m 0700 \"$h\" && chown %d \"$h\"; "
             "%s env HOME=\"$h\" GMP_DUMP_DIR=/tmp/gmp-trust-victim-dumps LD_PRELOAD='%s' "
             "%s hold-die KILL 2>\"$h.err\"; "
             "echo \"home rings $(ls \"$h/.gpumemprof-run\" | grep -c ^ring_)\"; "
             "%s env HOME=\"$h\" %s recover >/dev/null; echo \"home recover $?\"; "
             "echo \"bundles $(ls /tmp/gmp-trust-victim-dumps | grep -c ^oom_dump_)\"; "
             "echo \"home rings $(ls \"$h/.gpumemprof-run\" | grep -c ^ring_)\"; "
             "grep -c \"belongs to another user; rings go to $h/.gpumemprof-run\" \"$h.err\"; "
             "rm -rf \"$run\" /tmp/gmp-trust-victim-dumps \"$h\" \"$h.err\"",
             victim, victim, as_attacker, as_attacker, paths.preload, program, as_victim,
             paths.preload, program, as_victim, inspector, victim, as_victim, paths.preload,
             program, as_victim, inspector);
    run_bare(script);
    /* the victim's programs run on (recording in memory) and write their
     * bundles; with a home, their rings go there, said in one line */
    if (strcmp(out, "planted 1\nprogram 0\nprogram 0\nprogram 0\nrecover 1\nbundles 3\n"
                    "home rings 1\nhome recover 0\nbundles 4\nhome rings 0\n1\n") ||
        !strstr(err, "unusable (it belongs to another user)") ||
        !strstr(err, "gmp-inspect recover: refusing /tmp/gpumemprof-") ||
        !strstr(err, "belongs to another user"))
        fail_msg("out: %s\nstderr: %s", out, err);
}

static int empty_dirs(void **state)
{
    (void)state;
    char script[2400];
    snprintf(script, sizeof script, "rm -rf '%s'/ring_* '%s/cwd' '%s/ours' '%s/keep' '%s/secrets'",
             paths.rundir, paths.scratch, paths.scratch, paths.scratch, paths.scratch);
    return system(script) == 0 ? 0 : -1;
}

static int setup(void **state)
{
    *state = &paths;
    preload_paths_make(&paths, "trust");
    if (inspect_path_absolute(inspector, sizeof inspector) != 0)
        return -1;
    snprintf(program, sizeof program, "%s/test/programs/host_oom", paths.build);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_run_dir_not_ours_is_refused, empty_dirs),
        cmocka_unit_test_setup(test_foreign_ring_chooses_nothing, empty_dirs),
        cmocka_unit_test_setup(test_fifo_named_by_a_ring_does_not_hang, empty_dirs),
        cmocka_unit_test_setup(test_dump_dir_is_not_redirected, empty_dirs),
        cmocka_unit_test_setup(test_retention_removes_only_ours, empty_dirs),
        cmocka_unit_test_setup(test_credentials_are_masked, empty_dirs),
        cmocka_unit_test_setup(test_watch_survives_a_shrinking_ring, empty_dirs),
        cmocka_unit_test(test_list_follows_no_symlink),
        cmocka_unit_test(test_outputs_follow_no_symlink),
        cmocka_unit_test(test_two_users),
    };
    return cmocka_run_group_tests_name("trust", tests, setup, preload_paths_teardown);
}
