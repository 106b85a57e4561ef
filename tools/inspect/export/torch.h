/*
 * torch.h — what torch.c and torch_sources.c share:
 * the processes a torch-snapshot is made of (each a bundle or a live ring)
 * and how their events are read.  Internal to gmp-inspect.
 */
#ifndef GMP_INSPECT_TORCH_H
#define GMP_INSPECT_TORCH_H

#include "gpumemprof.h"
#include "export.h"

#include <stdio.h>

/* One process: its newest bundle, or a live ring's copy. */
typedef struct torch_source {
    bundle b; /* for a ring, only dirfd (-1) */
    ring_copy_t ring;
    int is_ring;
    json_t *stacks, *mods;
    stack_index stack_ids; /* of stacks */
    module_table modules;  /* of mods */
    int base;     /* its first device_traces slot */
    int ngpu;     /* its GPU slots: the largest device + 1 */
    int has_host; /* a slot after them for the host */
    /* its events' indices grouped by slot, in order within each: slot k's
     * are order[slot_start[k]] to order[slot_start[k + 1] - 1] (so each
     * slot's list costs its own events, not all of them) */
    size_t *order, *slot_start;
    char label[320];
} torch_source;

/* A process's events in order: how many; event i as events.json holds it
 * (a new reference, NULL without memory); each in turn, released at the
 * end of its turn. */
size_t source_events(const torch_source *s);
json_t *source_event(const torch_source *s, size_t i);
#define source_foreach(s, i, ev) \
    for ((i) = 0; (i) < source_events(s) && ((ev) = source_event((s), (i)), 1); \
         json_decref(ev), (i)++)

/* The event's slot within its process: a GPU's number, or ngpu for the
 * host; -1 for a device past any list. */
int slot_of(const torch_source *s, json_t *ev, const char *device_key);

/* The processes behind the operands: the newest bundle of each process,
 * ranks in order, then the rings; each with its slots counted and its
 * first slot set.  An array to close with torch_sources_close, how many in
 * *count; *bad set for one that could not be read or when there is none (a
 * line said); NULL without memory. */
torch_source *torch_sources_open(char **operands, int n, size_t *count, int *bad);
/* Which slot is whose, a line each, when there are several processes. */
void torch_sources_map(const torch_source *src, size_t n, FILE *map);
void torch_sources_close(torch_source *src, size_t n);

#endif
