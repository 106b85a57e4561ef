/*
 * test_spank.c — the Slurm plugin (spank_gmp.so) loaded as root by this
 * program, which stands in for slurmstepd (and for srun, as the user): no
 * Slurm needed.  It gives the plugin the SPANK calls Slurm gives it and
 * runs each task as slurmstepd does: forked, placed in a memory cgroup of
 * its own, noted at post-fork, released to exec as a second account,
 * reaped, handed to task-exit.  Around the plugin it keeps slurmstepd's own
 * state: OOM score -1000, SIGTERM blocked and SIGPIPE ignored, root's files
 * and sockets open.  A spy in gmp-inspect's place writes down what the
 * user's side was handed; this program's own name-service functions note a
 * call from a forked child.  The real single-node Slurm stage
 * (test/slurm/run.sh) checks the same plugin in Slurm.
 *
 * Needs root, a memory cgroup, a second account that can run this build,
 * and slurm/spank.h; skipped with a line otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ring.h"
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if __has_include(<slurm/spank.h>)
#include "spank_standin.h"

#define BATCH_STEP 0xfffffffbu /* slurm/slurm.h's SLURM_BATCH_SCRIPT */
#define GROW_PY                                                                            \
    "import time\nkept = []\nwhile True:\n    kept.append(bytearray(4 << 20))\n"          \
    "    time.sleep(0.005)\n"

static char inspector[1100]; /* absolute, as the plugin's own build (slurm.build) */
static char scratch[256], home[512], dumps[512], rundir[512], spy[1200];
static const char *ready; /* NULL, or why the tests skip */

static int saved_oom_adj_fd = -1;
static char saved_dmesg_restrict[8];
static int root_file = -1, root_socket[2] = {-1, -1};

static int setup(void **state)
{
    (void)state;
    slurm.main_pid = getpid();
    if (!realpath(getenv("GMP_BUILD") ? getenv("GMP_BUILD") : "build", slurm.build) ||
        !realpath(inspect_path(), inspector)) {
        ready = "the build directory is not there";
        return 0;
    }
    char so[1200];
    snprintf(so, sizeof so, "%s/spank_gmp.so", slurm.build);
    int uid = geteuid() == 0 ? throwaway_user("gmp-spank-user") : -1;
    if (geteuid() != 0)
        ready = "not root: slurmstepd runs as root";
    else if (access(so, R_OK) != 0)
        ready = "the plugin was not built";
    else if (uid < 0)
        ready = "no second account could be made (useradd)";
    else if (preload_sanitizer())
        ready = "the preload is built with a sanitizer (the account cannot load its runtime)";
    if (ready)
        return 0;
    scratch_make(scratch, sizeof scratch, "spank");
    chmod(scratch, 0755);
    snprintf(home, sizeof home, "%s/home", scratch);
    snprintf(dumps, sizeof dumps, "%s/home/dumps", scratch);
    snprintf(rundir, sizeof rundir, "%s/home/run", scratch);
    snprintf(slurm.nss_mark, sizeof slurm.nss_mark, "%s/nss-after-fork", scratch);
    snprintf(slurm.task_dir, sizeof slurm.task_dir, "%s", home);
    snprintf(spy, sizeof spy, "%s/test/programs/spank_spy",
             slurm.build);
    mkdir(home, 0700);
    mkdir(rundir, 0700);
    struct passwd *pw = getpwuid((uid_t)uid);
    slurm.uid = (uid_t)uid;
    slurm.gid = pw ? pw->pw_gid : (gid_t)uid;
    slurm.gids[0] = slurm.gid;
    slurm.gids[1] = 65534; /* a supplementary group Slurm resolved for the job */
    slurm.ngids = 2;
    if (chown(home, slurm.uid, slurm.gid) || chown(rundir, slurm.uid, slurm.gid)) {
        ready = "cannot give the account its directories";
        return 0;
    }
    char check[3000];
    snprintf(check, sizeof check,
             "setpriv --reuid=%d --regid=%d --clear-groups env HOME=%s %s && rm %s/spy.report",
             uid, (int)slurm.gid, home, spy, home);
    char name[64];
    snprintf(name, sizeof name, "gmp-spank-%d", (int)getpid());
    if (system(check) != 0)
        ready = "the second account cannot run this build";
    else if (memcg_make(name, "67108864", slurm.task_cgroup, sizeof slurm.task_cgroup) < 0)
        ready = "no memory cgroup to run the tasks in";
    if (ready)
        return 0;
    /* slurmstepd's own state, which nothing of the user's may inherit */
    saved_oom_adj_fd = open("/proc/self/oom_score_adj", O_RDONLY);
    int adj = open("/proc/self/oom_score_adj", O_WRONLY); /* where root may lower it */
    if (adj >= 0 && write(adj, "-1000", 5) != 5)
        print_message("[     NOTE ] oom_score_adj cannot be lowered here: its reset is not seen\n");
    if (adj >= 0)
        close(adj);
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGINT);
    sigprocmask(SIG_BLOCK, &blocked, NULL);
    signal(SIGPIPE, SIG_IGN);
    root_file = open("/etc/shadow", O_RDONLY); /* not close-on-exec, as a careless daemon's */
    socketpair(AF_UNIX, SOCK_STREAM, 0, root_socket);
    /* and the kernel log closed to users, as a cluster keeps it */
    int fd = open("/proc/sys/kernel/dmesg_restrict", O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, saved_dmesg_restrict, sizeof saved_dmesg_restrict - 1) : -1;
    saved_dmesg_restrict[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
    if (saved_dmesg_restrict[0] && saved_dmesg_restrict[0] != '1')
        write_text("/proc/sys/kernel/dmesg_restrict", "1");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (!scratch[0])
        return 0;
    if (saved_dmesg_restrict[0] && saved_dmesg_restrict[0] != '1')
        write_text("/proc/sys/kernel/dmesg_restrict", saved_dmesg_restrict);
    if (saved_oom_adj_fd >= 0) {
        char was[16] = "0";
        ssize_t n = read(saved_oom_adj_fd, was, sizeof was - 1);
        was[n > 0 ? n : 1] = '\0';
        write_text("/proc/self/oom_score_adj", was);
    }
    if (slurm.task_cgroup[0])
        rmdir(slurm.task_cgroup);
    scratch_remove(scratch);
    return 0;
}

