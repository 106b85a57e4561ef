/*
 * watch.c — `gmp-inspect watch PID|RINGFILE`: a live view of a running
 * process from its shared event ring (bytes in use per device and host,
 * allocation rate, the last events), refreshed every second until the
 * process ends; `--once --json` prints one snapshot for scripts.  The ring
 * is mapped read-only: the watched process is never slowed or changed.
 */
#include "gpumemprof.h"
#include "answer.h"
#include "verbs.h"
#include "ring.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LAST_EVENTS 10
#define RATE_WINDOW_NS (10ull * 1000000000ull)
#define MAX_KEYS 32

typedef struct device_use {
    int backend, device;
    uint64_t bytes;
} device_use;

typedef struct view {
    device_use use[MAX_KEYS];
    int nuse;
    gmp_event last[LAST_EVENTS];
    int nlast;
    uint64_t newest_ns, window_alloc, window_free;
} view;

static int visit(const gmp_event *ev, void *arg)
{
    view *v = arg;
    v->last[v->nlast % LAST_EVENTS] = *ev;
    v->nlast++;
    if (ev->time_ns > v->newest_ns)
        v->newest_ns = ev->time_ns;
    if (ev->type != GMP_EV_ALLOC && ev->type != GMP_EV_FREE && ev->type != GMP_EV_OOM)
        return 0;
    int i = 0;
    while (i < v->nuse && (v->use[i].backend != ev->backend || v->use[i].device != ev->device))
        i++;
    if (i == v->nuse && v->nuse < MAX_KEYS)
        v->use[v->nuse++] = (device_use){ev->backend, ev->device, 0};
    if (i < MAX_KEYS)
        v->use[i].bytes = ev->in_use;
    return 0;
}

/* Bytes allocated and freed in the last RATE_WINDOW_NS of events. */
static int visit_rate(const gmp_event *ev, void *arg)
{
    view *v = arg;
    if (ev->time_ns + RATE_WINDOW_NS < v->newest_ns)
        return 0;
    if (ev->type == GMP_EV_ALLOC)
        v->window_alloc += ev->size;
    else if (ev->type == GMP_EV_FREE)
        v->window_free += ev->size;
    return 0;
}

static void take(const gmp_ring *ring, view *v)
{
    memset(v, 0, sizeof *v);
    gmp_ring_foreach(ring, UINT64_MAX, visit, v, NULL);
    gmp_ring_foreach(ring, UINT64_MAX, visit_rate, v, NULL);
}

static const char *where(const device_use *u, char *buf, size_t cap)
{
    if (u->backend == GMP_BACKEND_CPU || u->device < 0)
        snprintf(buf, cap, "host");
    else
        snprintf(buf, cap, "%s:%d", gmp_backend_name((unsigned)u->backend), u->device);
    return buf;
}

static void command_of(const gmp_ring_header *h, char *out, size_t cap)
{
    size_t n = strnlen(h->cmdline, sizeof h->cmdline);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, h->cmdline, n);
    out[n] = '\0';
}

static int alive(const gmp_ring_header *h, const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && (kill(h->pid, 0) == 0 || errno == EPERM);
}

