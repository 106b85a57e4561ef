/*
 * ring_source.c — a live process's event ring as the reading verbs name
 * it: a ring file (a path, or a name ending .gmr), or a PID, whose newest
 * ring in the run directory, or in one of the job directories gmp-run
 * keeps there (gmp-run-XXXXXX, ours), is taken (a run directory another
 * user made first is refused).  `watch` follows it; `export` copies its events once.  A ring
 * truncated under a reader turns its next read into SIGBUS: the copy is
 * taken under a guard that ends it with a message instead.  For export, the
 * ring's stack and module records come too, so a live process's
 * allocations can be named as a bundle's are.
 */
#include "gpumemprof.h"
#include "read.h"
#include "ring.h"
#include "ring_recovery.h"
#include "rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int is_ring_target(const char *target)
{
    struct stat st;
    if (stat(target, &st) == 0 && S_ISDIR(st.st_mode))
        return 0; /* a directory of bundles, whatever its name */
    size_t n = strlen(target);
    if (n > 4 && !strcmp(target + n - 4, ".gmr"))
        return 1;
    return n && strspn(target, "0123456789") == n;
}

typedef struct ring_search {
    char prefix[48];        /* "ring_<pid>_" */
    unsigned long long best; /* the newest found's <ns> */
    int found;
    char *out;
    size_t cap;
} ring_search;

/* The newest ring of the pid in dir (open as fd, which this closes); with
 * descend, in the job directories gmp-run keeps there too. */
static void search_dir(ring_search *s, int fd, const char *dir, int descend)
{
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        struct stat st;
        if (descend && !strncmp(e->d_name, "gmp-run-", 8) &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode) && st.st_uid == geteuid()) {
            char sub[4096];
            if (snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) < (int)sizeof sub)
                search_dir(s, openat(dirfd(d), e->d_name,
                                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC),
                           sub, 0);
            continue;
        }
        if (strncmp(e->d_name, s->prefix, strlen(s->prefix)) || n < 5 ||
            strcmp(e->d_name + n - 4, ".gmr"))
            continue;
        unsigned long long ns = strtoull(e->d_name + strlen(s->prefix), NULL, 10);
        if (s->found < 0 || ns > s->best) {
            s->best = ns;
            s->found = snprintf(s->out, s->cap, "%s/%s", dir, e->d_name) < (int)s->cap ? 0 : -1;
        }
    }
    closedir(d);
}

/* ring_<pid>_<ns>.gmr in the run directory or a job directory of
 * gmp-run's in it: the newest of that pid. */
static int find_ring(const char *verb, int pid, char *out, size_t cap)
{
    static gmp_config cfg;
    char dir[4096];
    gmp_config_from_env(&cfg);
    gmp_run_dir_path(&cfg, dir, sizeof dir);
    ring_search s = {.found = -1, .out = out, .cap = cap};
    snprintf(s.prefix, sizeof s.prefix, "ring_%d_", pid);
    /* a run directory another user made first holds rings of their choosing */
    char why[128];
    int fd = gmp_run_dir_open(dir, why, sizeof why);
    if (fd < 0 && errno == EPERM) {
        fprintf(stderr, "gmp-inspect %s: refusing the run directory ", verb);
        print_clean(stderr, dir, 512);
        fprintf(stderr, ": %s\n", why);
        return -2;
    }
    search_dir(&s, fd, dir, 1);
    return s.found;
}

int ring_path_of(const char *verb, const char *target, char *path, size_t cap)
{
    if (strchr(target, '/') || strstr(target, ".gmr")) {
        snprintf(path, cap, "%s", target);
        return 0;
    }
    char *end = NULL;
    long pid = strtol(target, &end, 10);
    if (!end || *end || pid <= 0 || pid > 0x7fffffff)
        return -2;
    int found = find_ring(verb, (int)pid, path, cap);
    if (found == -1)
        fprintf(stderr, "gmp-inspect %s: no ring of pid %ld in the run directory "
                        "(has it recorded anything yet? is GMP_RUN_DIR the same?)\n",
                verb, pid);
    return found < 0 ? -1 : 0;
}

static sigjmp_buf shrank;
static volatile sig_atomic_t copying;