#define NEED_READY()                                                                       \
    do {                                                                                   \
        if (ready) {                                                                       \
            print_message("[     SKIP ] %s\n", ready);                                     \
            skip();                                                                        \
        }                                                                                  \
    } while (0)

/* Root's verdict comes from the kernel log: where root cannot read it (a
 * container without CAP_SYSLOG), the test is skipped, said. */
static void need_kernel_log(void)
{
    int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        print_message("[     SKIP ] root cannot read the kernel log here\n");
        skip();
    }
    close(fd);
}

static void reset_home(void)
{
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'/spy.* '%s' '%s'/* '%s'", home, dumps, rundir,
             slurm.nss_mark);
    assert_int_equal(system(cmd), 0);
}

/* ---- the tests --------------------------------------------------------- */

/* A task killed with kill -9: recover is started for it holding nothing
 * that root opened or holds (no descriptor past 0-2, each /dev/null; no
 * capability; the job's user and groups; not slurmstepd's OOM immunity,
 * signal mask or session; in the task's own cgroup), told the task's pid
 * and signal, with the task's run directory; task-exit does not wait for
 * it, and no name-service lookup ran in a child of slurmstepd. */
static void test_recover_holds_nothing_of_roots(void **state)
{
    (void)state;
    NEED_READY();
    reset_home();
    job_env(home, rundir, "XDG_RUNTIME_DIR=/run/user/4242");
    load_plugin(S_CTX_REMOTE, spy, dumps);
    slurm.job_id = 7, slurm.step_id = 0, slurm.local_tasks = 1;
    const char *argv[] = {"/bin/sleep", "30", NULL};
    task_run r = {.argv = argv, .kill_after_ms = 200};
    run_task(&r);
    read_report();
    char v[4096], want[1024];
    /* what slurmstepd held, and the spy did not */
    assert_true(root_file >= 0);
    const char *fds = strstr(report, "\nfd ");
    for (const char *at = fds; at; at = strstr(at + 1, "\nfd ")) {
        int fd = atoi(at + 4);
        const char *target = strchr(at + 4, ' ') + 1;
        if (fd > 2 || strncmp(target, "/dev/null\n", 10))
            fail_msg("the recover holds %.*s", (int)strcspn(at + 1, "\n"), at + 1);
    }
    assert_non_null(fds);
    snprintf(want, sizeof want, "%d\t%d\t%d\t%d", (int)slurm.uid, (int)slurm.uid, (int)slurm.uid,
             (int)slurm.uid);
    assert_string_equal(reported("status Uid:\t", v, sizeof v), want);
    snprintf(want, sizeof want, "%d\t%d\t%d\t%d", (int)slurm.gid, (int)slurm.gid, (int)slurm.gid,
             (int)slurm.gid);
    assert_string_equal(reported("status Gid:\t", v, sizeof v), want);
    reported("status Groups:\t", v, sizeof v);
    snprintf(want, sizeof want, "%d", (int)slurm.gid);
    if (!strstr(v, want) || !strstr(v, "65534") || strstr(v, " 0 ") || !strncmp(v, "0 ", 2))
        fail_msg("groups: %s", v);
    assert_string_equal(reported("status CapEff:\t", v, sizeof v), "0000000000000000");
    assert_string_equal(reported("status CapPrm:\t", v, sizeof v), "0000000000000000");
    assert_string_equal(reported("status SigBlk:\t", v, sizeof v), "0000000000000000");
    assert_string_equal(reported("status SigIgn:\t", v, sizeof v), "0000000000000000");
    assert_string_equal(reported("oom_score_adj ", v, sizeof v), "0");
    char sid[32], pid[32];
    assert_string_equal(reported("sid ", sid, sizeof sid), reported("pid ", pid, sizeof pid));
    /* in the task's memory cgroup, where it dies with the step */
    if (!strstr(report, strrchr(slurm.task_cgroup, '/')))
        fail_msg("the recover is not in the task's cgroup %s: %s", slurm.task_cgroup, report);
    /* told what slurmstepd saw, and nothing of the kernel log */
    snprintf(want, sizeof want, "\narg recover\narg --pid\narg %d\narg --signal\narg 9\n",
             (int)r.pid);
    if (!strstr(report, want))
        fail_msg("arguments: %s", report);
    snprintf(want, sizeof want, "\nenv GMP_RUN_DIR=%s\n", rundir);
    if (!strstr(report, want) || !strstr(report, "\nenv XDG_RUNTIME_DIR=/run/user/4242\n") ||
        strstr(report, "KMSG") || strstr(report, "LD_PRELOAD"))
        fail_msg("environment: %s", report);
    assert_true(access(slurm.nss_mark, F_OK) != 0);
    assert_true(r.exit_ms < 1000);
    unload_plugin();
}

