/*
 * torch_sources.c — the processes a torch-snapshot is made of: among
 * the bundles of the operands, the newest of each process (its ring holds
 * the earlier ones' events), ranks in order, then live rings copied once;
 * each process's slots (its GPUs up to the largest it used, then the host)
 * numbered on from the last one's, and the map of which slot is whose.
 */
#include "torch.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

size_t source_events(const torch_source *s)
{
    return s->is_ring ? s->ring.n : s->b.events.n;
}

json_t *source_event(const torch_source *s, size_t i)
{
    return s->is_ring ? ring_event_json(&s->ring.events[i]) : event_at(&s->b.events, i);
}

#define HOST_SLOT (-2)

/* Where an event or allocation belongs before a process's GPUs are
 * counted: a GPU's number, HOST_SLOT, or -1 for a device past any list. */
static int raw_slot(json_t *ev, const char *device_key)
{
    const char *backend = jstr(ev, "backend");
    int64_t dev = -1;
    jint(ev, device_key, &dev);
    if (!backend || !strcmp(backend, "cpu") || dev < 0)
        return HOST_SLOT;
    return dev < 4096 ? (int)dev : -1;
}

int slot_of(const torch_source *s, json_t *ev, const char *device_key)
{
    int raw = raw_slot(ev, device_key);
    return raw == HOST_SLOT ? s->ngpu : raw; /* the host, after the devices */
}

/* Slot's name on the map: "cuda:0" or "host", from its first event. */
static void slot_where(const torch_source *s, int slot, char *out, size_t cap)
{
    snprintf(out, cap, slot == s->ngpu ? "host" : "device %d (no events)", slot);
    if (!s->slot_start || s->slot_start[slot] == s->slot_start[slot + 1])
        return;
    json_t *ev = source_event(s, s->order[s->slot_start[slot]]);
    if (ev)
        event_where(ev, out, cap);
    json_decref(ev);
}

/* A process's slots (one per GPU up to the largest it used, then the host)
 * and its events grouped by them: a pass to place each event, then a
 * counting sort, which keeps their order.  -1 without memory. */
static int count_slots(torch_source *s)
{
    size_t n = source_events(s), i;
    int *where = malloc((n ? n : 1) * sizeof *where); /* raw_slot of each */
    if (!where)
        return -1;
    json_t *ev;
    source_foreach(s, i, ev) {
        where[i] = raw_slot(ev, "device_id");
        if (where[i] >= 0 && where[i] + 1 > s->ngpu)
            s->ngpu = where[i] + 1;
        s->has_host |= where[i] == HOST_SLOT;
    }
    size_t slots = (size_t)s->ngpu + (size_t)s->has_host;
    s->slot_start = calloc(slots + 2, sizeof *s->slot_start);
    s->order = malloc((n ? n : 1) * sizeof *s->order);
    if (!s->slot_start || !s->order) {
        free(where);
        return -1;
    }
    for (i = 0; i < n; i++)
        if (where[i] != -1)
            s->slot_start[(where[i] == HOST_SLOT ? (size_t)s->ngpu : (size_t)where[i]) + 1]++;
    for (size_t k = 1; k <= slots; k++)
        s->slot_start[k] += s->slot_start[k - 1];
    size_t *next = calloc(slots + 1, sizeof *next);
    if (!next) {
        free(where);
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (where[i] == -1)
            continue;
        size_t k = where[i] == HOST_SLOT ? (size_t)s->ngpu : (size_t)where[i];
        s->order[s->slot_start[k] + next[k]++] = i;
    }
    free(next);
    free(where);
    return 0;
}

typedef struct candidate {
    size_t path;
    int64_t pid;
    char host[256];
    long long rank; /* LLONG_MAX: none */
} candidate;

static int by_rank(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->path < y->path ? -1 : x->path > y->path;
}

/* The newest bundle of each process among paths (in time order), ranks
 * in order; *bad set for one that cannot be read. */
static size_t choose_bundles(char **paths, size_t n, candidate *out, int *bad)
{
    size_t chosen = 0;
    for (size_t i = 0; i < n; i++) {
        char err[600];
        bundle b;
        if (bundle_open(&b, paths[i], 1, 0, err, sizeof err) < 0) {
            fprintf(stderr, "gmp-inspect export: %s\n", err);
            *bad = 1;
            continue;
        }
        candidate c = {.path = i, .rank = LLONG_MAX};
        jint(b.manifest, "pid", &c.pid);
        const char *host = bundle_host(&b), *rank = bundle_rank(&b);
        snprintf(c.host, sizeof c.host, "%s", host ? host : "");
        if (rank)
            c.rank = strtoll(rank, NULL, 10);
        bundle_close(&b);
        size_t k = 0;
        while (k < chosen && (out[k].pid != c.pid || strcmp(out[k].host, c.host)))
            k++;
        out[k] = c; /* a later bundle of one process replaces its earlier */
        chosen += k == chosen;
    }
    qsort(out, chosen, sizeof *out, by_rank);
    return chosen;
}

