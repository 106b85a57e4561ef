/*
 * trace.c — `gmp-inspect export PATH... --format trace-json -o FILE`:
 * bundles as a Trace Event JSON file, the format Perfetto and
 * chrome://tracing open.  Each process is a process of the trace (named by
 * its command, rank and host; ordered by rank), each thread that allocated
 * a thread of it, and on its timeline:
 *   - a counter per device and one for the host: the bytes in use, from
 *     every event that carries them (alloc, free, map, unmap, oom, sample);
 *     what the program recorded itself (the Python recorder's readings) on
 *     counters of their own;
 *   - an instant per allocation and free, named by its API (cudaMalloc,
 *     cuMemCreate, malloc...) on the thread that made it, size and address
 *     in its args;
 *   - an instant across the process for each OOM, recovery, memory-pressure
 *     crossing and fatal signal, and one where the bundle was written,
 *     named by what show calls it.
 * A directory is every bundle under it: the ranks of one job side by side on
 * one timeline.  A ring file or a PID is a live process's ring (as `watch`
 * reads it), its events copied once.  Two bundles of one process share the events they both hold;
 * each event is written once (by its sequence number).  The file is streamed:
 * an event at a time, whatever the bundles' size.
 */
#include "gpumemprof.h"
#include "export.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


typedef struct trace_out {
    FILE *f;
    size_t count;
} trace_out;

/* One trace event: written compact, the reference released. */
static void emit(trace_out *o, json_t *ev)
{
    if (!ev)
        return;
    fputs(o->count++ ? ",\n" : "\n", o->f);
    json_dumpf_exact(ev, o->f, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(ev);
}

static json_t *meta(const char *name, json_int_t pid, json_int_t tid, json_t *args)
{
    return json_pack("{s:s, s:s, s:I, s:I, s:o}", "ph", "M", "name", name, "pid", pid, "tid",
                     tid, "args", args);
}

static json_t *instant(const char *name, const char *cat, const char *scope, json_int_t pid,
                       json_int_t tid, double ts, json_t *args)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:f, s:o}", "ph", "i", "name", name, "cat",
                     cat, "s", scope, "pid", pid, "tid", tid, "ts", ts, "args",
                     args ? args : json_object());
}

static int carries_usage(const char *type)
{
    static const char *const kinds[] = {"alloc", "free", "map", "unmap", "oom", "oom_recovered",
                                        "sample"};
    for (size_t i = 0; type && i < sizeof kinds / sizeof *kinds; i++)
        if (!strcmp(type, kinds[i]))
            return 1;
    return 0;
}

typedef struct process_view {
    json_int_t pid;
    int64_t last_seq; /* the newest event written for this process */
    int named, main_named;
} process_view;

/* The main thread is named; the viewers show each thread's tid beside its
 * name themselves, and name the others by it. */
static void name_thread(trace_out *o, process_view *p, json_int_t tid)
{
    if (tid != p->pid || p->main_named)
        return;
    p->main_named = 1;
    emit(o, meta("thread_name", p->pid, tid, json_pack("{s:s}", "name", "main thread")));
}

/* One event of the bundle as the trace shows it. */
static void export_event(trace_out *o, process_view *p, json_t *ev)
{
    double t;
    json_t *tv = json_object_get(ev, "timestamp");
    if (!json_is_number(tv) || !isfinite(t = json_number_value(tv) * 1e6))
        return;
    const char *type = jstr(ev, "event_type");
    const char *api = jstr(ev, "api");
    int64_t tid = p->pid, in_use = 0, result = 0;
    uint64_t size = 0; /* to 2^64-1: a failed malloc(-4) */
    jint(ev, "thread_id", &tid);
    ju64(ev, "size", &size);
    jint(ev, "result", &result);
    int has_use = jint(ev, "bytes_in_use", &in_use) == 0;
    char where[48], name[160], bytes[32];
    event_where(ev, where, sizeof where);
    fmt_bytes(size, bytes, sizeof bytes);
    if (!type)
        return;
    /* what a program recorded itself (the Python recorder's readings) is
     * its own measure, not the preload's count: a counter of its own */
    int program = api && !strcmp(api, "user");
    if (carries_usage(type) && has_use) {
        snprintf(name, sizeof name, program ? "%s, as the program recorded" : "%s in use", where);
        emit(o, json_pack("{s:s, s:s, s:I, s:f, s:{s:I}}", "ph", "C", "name", name, "pid",
                          p->pid, "ts", t, "args", "bytes", (json_int_t)in_use));
    }
    json_t *args = json_pack("{s:s, s:o, s:I}", "device", where, "size", json_u64(size),
                             "bytes_in_use", (json_int_t)in_use);
    if (jstr(ev, "address"))
        json_object_set_new(args, "address", json_string(jstr(ev, "address")));
    const char *scope = "t", *cat = type;
    if (!strcmp(type, "alloc") || !strcmp(type, "free") || !strcmp(type, "map") ||
        !strcmp(type, "unmap")) {
        snprintf(name, sizeof name, "%s", api && strcmp(api, "unknown") ? api : type);
    } else if (!strcmp(type, "oom")) {
        if (program)
            snprintf(name, sizeof name, "OOM reported by the program on %s", where);
        else
            snprintf(name, sizeof name, "OOM: %s %s on %s", api ? api : "?", bytes, where);
        scope = "p";
    } else if (!strcmp(type, "oom_recovered")) {
        snprintf(name, sizeof name, "OOM recovered on %s", where);
        scope = "p";
    } else if (!strcmp(type, "pressure")) {
        snprintf(name, sizeof name, "memory pressure on %s: %lld%%", where, (long long)result);
        scope = "p";
    } else if (!strcmp(type, "signal")) {
        snprintf(name, sizeof name, "signal %lld", (long long)result);
        scope = "p";
    } else if (!strcmp(type, "alloc_failed")) {
        snprintf(name, sizeof name, "%s failed (code %lld)", api ? api : "?", (long long)result);
    } else if (!strcmp(type, "mark")) {
        snprintf(name, sizeof name, "mark");
    } else {
        json_decref(args); /* samples are the counter alone */
        return;
    }
    name_thread(o, p, tid);
    emit(o, instant(name, cat, scope, p->pid, tid, t, args));
}

