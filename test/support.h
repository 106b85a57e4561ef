/*
 * support.h — helpers for the cmocka test programs: scratch directories,
 * running a command with its output captured, capturing our own stderr,
 * and making bundles by hand.
 */
#ifndef GMP_TEST_SUPPORT_H
#define GMP_TEST_SUPPORT_H

#include <glob.h>
#include <stddef.h>
#include <sys/types.h>

/* A fresh directory under $TMPDIR (or /tmp); removed by scratch_remove. */
void scratch_make(char *out, size_t cap, const char *tag);
void scratch_remove(const char *path);

/* PyTorch's words for a CUDA allocation it could not make, in full: past
 * 128 bytes, as they are (the message tests print them) */
#define TORCH_MESSAGE                                                                     \
    "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of "   \
    "79.15 GiB of which 3.12 GiB is free. Including non-PyTorch memory, this process "    \
    "has 76.02 GiB memory in use. Of the allocated memory 75.50 GiB is allocated by "     \
    "PyTorch, and 12.00 MiB is reserved by PyTorch but unallocated."

/* For tests that run programs under the preload: the build directory
 * ($GMP_BUILD, else build), what LD_PRELOAD must name for the preload in it
 * (preload) and its file alone (preload_so), and a fresh scratch directory
 * (TAG in its name) with the paths of dumps/ and run/ inside it. */
typedef struct preload_paths {
    char build[1024], preload[2400], preload_so[1100], scratch[256], dumps[512], rundir[512];
} preload_paths;
void preload_paths_make(preload_paths *p, const char *tag);
/* The stand-in of a framework's library (test/doubles/speaker.c) by name,
 * for LD_PRELOAD beside ours: a process that prints that framework's line
 * then has the framework loaded, as in life.  Four paths live at once. */
const char *speaker_library(const preload_paths *p, const char *name);
/* The sanitizer's runtime when the preload under test is built with ASan
 * or TSan ($GMP_TEST_SAN_RUNTIME, set by `make sanitize`), else NULL.  Then
 * p->preload names the runtime after the preload (a list for LD_PRELOAD),
 * and the processes started from here get sanitizer options of their own
 * (preload_sanitizer_environment, which preload_paths_make calls). */
const char *preload_sanitizer(void);
/* That runtime is TSan's. */
int preload_under_tsan(void);
void preload_sanitizer_environment(void);
/* Skip the calling test, with a line, when the preload is built with a
 * sanitizer: for `ulimit -v`, under which its shadow memory cannot be
 * mapped.  The same test runs with the preload under UBSan alone. */
void skip_under_preload_sanitizer(const char *why);
/* cmocka group teardown for a setup that made paths and set *state to them:
 * removes the scratch directory. */
int preload_paths_teardown(void **state);

/* sh -c SCRIPT with GMP_DUMP_DIR and GMP_RUN_DIR of p exported (and HOME,
 * at scratch/home: absent unless the test makes it), its dump
 * directory emptied first, output captured as by run_capture.  Fails the
 * test when the shell is killed by a signal.  Returns the wait status. */
int run_script(const preload_paths *p, const char *script, char *out, size_t out_cap,
               char *err, size_t err_cap);
/* run_script with the preload exported to what the script starts (and no
 * core files), or with none at all. */
int run_script_preloaded(const preload_paths *p, const char *script, char *out, size_t out_cap,
                         char *err, size_t err_cap);
int run_script_bare(const preload_paths *p, const char *script, char *out, size_t out_cap,
                    char *err, size_t err_cap);
/* The exit code in a wait status, -1 when killed. */
int exit_code_of(int status);

/* Run argv with stdout/stderr captured (NUL-terminated, truncated to cap).
 * Returns the wait status; past RUN_DEADLINE_SECONDS, that of SIGALRM
 * (see wait_with_deadline). */
#define RUN_DEADLINE_SECONDS 60
int run_capture(const char *const argv[], char *out, size_t out_cap, char *err,
                size_t err_cap);
/* deadline.c: waits for pid, a child of ours, and returns its wait status.
 * Past `seconds`, it first writes what every process under pid is doing
 * to our stderr, then ends pid with SIGALRM and the rest with SIGKILL. */
int wait_with_deadline(pid_t pid, int seconds);
/* The gmp-inspect binary under test ($GMP_INSPECT, else build/gmp-inspect). */
const char *inspect_path(void);
/* inspect_path, absolute (for scripts that change directory), into out:
 * 0, or -1 when it cannot be resolved or does not fit. */
int inspect_path_absolute(char *out, size_t cap);