/* Open the processes' sources (bundles with their events, rings copied):
 * how many, each with its slots counted and its first slot set. */
static size_t open_sources(char **operands, int n, char **paths, const candidate *chosen,
                           size_t nchosen, torch_source *src, int *bad)
{
    size_t nsrc = 0;
    int slots = 0;
    for (size_t k = 0; k < nchosen; k++) {
        torch_source *s = &src[nsrc];
        char err[600];
        if (bundle_open(&s->b, paths[chosen[k].path], 1, 1, err, sizeof err) < 0) {
            fprintf(stderr, "gmp-inspect export: %s\n", err);
            *bad = 1;
            continue;
        }
        s->stacks = load_json_at(s->b.dirfd, "stacks.json", SMALL_FILE_MAX, NULL, 0);
        s->mods = load_json_at(s->b.dirfd, "modules.json", SMALL_FILE_MAX, NULL, 0);
        export_process_label(&s->b, 1, s->label, sizeof s->label);
        nsrc++;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        torch_source *s = &src[nsrc];
        if (!is_ring_target(operands[i]))
            continue;
        if (ring_path_of("export", operands[i], path, sizeof path) < 0 ||
            ring_copy("export", path, 1, &s->ring) < 0) {
            *bad = 1;
            continue;
        }
        s->is_ring = 1;
        s->b.dirfd = -1;
        s->stacks = s->ring.stacks; /* released with the source's */
        s->mods = s->ring.mods;
        export_ring_label(&s->ring, 1, s->label, sizeof s->label);
        nsrc++;
    }
    for (size_t k = 0; k < nsrc; k++) {
        if (stack_index_build(&src[k].stack_ids, src[k].stacks) < 0 ||
            module_table_build(&src[k].modules, src[k].mods) < 0 || count_slots(&src[k]) < 0) {
            fputs("gmp-inspect export: out of memory\n", stderr);
            *bad = 1;
        }
        src[k].base = slots;
        slots += src[k].ngpu + src[k].has_host;
    }
    return nsrc;
}

torch_source *torch_sources_open(char **operands, int n, size_t *count, int *bad)
{
    size_t npaths = 0;
    int rings = 0;
    for (int i = 0; i < n; i++)
        rings += is_ring_target(operands[i]);
    char **paths = export_bundle_paths(operands, n, &npaths);
    candidate *chosen = paths ? calloc(npaths + 1, sizeof *chosen) : NULL;
    torch_source *src = chosen ? calloc(npaths + (size_t)rings + 1, sizeof *src) : NULL;
    if (!src) {
        fputs("gmp-inspect export: out of memory\n", stderr);
        free(chosen);
        export_paths_free(paths, npaths);
        return NULL;
    }
    size_t nchosen = choose_bundles(paths, npaths, chosen, bad);
    *count = open_sources(operands, n, paths, chosen, nchosen, src, bad);
    free(chosen);
    export_paths_free(paths, npaths);
    if (!*count && !*bad)
        fputs("gmp-inspect export: no bundle there\n", stderr);
    return src;
}

void torch_sources_map(const torch_source *src, size_t n, FILE *map)
{
    for (size_t k = 0; n > 1 && k < n; k++)
        for (int slot = 0; slot < src[k].ngpu + src[k].has_host; slot++) {
            char where[64];
            slot_where(&src[k], slot, where, sizeof where);
            fprintf(map, "memory_viz device %d: %s of %s\n", src[k].base + slot, where,
                    src[k].label);
        }
}

void torch_sources_close(torch_source *src, size_t n)
{
    for (size_t k = 0; src && k < n; k++) {
        if (src[k].is_ring)
            free(src[k].ring.events);
        else
            bundle_close(&src[k].b);
        stack_index_free(&src[k].stack_ids);
        module_table_free(&src[k].modules);
        json_decref(src[k].stacks);
        json_decref(src[k].mods);
        free(src[k].order);
        free(src[k].slot_start);
    }
    free(src);
}

