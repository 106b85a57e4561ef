/*
 * support.c — shared helpers of the test programs (see support.h).
 */
#include "support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void scratch_make(char *out, size_t cap, const char *tag)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(out, cap, "%s/gmp-test-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (!mkdtemp(out)) {
        perror("mkdtemp");
        abort();
    }
}

/* Options for the processes the preload is loaded into when it is built with
 * a sanitizer: the programs are not ours (sh and python3 leak, the crash
 * tests must die of their own signals, the OOM tests want NULL back), the
 * runtime comes second in LD_PRELOAD, and reports go to files that
 * test/run.sh reads afterwards, since the tests count the lines on stderr.
 * UBSan's reports follow ASan's log_path (one runtime); a log_path in
 * UBSAN_OPTIONS as well sends them back to stderr. */
void preload_sanitizer_environment(void)
{
    static int done;
    const char *logs = getenv("GMP_TEST_SAN_LOG");
    if (done || !logs || !*logs)
        return;
    done = 1;
#define NO_SIGNALS "handle_segv=0:handle_sigbus=0:handle_abort=0:handle_sigfpe=0:handle_sigill=0"
    static char asan[1024], tsan[1024];
    snprintf(asan, sizeof asan,
             "verify_asan_link_order=0:detect_leaks=0:allocator_may_return_null=1:" NO_SIGNALS
             ":log_path=%s/asan",
             logs);
    /* sh frees memory in its SIGCHLD handler: the program's sin, not ours */
    snprintf(tsan, sizeof tsan,
             "allocator_may_return_null=1:report_signal_unsafe=0:" NO_SIGNALS
             ":log_path=%s/tsan",
             logs);
#undef NO_SIGNALS
    setenv("ASAN_OPTIONS", asan, 1);
    setenv("TSAN_OPTIONS", tsan, 1);
    setenv("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1", 1);
}

const char *preload_sanitizer(void)
{
    const char *r = getenv("GMP_TEST_SAN_RUNTIME");
    return r && *r ? r : NULL;
}

int preload_under_tsan(void)
{
    const char *r = preload_sanitizer();
    return r && strstr(r, "libtsan") != NULL;
}

void skip_under_preload_sanitizer(const char *why)
{
    if (!preload_sanitizer())
        return;
    print_message("SKIP with the preload under a sanitizer: %s\n", why);
    skip();
}

const char *speaker_library(const preload_paths *p, const char *name)
{
    static char path[4][1200];
    static int next;
    char *at = path[next++ % 4];
    snprintf(at, sizeof path[0], "%s/test/doubles/speakers/%s", p->build, name);
    return at;
}

void preload_paths_make(preload_paths *p, const char *tag)
{
    const char *b = getenv("GMP_BUILD");
    snprintf(p->build, sizeof p->build, "%s", b && *b ? b : "build");
    const char *runtime = preload_sanitizer();
    snprintf(p->preload_so, sizeof p->preload_so, "%s/libgpumemprof_preload.so", p->build);
    snprintf(p->preload, sizeof p->preload, "%s%s%s", p->preload_so, runtime ? " " : "",
             runtime ? runtime : "");
    if (runtime)
        preload_sanitizer_environment();
    scratch_make(p->scratch, sizeof p->scratch, tag);
    snprintf(p->dumps, sizeof p->dumps, "%s/dumps", p->scratch);
    snprintf(p->rundir, sizeof p->rundir, "%s/run", p->scratch);
}

int preload_paths_teardown(void **state)
{
    preload_paths *p = *state;
    if (p)
        scratch_remove(p->scratch);
    return 0;
}

int run_script(const preload_paths *p, const char *script, char *out, size_t out_cap,
               char *err, size_t err_cap)
{
    static char cmd[16384];
    scratch_remove(p->dumps);
    /* HOME too: where bundles go when the dump directory cannot be had
     * (absent unless a test makes it, so none go to the real one) */
    snprintf(cmd, sizeof cmd, "export GMP_DUMP_DIR='%s' GMP_RUN_DIR='%s' HOME='%s/home'; %s",
             p->dumps, p->rundir, p->scratch, script);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    int status = run_capture(argv, out, out_cap, err, err_cap);
    if (WIFSIGNALED(status))
        fail_msg("%s: killed by signal %d; stderr: %s", script, WTERMSIG(status), err);
    return status;
}

int run_script_preloaded(const preload_paths *p, const char *script, char *out, size_t out_cap,
                         char *err, size_t err_cap)
{
    static char full[8192 + 3000];
    snprintf(full, sizeof full, "ulimit -c 0; export LD_PRELOAD=\"%s\"; %s", p->preload, script);
    return run_script(p, full, out, out_cap, err, err_cap);
}

int run_script_bare(const preload_paths *p, const char *script, char *out, size_t out_cap,
                    char *err, size_t err_cap)
{
    static char full[16384 + 64];
    snprintf(full, sizeof full, "unset LD_PRELOAD; %s", script);
    return run_script(p, full, out, out_cap, err, err_cap);
}