/* Capture what this process writes to fd 2 between begin and end. */
void stderr_capture_begin(void);
size_t stderr_capture_end(char *buf, size_t cap);

/* Count lines in a string. */
int count_lines(const char *s);
/* Count the entries of dir whose name starts with prefix (not . or ..). */
int count_prefixed(const char *dir, const char *prefix);

/* The one bundle in dumps (fails the test unless there is exactly one and
 * `gmp-inspect validate` accepts it): its file parsed, its path in path_out
 * when given.  The caller owns the JSON. */
struct json_t;
struct json_t *only_bundle_file(const char *dumps, const char *file, char *path_out,
                                size_t cap);
/* FILE inside BUNDLE, parsed (fails the test when it does not parse). */
struct json_t *bundle_file(const char *bundle, const char *file);
/* The load bias (modules.json's base) of the bundle's object whose path
 * ends with path_end (a whole path, or a file name); 0 when none. */
unsigned long long bundle_module_base(const char *bundle, const char *path_end);
/* A string member ("(missing)" when absent or not a string), an integer member. */
const char *json_str(struct json_t *obj, const char *key);
long long json_int(struct json_t *obj, const char *key);

/* `gmp-inspect VERB [ARG [ARG2]]` (NULL ends the arguments) into out and
 * err: its exit status.  A death by signal fails the test, and so does a
 * sanitizer's report (a sanitizer build exits 1 on one, as on a refused
 * bundle). */
int inspect_verb(const char *verb, const char *arg, const char *arg2, char *out, size_t out_cap,
                 char *err, size_t err_cap);
/* `gmp-inspect show BUNDLE`'s output (a static buffer; fails the test when
 * show fails). */
const char *show_output(const char *bundle);
/* Every one of the n strings in want is in shown (else the test fails,
 * naming the first missing). */
void expect_all_said(const char *shown, const char *const *want, size_t n);
/* `gmp-inspect plot BUNDLE -o SVG`, then SVG's text (a static buffer;
 * fails the test when plot fails). */
const char *plot_output(const char *bundle, const char *svg);
/* `gmp-inspect show BUNDLE` must name `cause` first among the likely causes. */
void expect_first_cause(const char *bundle, const char *cause);

/* Python lines (after `import ctypes`) that ask malloc for 80 TiB and print
 * what it returned: "None" where it fails, as it must with far less memory
 * and swap; huge_malloc_may_succeed says (with a SKIP line) where it need
 * not fail (vm.overcommit_memory=1). */
#define PY_MALLOC_80_TIB                                                                   \
    "libc = ctypes.CDLL(None)\n"                                                          \
    "libc.malloc.restype = ctypes.c_void_p\n"                                             \
    "print(libc.malloc(ctypes.c_size_t(80 << 40)))"
int huge_malloc_may_succeed(void);
/* show's "What happened:" line begins with headline. */
void expect_headline(const char *bundle, const char *headline);

/* The uid of a throwaway system account NAME (no home, no login shell),
 * made when missing; -1 when it cannot be made.  For tests run as root. */
int throwaway_user(const char *name);

/* The python of the venv with torch that `make test` makes
 * (mk/torch-venv.sh, GMP_TEST_TORCH_PYTHON), or NULL with a SKIP line
 * naming test. */
const char *torch_python_or_skip_line(const char *test);

/* A script that runs command (sh) with a /dev/shm of 20 MiB of its own, a
 * tmpfs mounted in a mount namespace of its own (`unshare -m`: a
 * container's /dev/shm is 64 MiB), into out; the script exits 77 where
 * there is no such namespace here.  command is inside single quotes. */
void small_shm_script(char *out, size_t cap, const char *command);

/* The test fixtures' directory (GMP_TEST_FIXTURES), absolute: free it. */
char *fixtures_dir_absolute(void);

/* Write a whole file (mode 0600). */
void write_file(const char *path, const void *data, size_t len);
/* DIR/FILE written anew: a file or link there is removed first. */
void write_file_in(const char *dir, const char *file, const void *data, size_t len);

/* The CPythons beside the system's, for tests of what the preload reads
 * from an interpreter's own structures (each version lays them out its own
 * way): pyenv's 3.9 to 3.13 under $HOME, then Debian unstable's 3.14 and
 * later that `make test` fetches into BUILD/debian-python
 * (mk/debian-python.sh).  Their paths in out->gl_pathv (globfree it when
 * out->gl_pathc), pyenv's first, *from_pyenv of them; a SKIP line for each
 * of 3.14 and 3.15 not fetched.  0 when there is none. */
size_t other_cpythons(glob_t *out, const char *build, size_t *from_pyenv);

#endif