/* A user who stops their recover (the spy stops itself): task-exit of the
 * step's last task still returns well under a second, and the stopped
 * recover is killed, not left holding the step. */
static void test_stopped_recover_holds_nothing(void **state)
{
    (void)state;
    NEED_READY();
    reset_home();
    char stop[600];
    snprintf(stop, sizeof stop, "%s/spy.stop", home);
    write_file(stop, "", 0);
    assert_int_equal(chown(stop, slurm.uid, slurm.gid), 0);
    job_env(home, rundir, NULL);
    load_plugin(S_CTX_REMOTE, spy, dumps);
    slurm.local_tasks = 1;
    const char *argv[] = {"/bin/sleep", "30", NULL};
    task_run r = {.argv = argv, .kill_after_ms = 200};
    run_task(&r);
    read_report();
    char v[64];
    pid_t spy_pid = (pid_t)atoi(reported("pid ", v, sizeof v));
    assert_true(spy_pid > 0);
    if (r.exit_ms >= 1000)
        fail_msg("task-exit took %d ms", r.exit_ms);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%d", (int)spy_pid);
    if (access(proc, F_OK) == 0)
        fail_msg("the stopped recover %d is still there", (int)spy_pid);
    unload_plugin();
}

/* The bundle of a task the cgroup's OOM killer ended (the preload in it
 * from task-init): "killed by the kernel's OOM killer", the kernel log's
 * words, which root read, while the account cannot read the log itself;
 * written as the account, in its directory. */