int exit_code_of(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void scratch_remove(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char child[4096];
        snprintf(child, sizeof child, "%s/%s", path, de->d_name);
        struct stat st;
        if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode)) {
            chmod(child, 0700);
            scratch_remove(child);
        } else {
            unlink(child);
        }
    }
    closedir(d);
    rmdir(path);
}

static void slurp(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    char sink[4096];
    for (;;) {
        ssize_t n = len + 1 < cap ? read(fd, buf + len, cap - 1 - len)
                                  : read(fd, sink, sizeof sink);
        if (n <= 0)
            break;
        if (len + 1 < cap)
            len += (size_t)n;
    }
    if (cap)
        buf[len] = '\0';
}

int run_capture(const char *const argv[], char *out, size_t out_cap, char *err,
                size_t err_cap)
{
    char ofile[] = "/tmp/gmp-test-out-XXXXXX", efile[] = "/tmp/gmp-test-err-XXXXXX";
    int ofd = mkstemp(ofile), efd = mkstemp(efile);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(ofd, 1);
        dup2(efd, 2);
        /* a hang fails the test instead of stalling CI: the parent's
         * deadline (deadline.c) says where it hung; this alarm ends it where
         * the kernel cannot give the parent a pidfd to wait on */
        alarm(RUN_DEADLINE_SECONDS + 15);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = wait_with_deadline(pid, RUN_DEADLINE_SECONDS);
    lseek(ofd, 0, SEEK_SET);
    lseek(efd, 0, SEEK_SET);
    slurp(ofd, out, out_cap);
    slurp(efd, err, err_cap);
    close(ofd);
    close(efd);
    unlink(ofile);
    unlink(efile);
    return status;
}

const char *inspect_path(void)
{
    const char *p = getenv("GMP_INSPECT");
    return p && *p ? p : "build/gmp-inspect";
}

int inspect_path_absolute(char *out, size_t cap)
{
    char *abs = realpath(inspect_path(), NULL);
    int ok = abs && strlen(abs) < cap;
    if (ok)
        memcpy(out, abs, strlen(abs) + 1);
    free(abs);
    return ok ? 0 : -1;
}

static int saved_stderr = -1;
static char capture_file[64];

void stderr_capture_begin(void)
{
    snprintf(capture_file, sizeof capture_file, "/tmp/gmp-test-stderr-XXXXXX");
    int fd = mkstemp(capture_file);
    fflush(stderr);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}

size_t stderr_capture_end(char *buf, size_t cap)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    int fd = open(capture_file, O_RDONLY);
    slurp(fd, buf, cap);
    close(fd);
    unlink(capture_file);
    return strlen(buf);
}

int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

int count_prefixed(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
             strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

const char *torch_python_or_skip_line(const char *test)
{
    const char *python = getenv("GMP_TEST_TORCH_PYTHON");
    if (python && *python && access(python, X_OK) == 0)
        return python;
    printf("SKIP  %s: no python with torch here (make test gets one with mk/torch-venv.sh)\n",
           test);
    return NULL;
}

void small_shm_script(char *out, size_t cap, const char *command)
{
    snprintf(out, cap,
             "unshare -m true 2>/dev/null || exit 77; "
             "exec unshare -m sh -c 'mount -t tmpfs -o size=20M tmpfs /dev/shm || exit 77; %s'",
             command);
}

void write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
        perror(path);
        abort();
    }
    close(fd);
}

char *fixtures_dir_absolute(void)
{
    char *dir = realpath(getenv("GMP_TEST_FIXTURES") ? getenv("GMP_TEST_FIXTURES")
                                                     : "test/fixtures",
                         NULL);
    assert_non_null(dir);
    return dir;
}

void write_file_in(const char *dir, const char *file, const void *data, size_t len)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    unlink(path);
    write_file(path, data, len);
}

json_t *only_bundle_file(const char *dumps, const char *file, char *path_out, size_t cap)
{
    int n = count_prefixed(dumps, "oom_dump_");
    if (n != 1)
        fail_msg("want exactly one bundle in %s, found %d", dumps, n);
    DIR *d = opendir(dumps);
    struct dirent *de;
    char path[2048] = "";
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, "oom_dump_", 9))
            snprintf(path, sizeof path, "%s/%s", dumps, de->d_name);
    closedir(d);
    if (path_out)
        snprintf(path_out, cap, "%s", path);
    char out[4096], err[4096];
    const char *argv[] = {inspect_path(), "validate", path, NULL};
    if (run_capture(argv, out, sizeof out, err, sizeof err) != 0)
        fail_msg("bundle does not validate: %s", out);
    return bundle_file(path, file);
}

json_t *bundle_file(const char *bundle, const char *file)
{
    char f[4096];
    snprintf(f, sizeof f, "%s/%s", bundle, file);
    json_error_t e;
    json_t *doc = json_load_file(f, 0, &e);
    if (!doc)
        fail_msg("%s: %s", f, e.text);
    return doc;
}