static void print_snapshot_json(const gmp_ring *ring, const char *path, const view *v)
{
    const gmp_ring_header *h = ring->hdr;
    char cmd[1100];
    command_of(h, cmd, sizeof cmd);
    json_t *o = json_object(), *use = json_array(), *last = json_array();
    json_object_set_new(o, "pid", json_integer(h->pid));
    json_object_set_new(o, "command", json_string(cmd));
    json_object_set_new(o, "ring", json_string(path));
    json_object_set_new(o, "alive", json_boolean(alive(h, path)));
    json_object_set_new(o, "recorded_total",
                        json_integer((json_int_t)__atomic_load_n(&h->head, __ATOMIC_RELAXED)));
    json_object_set_new(o, "dropped",
                        json_integer((json_int_t)__atomic_load_n(&h->dropped, __ATOMIC_RELAXED)));
    for (int i = 0; i < v->nuse; i++) {
        char w[48];
        json_t *u = json_object();
        json_object_set_new(u, "where", json_string(where(&v->use[i], w, sizeof w)));
        json_object_set_new(u, "backend",
                            json_string(gmp_backend_name((unsigned)v->use[i].backend)));
        json_object_set_new(u, "device", json_integer(v->use[i].device));
        json_object_set_new(u, "bytes", json_integer((json_int_t)v->use[i].bytes));
        json_array_append_new(use, u);
    }
    json_object_set_new(o, "bytes_in_use", use);
    json_object_set_new(o, "allocated_last_10s", json_integer((json_int_t)v->window_alloc));
    json_object_set_new(o, "freed_last_10s", json_integer((json_int_t)v->window_free));
    int n = v->nlast < LAST_EVENTS ? v->nlast : LAST_EVENTS;
    for (int k = 0; k < n; k++) {
        const gmp_event *ev = &v->last[(v->nlast - n + k) % LAST_EVENTS];
        json_t *e = json_object();
        json_object_set_new(e, "seq", json_integer((json_int_t)ev->seq));
        json_object_set_new(e, "timestamp", json_real((double)ev->time_ns / 1e9));
        json_object_set_new(e, "event_type", json_string(gmp_event_type_name(ev->type)));
        json_object_set_new(e, "api", json_string(gmp_api_name(ev->api)));
        json_object_set_new(e, "size", json_u64(ev->size));
        json_object_set_new(e, "bytes_in_use", json_u64(ev->in_use));
        json_array_append_new(last, e);
    }
    json_object_set_new(o, "last_events", last);
    print_json(o);
}

/* One screen; frame 0 is a single snapshot.  The terminal is cleared
 * first only when it is one: a pipe or a file gets plain text. */
static void print_screen(const gmp_ring *ring, const char *path, const view *v, int frame)
{
    const gmp_ring_header *h = ring->hdr;
    char cmd[1100], when[32], alloc[32], freed[32];
    command_of(h, cmd, sizeof cmd);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(when, sizeof when, "%H:%M:%S", &tm);
    if (frame && isatty(STDOUT_FILENO))
        fputs("\033[H\033[J", stdout); /* home, clear */
    else if (frame > 1)
        putchar('\n');
    if (frame)
        printf("gmp-inspect watch  %s  (refresh %d, Ctrl-C to stop)\n", when, frame);
    else
        printf("gmp-inspect watch  %s  (one snapshot)\n", when);
    printf("pid %d%s  ", h->pid, alive(h, path) ? "" : " (ended)");
    print_clean(stdout, cmd, 100);
    printf("\n%llu events recorded, %llu dropped\n\n",
           (unsigned long long)__atomic_load_n(&h->head, __ATOMIC_RELAXED),
           (unsigned long long)__atomic_load_n(&h->dropped, __ATOMIC_RELAXED));
    printf("%-12s %s\n", "where", "bytes in use");
    for (int i = 0; i < v->nuse; i++) {
        char w[48], b[32];
        fmt_bytes(v->use[i].bytes, b, sizeof b);
        printf("%-12s %s\n", where(&v->use[i], w, sizeof w), b);
    }
    fmt_bytes(v->window_alloc, alloc, sizeof alloc);
    fmt_bytes(v->window_free, freed, sizeof freed);
    printf("\nlast 10 s of events: +%s allocated, -%s freed\n\nlast events:\n", alloc, freed);
    int n = v->nlast < LAST_EVENTS ? v->nlast : LAST_EVENTS;
    for (int k = 0; k < n; k++) {
        const gmp_event *ev = &v->last[(v->nlast - n + k) % LAST_EVENTS];
        char size[32], in_use[32];
        fmt_bytes(ev->size, size, sizeof size);
        fmt_bytes(ev->in_use, in_use, sizeof in_use);
        printf("  %-13s %-18s %10s  in use %s\n", gmp_event_type_name(ev->type),
               gmp_api_name(ev->api), size, in_use);
    }
    fflush(stdout);
}

static volatile sig_atomic_t stop;