static void test_oom_kill_verdict_is_roots(void **state)
{
    (void)state;
    NEED_READY();
    need_kernel_log();
    char check[600];
    snprintf(check, sizeof check,
             "setpriv --reuid=%d --regid=%d --clear-groups head -c1 /dev/kmsg >/dev/null 2>&1",
             (int)slurm.uid, (int)slurm.gid);
    assert_int_not_equal(system(check), 0);
    reset_home();
    job_env(home, rundir, NULL);
    load_plugin(S_CTX_REMOTE, inspector, dumps);
    slurm.local_tasks = 1;
    const char *argv[] = {"/usr/bin/python3", "-c", GROW_PY, NULL};
    task_run r = {.argv = argv};
    run_task(&r);
    assert_true(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL);
    char bundle[1024];
    json_t *md = only_bundle_file(dumps, "metadata.json", bundle, sizeof bundle);
    char said[128];
    snprintf(said, sizeof said, "oom_killer: the kernel log says \"Killed process %d\"",
             (int)r.pid);
    if (!strstr(json_str(md, "evidence"), said))
        fail_msg("evidence: %s", json_str(md, "evidence"));
    json_decref(md);
    expect_headline(bundle, "the process was killed by the kernel's OOM killer");
    struct stat st;
    assert_int_equal(stat(bundle, &st), 0);
    assert_int_equal(st.st_uid, slurm.uid);
    unload_plugin();
}

/* A ring the account forged to name a root process the OOM killer killed
 * while the step ran (another cgroup's): its bundle gets no word of the
 * OOM killer; root's verdict is of the task's own processes only. */
static pid_t root_victim;
static unsigned long long root_victim_start;

static void kill_a_root_process(void)
{
    char name[64], root_cg[512];
    snprintf(name, sizeof name, "gmp-spank-root-%d", (int)getpid());
    assert_int_equal(memcg_make(name, "67108864", root_cg, sizeof root_cg), 0);
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1)
            _exit(1);
        execl("/usr/bin/python3", "python3", "-c", GROW_PY, (char *)NULL);
        _exit(127);
    }
    close(go[0]);
    char text[32], procs[600], stat_path[64], line[1024];
    snprintf(text, sizeof text, "%d", (int)pid);
    snprintf(procs, sizeof procs, "%s/cgroup.procs", root_cg);
    write_text(procs, text);
    snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(stat_path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    const char *after = strrchr(line, ')') + 2; /* state is field 3; starttime 22 */
    for (int field = 3; field < 22; field++)
        after = strchr(after, ' ') + 1;
    root_victim_start = strtoull(after, NULL, 10);
    assert_int_equal(write(go[1], "x", 1), 1);
    close(go[1]);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    root_victim = pid;
    rmdir(root_cg);
}