static process_view *view_of(process_view *views, int *n, json_int_t pid)
{
    for (int i = 0; i < *n; i++)
        if (views[i].pid == pid)
            return &views[i];
    process_view *v = &views[(*n)++];
    memset(v, 0, sizeof *v);
    v->pid = pid;
    v->last_seq = -1;
    return v;
}

static void name_process(trace_out *o, bundle *b, json_int_t pid)
{
    char name[320];
    export_process_label(b, 0, name, sizeof name);
    emit(o, meta("process_name", pid, 0, json_pack("{s:s}", "name", name)));
    const char *rank = bundle_rank(b);
    if (rank)
        emit(o, meta("process_sort_index", pid, 0, json_pack("{s:I}", "sort_index",
                                                              (json_int_t)strtoll(rank, NULL, 10))));
}

/* One bundle's events, those not written yet for its process, then the
 * moment it was written. */
static void export_bundle(trace_out *o, bundle *b, process_view *views, int *nviews)
{
    int64_t pid = 0, created = 0;
    jint(b->manifest, "pid", &pid);
    process_view *p = view_of(views, nviews, (json_int_t)pid);
    if (!p->named)
        name_process(o, b, p->pid);
    p->named = 1;
    int64_t newest = p->last_seq;
    size_t i;
    json_t *ev;
    event_foreach(&b->events, i, ev) {
        int64_t seq = -1;
        if (jint(ev, "seq", &seq) == 0 && seq <= p->last_seq)
            continue; /* an earlier bundle of this process wrote it */
        export_event(o, p, ev);
        if (seq > newest)
            newest = seq;
    }
    p->last_seq = newest;
    if (jint(b->manifest, "created_at_ns", &created) == 0) {
        gmp_verdict k = bundle_kind_of(b);
        json_t *args = json_pack("{s:s, s:s}", "bundle", b->name, "kind", gmp_verdict_words(k));
        const char *reason = jstr(b->metadata, "reason");
        const char *message = jstr(b->metadata, "exception_message");
        if (reason)
            json_object_set_new(args, "reason", json_string(reason));
        if (message)
            json_object_set_new(args, "message", json_string(message));
        char name[160];
        snprintf(name, sizeof name, "bundle: %s", gmp_verdict_words(k));
        emit(o, instant(name, "bundle", "p", p->pid, p->pid, (double)created / 1e3, args));
    }
}

/* A live ring's events as the trace shows them: each record as events.json
 * would hold it, the process named by its ring's command. */
static void export_ring(trace_out *o, const ring_copy_t *r, process_view *p)
{
    char name[320];
    export_ring_label(r, 0, name, sizeof name);
    emit(o, meta("process_name", p->pid, 0, json_pack("{s:s}", "name", name)));
    for (size_t i = 0; i < r->n; i++) {
        json_t *ev = ring_event_json(&r->events[i]);
        if (ev)
            export_event(o, p, ev);
        json_decref(ev);
    }
}

int export_trace(char **paths, int npaths, FILE *f)
{
    size_t nall = 0;
    char **all = export_bundle_paths(paths, npaths, &nall);
    /* at most a process a bundle */
    process_view *views = all ? calloc(nall ? nall : 1, sizeof *views) : NULL;
    if (!views) {
        export_paths_free(all, nall);
        fputs("gmp-inspect export: out of memory\n", stderr);
        return EXIT_INVALID;
    }
    int rings = 0, bad = 0, nviews = 0;
    for (int i = 0; i < npaths; i++)
        rings += is_ring_target(paths[i]);
    if (!nall && !rings) {
        fputs("gmp-inspect export: no bundle there\n", stderr);
        bad = 1;
    }
    trace_out o = {f, 0};
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
    for (int i = 0; i < npaths; i++) {
        char path[4096];
        ring_copy_t r;
        if (!is_ring_target(paths[i]))
            continue;
        if (ring_path_of("export", paths[i], path, sizeof path) < 0 ||
            ring_copy("export", path, 0, &r) < 0) {
            bad = 1;
            continue;
        }
        process_view live = {.pid = r.pid, .last_seq = -1, .named = 1};
        export_ring(&o, &r, &live);
        free(r.events);
    }
    for (size_t i = 0; i < nall; i++) {
        char err[600];
        bundle b;
        if (bundle_open(&b, all[i], 1, 1, err, sizeof err) < 0) {
            fprintf(stderr, "gmp-inspect export: %s\n", err);
            bad = 1;
        } else {
            export_bundle(&o, &b, views, &nviews);
            bundle_close(&b);
        }
    }
    fputs("\n]}\n", f);
    export_paths_free(all, nall);
    free(views);
    return bad ? EXIT_INVALID : EXIT_OK;
}