static void on_bus(int sig)
{
    if (copying)
        siglongjmp(shrank, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* A Python frame record's fields, as stacks.json holds them; NULL when
 * the copy has no published record of that id. */
static json_t *python_frame_json(const gmp_ring_python_record *py, size_t np, uint32_t id)
{
    for (size_t i = 0; i < np; i++) {
        if (py[i].id != id)
            continue;
        char file[sizeof py[i].file], function[sizeof py[i].function];
        memcpy(file, py[i].file, sizeof file);
        file[sizeof file - 1] = '\0';
        memcpy(function, py[i].function, sizeof function);
        function[sizeof function - 1] = '\0';
        return json_pack("{s:s, s:I, s:s}", "file", file, "line", (json_int_t)py[i].line,
                         "function", function);
    }
    return NULL;
}

/* The site records copied out of the mapping, as the bundle files hold
 * them: each whole stack record (its id written last), its Python frames
 * apart from its return addresses, and each module record marked ready;
 * nothing in them is trusted but their bounds. */
static void sites_as_json(const gmp_ring_stack_record *st, size_t ns,
                          const gmp_ring_module_record *md, size_t nm,
                          const gmp_ring_python_record *py, size_t np, ring_copy_t *out)
{
    out->stacks = json_array();
    out->mods = json_array();
    char hex[24];
    for (size_t i = 0; i < ns && out->stacks; i++) {
        uint32_t depth = st[i].depth < GMP_RING_STACK_DEPTH ? st[i].depth : GMP_RING_STACK_DEPTH;
        json_t *frames = json_array(), *python = json_array();
        for (uint32_t k = 0; k < depth && frames && python; k++) {
            uint64_t f = st[i].frames[k];
            if (f & GMP_PYTHON_FRAME_TAG) {
                json_t *named = python_frame_json(py, np, (uint32_t)(f & 0xffffffffu));
                if (named)
                    json_array_append_new(python, named);
                continue;
            }
            snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)f);
            json_array_append_new(frames, json_string(hex));
        }
        json_t *s = st[i].id && frames ? json_pack("{s:I, s:O}", "id", (json_int_t)st[i].id,
                                                   "frames", frames)
                                       : NULL;
        if (s && json_array_size(python))
            json_object_set(s, "python", python);
        if (s)
            json_array_append_new(out->stacks, s);
        json_decref(frames);
        json_decref(python);
    }
    for (size_t i = 0; i < nm && out->mods; i++) {
        if (md[i].ready != 1)
            continue;
        char path[sizeof md[i].path], base[24], end[24];
        memcpy(path, md[i].path, sizeof path);
        path[sizeof path - 1] = '\0';
        snprintf(base, sizeof base, "0x%llx", (unsigned long long)md[i].base);
        snprintf(end, sizeof end, "0x%llx", (unsigned long long)md[i].end);
        json_t *m = json_pack("{s:s, s:s, s:s}", "path", path, "base", base, "end", end);
        if (m)
            json_array_append_new(out->mods, m);
    }
}

int ring_copy(const char *verb, const char *path, int with_sites, ring_copy_t *out)
{
    memset(out, 0, sizeof *out);
    gmp_ring ring;
    char why[128];
    if (gmp_ring_attach(&ring, path, why, sizeof why) < 0) {
        fprintf(stderr, "gmp-inspect %s: ", verb);
        print_clean(stderr, path, 512);
        fprintf(stderr, ": %s\n", why);
        return -1;
    }
    size_t cap = ring.capacity ? ring.capacity : 1;
    size_t ns = with_sites ? ring.stack_records : 0, nm = with_sites ? ring.module_records : 0;
    size_t np = with_sites ? ring.python_records : 0;
    /* every buffer before the guard: nothing is allocated inside it */
    gmp_event *events = malloc(cap * sizeof *events);
    gmp_ring_stack_record *st = malloc((ns ? ns : 1) * sizeof *st);
    gmp_ring_module_record *md = malloc((nm ? nm : 1) * sizeof *md);
    gmp_ring_python_record *py = malloc((np ? np : 1) * sizeof *py);
    if (!events || !st || !md || !py) {
        free(events);
        free(st);
        free(md);
        free(py);
        gmp_ring_close(&ring, 0);
        fprintf(stderr, "gmp-inspect %s: out of memory\n", verb);
        return -1;
    }
    void (*old)(int) = signal(SIGBUS, on_bus);
    if (sigsetjmp(shrank, 1)) {
        copying = 0;
        signal(SIGBUS, old);
        free(events);
        free(st);
        free(md);
        free(py);
        fprintf(stderr, "gmp-inspect %s: ", verb);
        print_clean(stderr, path, 512);
        fputs(": the ring file shrank under us (truncated)\n", stderr);
        return -1; /* the mapping is left: unmapping a truncated file is fine at exit */
    }
    copying = 1;
    out->n = gmp_ring_snapshot(&ring, events, cap, NULL);
    out->pid = ring.hdr->pid;
    size_t len = strnlen(ring.hdr->cmdline, sizeof ring.hdr->cmdline);
    memcpy(out->cmdline, ring.hdr->cmdline, len < sizeof out->cmdline ? len : sizeof out->cmdline - 1);
    uint64_t used_st = __atomic_load_n(&ring.hdr->stacks_used, __ATOMIC_ACQUIRE);
    uint64_t used_md = __atomic_load_n(&ring.hdr->modules_used, __ATOMIC_ACQUIRE);
    uint64_t used_py = __atomic_load_n(&ring.hdr->python_used, __ATOMIC_ACQUIRE);
    ns = used_st < ns ? (size_t)used_st : ns;
    nm = used_md < nm ? (size_t)used_md : nm;
    np = used_py < np ? (size_t)used_py : np;
    if (ns)
        memcpy(st, ring.stacks, ns * sizeof *st);
    if (nm)
        memcpy(md, ring.modules, nm * sizeof *md);
    if (np)
        memcpy(py, ring.python, np * sizeof *py);
    copying = 0;
    signal(SIGBUS, old);
    out->events = events;
    gmp_ring_close(&ring, 0);
    if (with_sites)
        sites_as_json(st, ns, md, nm, py, np, out);
    free(st);
    free(md);
    free(py);
    return 0;
}

json_t *ring_event_json(const gmp_event *e)
{
    char addr[24];
    snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)e->address);
    return json_pack("{s:I, s:f, s:s, s:s, s:I, s:s, s:s, s:o, s:I, s:I, s:o, s:I}", "seq",
                     (json_int_t)e->seq, "timestamp", (double)e->time_ns / 1e9, "event_type",
                     gmp_event_type_name(e->type), "backend", gmp_backend_name(e->backend),
                     "device_id", (json_int_t)e->device, "api", gmp_api_name(e->api), "address",
                     addr, "size", json_u64(e->size), "result", (json_int_t)e->result,
                     "thread_id", (json_int_t)e->thread_id, "bytes_in_use", json_u64(e->in_use),
                     "stack_id", (json_int_t)e->stack_id);
}