/* the account's own ring of a process it killed, made to name the victim */
static void forge_ring(void)
{
    char script[4096];
    snprintf(script, sizeof script,
             "exec 2>/dev/null; setpriv --reuid=%d --regid=%d --clear-groups env GMP_RUN_DIR=%s "
             "GMP_DUMP_DIR=%s LD_PRELOAD=%s/libgpumemprof_preload.so /usr/bin/python3 -c "
             "'import os; x = [bytearray(2 << 20) for _ in range(4)]; os.kill(os.getpid(), 9)'",
             (int)slurm.uid, (int)slurm.gid, rundir, dumps,
             slurm.build);
    int rc = system(script);
    (void)rc;
    assert_int_equal(count_prefixed(rundir, "ring_"), 1);
    char cmd[1200], name[512] = "", path[1200], forged[1200];
    snprintf(cmd, sizeof cmd, "ls '%s'", rundir);
    FILE *p = popen(cmd, "r");
    assert_non_null(fgets(name, sizeof name, p));
    pclose(p);
    name[strcspn(name, "\n")] = '\0';
    snprintf(path, sizeof path, "%s/%s", rundir, name);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    gmp_ring_header h;
    assert_int_equal(pread(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    h.pid = (int)root_victim;
    h.proc_start_ticks = root_victim_start;
    assert_int_equal(pwrite(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    close(fd);
    snprintf(forged, sizeof forged, "%s/ring_%d_1.gmr", rundir, (int)root_victim);
    assert_int_equal(rename(path, forged), 0);
}

static void victim_then_forgery(void)
{
    kill_a_root_process();
    forge_ring();
}

static void test_forged_ring_gets_no_verdict(void **state)
{
    (void)state;
    NEED_READY();
    reset_home();
    job_env(home, rundir, NULL);
    load_plugin(S_CTX_REMOTE, inspector, dumps);
    slurm.local_tasks = 1;
    const char *argv[] = {"/bin/sleep", "30", NULL};
    task_run r = {.argv = argv, .meanwhile = victim_then_forgery, .kill_after_ms = 100};
    run_task(&r);
    char bundle[1024];
    json_t *md = only_bundle_file(dumps, "metadata.json", bundle, sizeof bundle);
    char pid[32];
    snprintf(pid, sizeof pid, "_%d_", (int)root_victim);
    if (!strstr(bundle, pid))
        fail_msg("the forged ring's bundle is not the one written: %s", bundle);
    if (strstr(json_str(md, "evidence"), "oom_killer") ||
        !strcmp(json_str(md, "exception_type"), "oom_killer"))
        fail_msg("a forged ring was given the OOM killer's verdict: %s",
                 json_str(md, "evidence"));
    json_decref(md);
    unload_plugin();
}

/* A batch script (no srun) whose python the cgroup's OOM killer ends: the
 * script has the preload and the launchers' mark; the python's bundle has
 * root's verdict (a process of the task's cgroup, not the task); the line
 * lands in the job's output, opened by the account. */
static void test_batch_script_python(void **state)
{
    (void)state;
    NEED_READY();
    need_kernel_log();
    reset_home();
    job_env(home, rundir, NULL);
    load_plugin(S_CTX_REMOTE, inspector, dumps);
    slurm.step_id = BATCH_STEP, slurm.local_tasks = 1;
    char output[600];
    snprintf(output, sizeof output, "%s/slurm-7.out", home);
    int out = open(output, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(out >= 0);
    assert_int_equal(fchown(out, slurm.uid, slurm.gid), 0);
    int saved = dup(2);
    dup2(out, 2); /* slurmstepd's stderr is the batch script's */
    close(out);
    const char *argv[] = {"/bin/sh", "-c",
                          "echo \"mark=$GMP_SLURM_SCRIPT\" >&2; /usr/bin/python3 -c '" GROW_PY
                          "'; echo the script went on >&2",
                          NULL};
    task_run r = {.argv = argv};
    run_task(&r);
    dup2(saved, 2);
    close(saved);
    slurm.step_id = 0;
    assert_true(WIFEXITED(r.status));
    char text[8192] = "";
    FILE *f = fopen(output, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    char bundle[1024];
    json_t *md = only_bundle_file(dumps, "metadata.json", bundle, sizeof bundle);
    char said[1400];
    snprintf(said, sizeof said, " was killed by the kernel's OOM killer; bundle: %s\n", bundle);
    if (!strstr(text, "mark=1\n") || !strstr(text, "the script went on\n") ||
        !strstr(text, said))
        fail_msg("the job's output: %s", text);
    if (!strstr(json_str(md, "evidence"), "oom_killer: the kernel log says"))
        fail_msg("evidence: %s", json_str(md, "evidence"));
    json_decref(md);
    unload_plugin();
}

/* srun's line for step 77.0 with its bundles in dir: the plugin run as
 * srun runs it, in the account's own process. */
static void step_line(const char *dir, char *line, size_t cap)
{
    char err_path[600];
    snprintf(err_path, sizeof err_path, "%s/srun.err", scratch);
    load_plugin(S_CTX_LOCAL, inspector, dir);
    slurm.job_id = 77, slurm.step_id = 0;
    hook_fn user_init = hook("slurm_spank_local_user_init"), at_exit = hook("slurm_spank_exit");
    pid_t pid = fork();
    if (pid == 0) { /* srun: the user's own process (no cmocka here) */
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fd < 0 || dup2(fd, 2) < 0 || setgid(slurm.gid) || setuid(slurm.uid) ||
            setenv("HOME", home, 1))
            _exit(125);
        user_init(handle, 0, NULL);
        at_exit(handle, 0, NULL);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    unload_plugin();
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    FILE *f = fopen(err_path, "r");
    size_t n = f ? fread(line, 1, cap - 1, f) : 0;
    line[n] = '\0';
    if (f)
        fclose(f);
}

/* srun's line, as the account: bundles another account planted in a
 * shared directory (the account's own, open to all) are not counted; a
 * name's control characters are printed escaped. */
static void test_step_line_trusts_only_the_users_own(void **state)
{
    (void)state;
    NEED_READY();
    int planter = throwaway_user("gmp-spank-planter");
    reset_home();
    char shared[600], own[600], script[8192];
    snprintf(shared, sizeof shared, "%s/shared", scratch);
    snprintf(own, sizeof own, "%s/own\033x", home);
    snprintf(script, sizeof script,
             "mkdir -p -m 1777 '%s' && chown %d '%s' && mkdir -m 0700 '%s' && chown %d '%s' && "
             "b='%s/oom_dump_00000000T000000Z_1_cpu_1' && mkdir \"$b\" && "
             "echo '{\"slurm_job\":\"77.0\"}' >\"$b/manifest.json\" && "
             "echo '{\"reason\":\"ENOMEM\",\"failed_request\":{\"size\":1}}' "
             ">\"$b/metadata.json\" && chown -R %d \"$b\" && "
             "for i in 1 2 3; do p=\"%s/oom_dump_0_1_cpu_$(printf '\\033[2J')$i\"; "
             "mkdir \"$p\" && echo '{\"slurm_job\":\"77.0\"}' >\"$p/manifest.json\" && "
             "echo '{\"reason\":\"SIGKILL\"}' >\"$p/metadata.json\" && chown -R %d \"$p\"; done",
             shared, (int)slurm.uid, shared, own, (int)slurm.uid, own, own, (int)slurm.uid, shared,
             planter >= 0 ? planter : 65534);
    assert_int_equal(system(script), 0);
    char lines[2][2048];
    step_line(shared, lines[0], sizeof lines[0]);
    step_line(own, lines[1], sizeof lines[1]);
    if (lines[0][0])
        fail_msg("planted bundles were counted: %s", lines[0]);
    if (!strstr(lines[1], "gpumemprof: step 77.0: 1 task(s) ran out of memory; the first: "
                          "ENOMEM (") ||
        !strstr(lines[1], "/own\\x1bx/oom_dump_") || strchr(lines[1], '\033'))
        fail_msg("the step's line: %s", lines[1]);
}

/* srun's line and triage count the same bundles the same way: both read
 * the kind their writer decided, or decide it from the same facts for a
 * bundle written before kinds were.  Deaths of memory: a failed request
 * never survived, a kill while the cgroup's OOM killer ran; not: a
 * SIGKILL and a crash (GMP_ON_CRASH=always) with no failure, a failure
 * the process went on from, a pressure warning. */
static void test_step_line_agrees_with_triage(void **state)
{
    (void)state;
    NEED_READY();
    reset_home();
    static const struct {
        int both; /* in the second directory too (every kind but the deaths) */
        const char *metadata;
    } bundles[] = {
        {0, "{\"reason\":\"ENOMEM\",\"failed_request\":{\"size\":1},"
            "\"outcome\":{\"state\":\"exited\",\"exit_status\":1}}"},
        {0, "{\"reason\":\"killed\",\"evidence\":\"cgroup_oom_kill: rose\"}"},
        {1, "{\"kind\":\"memory_pressure\",\"reason\":\"memory_pressure\"}"},
        {1, "{\"reason\":\"ENOMEM\",\"failed_request\":{\"size\":1},"
            "\"outcome\":{\"state\":\"exited\",\"exit_status\":0}}"},
        {1, "{\"reason\":\"SIGKILL\"}"},
        {1, "{\"reason\":\"SIGSEGV\",\"confirmed_by\":\"signal\"}"},
    };
    static const char manifest[] =
        "{\"schema_version\":1,\"bundle_name\":\"x\",\"created_at_utc\":\"2026-01-01T00:00:00Z\","
        "\"reason\":\"x\",\"backend\":\"cpu\",\"event_count\":0,\"slurm_job\":\"77.0\"}";
    char dirs[2][1300], path[1400], script[3000];
    for (int d = 0; d < 2; d++) {
        snprintf(dirs[d], sizeof dirs[d], "%.1200s/agree%d", home, d + 1);
        assert_int_equal(mkdir(dirs[d], 0700), 0);
        for (size_t i = 0; i < sizeof bundles / sizeof *bundles; i++) {
            if (d == 1 && !bundles[i].both)
                continue;
            snprintf(path, sizeof path, "%.1200s/oom_dump_20260101T00000%zuZ_%zu_cpu_1", dirs[d],
                     i, i + 100);
            assert_int_equal(mkdir(path, 0700), 0);
            size_t n = strlen(path);
            snprintf(path + n, sizeof path - n, "/manifest.json");
            write_file(path, manifest, strlen(manifest));
            snprintf(path + n, sizeof path - n, "/metadata.json");
            write_file(path, bundles[i].metadata, strlen(bundles[i].metadata));
            snprintf(path + n, sizeof path - n, "/events.json");
            write_file(path, "[]", 2);
            snprintf(path + n, sizeof path - n, "/environment.json");
            write_file(path, "{}", 2);
        }
    }
    snprintf(script, sizeof script, "chown -R %d '%s' '%s'", (int)slurm.uid, dirs[0], dirs[1]);
    assert_int_equal(system(script), 0);
    char line[2048], triaged[8192], err[4096];
    /* with deaths: the line counts them as triage does */
    step_line(dirs[0], line, sizeof line);
    const char *argv1[] = {inspector, "triage", dirs[0], "--format", "json", NULL};
    run_capture(argv1, triaged, sizeof triaged, err, sizeof err);
    if (!strstr(line, "step 77.0: 2 task(s) ran out of memory") ||
        !strstr(triaged, "\"oom_bundles\": 2"))
        fail_msg("the step's line: %s\ntriage: %s", line, triaged);
    /* without: each kind counted as triage counts it */
    step_line(dirs[1], line, sizeof line);
    const char *argv2[] = {inspector, "triage", dirs[1], "--format", "json", NULL};
    run_capture(argv2, triaged, sizeof triaged, err, sizeof err);
    if (!strstr(line, "no task ran out of memory; 1 memory-pressure warning(s), 1 failure(s) "
                      "survived, 2 kill(s) or crash(es) with no sign of memory") ||
        !strstr(triaged, "\"oom_bundles\": 0") || !strstr(triaged, "\"pressure_warnings\": 1") ||
        !strstr(triaged, "\"survived\": 1") || !strstr(triaged, "\"not_memory\": 2"))
        fail_msg("the step's line: %s\ntriage: %s", line, triaged);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recover_holds_nothing_of_roots),
        cmocka_unit_test(test_stopped_recover_holds_nothing),
        cmocka_unit_test(test_oom_kill_verdict_is_roots),
        cmocka_unit_test(test_forged_ring_gets_no_verdict),
        cmocka_unit_test(test_batch_script_python),
        cmocka_unit_test(test_step_line_trusts_only_the_users_own),
        cmocka_unit_test(test_step_line_agrees_with_triage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

#else
int main(void)
{
    puts("[  SKIPPED ] test_spank: slurm/spank.h is not installed (libslurm-dev)");
    return 0;
}
#endif