/* A ring truncated under us (by its owner, or anyone who may write it)
 * turns a read of the mapping into SIGBUS: while we read it, that ends the
 * watch with a message instead of killing it.  The reads are our own code
 * (values are taken before printf is called), so jumping out is safe. */
static sigjmp_buf shrank;
static volatile sig_atomic_t reading_ring;
static void on_bus(int sig)
{
    if (reading_ring)
        siglongjmp(shrank, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}
static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect watch PID|RINGFILE [--once] [--json] [--interval S]\n"
          "A live view of a process running under the preload, from its event ring\n"
          "(found in $GMP_RUN_DIR, else the per-user run directory, or in a gmp-run\n"
          "job's directory there): bytes in use per device and host, what was\n"
          "allocated and freed in the last 10 s, the last events.  Refreshes every\n"
          "S seconds (default 1) until the process ends.\n"
          "--once prints one snapshot; --json prints it as JSON.  Read-only.\n"
          "Exit status: 0, 1 when the ring cannot be found or read, 2 usage error.\n",
          f);
}

typedef struct watch_options {
    int once, as_json;
    double interval;
    const char *target;
} watch_options;

/* The options, read before the jump point below: nothing it may clobber. */
static int read_options(int argc, char **argv, watch_options *o)
{
    static const struct option options[] = {{"once", no_argument, NULL, '1'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"interval", required_argument, NULL, 'i'},
                                            {0}};
    verb_args a = {.verb = "watch", .usage = usage, .longopts = options};
    *o = (watch_options){.interval = 1.0};
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c == '1')
            o->once = 1;
        else if (c == 'j')
            o->as_json = 1;
        else if (c == 'i')
            o->interval = atof(optarg);
        else
            return c;
    }
    if (verb_operands(&a, argc, 1, 1) < 0)
        return VERB_DONE_USAGE;
    o->target = argv[optind];
    if (!(o->interval >= 0.05 && o->interval <= 3600))
        return verb_misuse(&a, "--interval wants seconds from 0.05 to 3600");
    return 0;
}

int cmd_watch(int argc, char **argv)
{
    watch_options o;
    int r = read_options(argc, argv, &o);
    if (r)
        return VERB_EXIT(r);
    const int once = o.once, as_json = o.as_json;
    const double interval = o.interval;
    const char *const target = o.target;
    char path[4096];
    int found = ring_path_of("watch", target, path, sizeof path);
    if (found == -2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (found < 0)
        return EXIT_INVALID;
    gmp_ring ring;
    char why[128];
    if (gmp_ring_attach(&ring, path, why, sizeof why) < 0) {
        fprintf(stderr, "gmp-inspect watch: %s: %s\n", path, why);
        return EXIT_INVALID;
    }
    view v;
    signal(SIGBUS, on_bus);
    if (sigsetjmp(shrank, 1)) {
        reading_ring = 0;
        fputs("gmp-inspect watch: ", stderr);
        print_clean(stderr, path, 512);
        fputs(": the ring file shrank under us (truncated); stopping\n", stderr);
        return EXIT_INVALID;
    }
    reading_ring = 1;
    if (once || as_json) {
        take(&ring, &v);
        if (as_json)
            print_snapshot_json(&ring, path, &v);
        else
            print_screen(&ring, path, &v, 0);
        gmp_ring_close(&ring, 0);
        return EXIT_OK;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    /* A terminal's stdout is line-buffered: a frame would reach it line by
     * line, after the clear, and flicker (or be read half-drawn).  Held
     * whole, each frame goes out in one write at its fflush. */
    static char frame_buffer[1 << 16];
    setvbuf(stdout, frame_buffer, _IOFBF, sizeof frame_buffer);
    for (int frame = 1; !stop; frame++) {
        take(&ring, &v);
        print_screen(&ring, path, &v, frame);
        fflush(stdout);
        if (!alive(ring.hdr, path)) {
            puts("\nthe process has ended");
            break;
        }
        struct timespec ts = {(time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9)};
        nanosleep(&ts, NULL);
    }
    gmp_ring_close(&ring, 0);
    return EXIT_OK;
}