unsigned long long bundle_module_base(const char *bundle, const char *path_end)
{
    json_t *mods = bundle_file(bundle, "modules.json"), *m;
    unsigned long long base = 0;
    size_t i, n = strlen(path_end);
    json_array_foreach(mods, i, m) {
        const char *path = json_str(m, "path");
        if (strlen(path) >= n && !strcmp(path + strlen(path) - n, path_end))
            base = strtoull(json_str(m, "base"), NULL, 16);
    }
    json_decref(mods);
    return base;
}

const char *json_str(json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "(missing)";
}

long long json_int(json_t *obj, const char *key)
{
    return (long long)json_integer_value(json_object_get(obj, key));
}

int inspect_verb(const char *verb, const char *arg, const char *arg2, char *out, size_t out_cap,
                 char *err, size_t err_cap)
{
    const char *argv[] = {inspect_path(), verb, arg, arg2, NULL};
    int status = run_capture(argv, out, out_cap, err, err_cap);
    if (WIFSIGNALED(status))
        fail_msg("gmp-inspect %s %s died of signal %d", verb, arg ? arg : "",
                 WTERMSIG(status));
    if (strstr(err, "Sanitizer") || strstr(err, "runtime error:"))
        fail_msg("gmp-inspect %s %s: %s", verb, arg ? arg : "", err);
    return WEXITSTATUS(status);
}

/* gmp-inspect show's output for bundle (a static buffer). */
const char *show_output(const char *bundle)
{
    static char out[1 << 16], err[4096];
    const char *argv[] = {inspect_path(), "show", bundle, NULL};
    int status = run_capture(argv, out, sizeof out, err, sizeof err);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("gmp-inspect show %s failed: %s", bundle, err);
    return out;
}

void expect_all_said(const char *shown, const char *const *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strstr(shown, want[i]))
            fail_msg("show does not say \"%s\":\n%s", want[i], shown);
}

const char *plot_output(const char *bundle, const char *svg)
{
    static char text[1 << 17], err[4096];
    const char *argv[] = {inspect_path(), "plot", bundle, "-o", svg, NULL};
    int status = run_capture(argv, text, sizeof text, err, sizeof err);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("gmp-inspect plot %s failed: %s", bundle, err);
    FILE *f = fopen(svg, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = '\0';
    return text;
}

int huge_malloc_may_succeed(void)
{
    int mode = 0;
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    if (f) {
        if (fscanf(f, "%d", &mode) != 1)
            mode = 0;
        fclose(f);
    }
    if (mode == 1)
        print_message("[     SKIP ] vm.overcommit_memory=1: malloc(80 TiB) may succeed\n");
    return mode == 1;
}

void expect_headline(const char *bundle, const char *headline)
{
    static const char label[] = "\nWhat happened:    ";
    const char *out = show_output(bundle), *line = strstr(out, label);
    if (!line || strncmp(line + sizeof label - 1, headline, strlen(headline)))
        fail_msg("show's headline is not \"%s\":\n%s", headline, out);
}

void expect_first_cause(const char *bundle, const char *cause)
{
    const char *out = show_output(bundle), *first = strstr(out, "\n  1. ");
    if (!first || strncmp(first + 6, cause, strlen(cause)))
        fail_msg("show does not name \"%s\" first:\n%s", cause, out);
}

int throwaway_user(const char *name)
{
    char script[512];
    snprintf(script, sizeof script,
             "id -u %s >/dev/null 2>&1 || useradd --system --no-create-home "
             "--shell /usr/sbin/nologin %s >/dev/null 2>&1",
             name, name);
    struct passwd *pw = system(script) == 0 ? getpwnam(name) : NULL;
    return pw ? (int)pw->pw_uid : -1;
}

size_t other_cpythons(glob_t *out, const char *build, size_t *from_pyenv)
{
    const char *home = getenv("HOME");
    char pattern[1200];
    int flags = 0;
    memset(out, 0, sizeof *out);
    snprintf(pattern, sizeof pattern, "%s/.pyenv/versions/3.1[0-3]*/bin/python3",
             home ? home : "/root");
    if (glob(pattern, flags, NULL, out) == 0)
        flags = GLOB_APPEND;
    snprintf(pattern, sizeof pattern, "%s/.pyenv/versions/3.9*/bin/python3",
             home ? home : "/root");
    if (glob(pattern, flags, NULL, out) == 0)
        flags = GLOB_APPEND;
    *from_pyenv = flags ? out->gl_pathc : 0;
    snprintf(pattern, sizeof pattern, "%s/debian-python/3.1[4-9]/python", build);
    if (glob(pattern, flags, NULL, out) == 0)
        flags = GLOB_APPEND;
    static const char *const fetched[] = {"3.14", "3.15"};
    for (size_t v = 0; v < sizeof fetched / sizeof *fetched; v++) {
        snprintf(pattern, sizeof pattern, "%s/debian-python/%s/python", build, fetched[v]);
        if (access(pattern, X_OK))
            printf("SKIP no CPython %s (mk/debian-python.sh could not fetch it)\n", fetched[v]);
    }
    return flags ? out->gl_pathc : 0;
}
