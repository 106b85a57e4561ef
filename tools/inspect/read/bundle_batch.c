/*
 * bundle_batch.c — the bundles under a path read by several threads and
 * handed to the caller one by one, in the order for_each_bundle finds them.
 * A cluster's week is some 100,000 bundles, each a few small files to
 * open and parse: on one thread triage took 14 s of it, most of it parsing.
 * So the bundles are read in batches: while the reader threads open and
 * answer one batch (the caller's read(), on a slot of its own per bundle),
 * the calling thread merges the batch before (the caller's merge(), in
 * order), so what the caller builds, and prints, is what one thread would;
 * then it reads beside them until the batch is done.  Each reader takes
 * the batch's next bundle as it finishes one, so no thread waits at the
 * batch's end while another still has a share to read.
 * Memory stays flat: two batches of slots, whatever the count of bundles.
 *
 * read() runs on a reader thread: it may open and answer a bundle (its
 * documents go to that thread's arena when the verb uses arenas) and must
 * touch nothing shared; what is shared on the way (symbols.c's caches,
 * wide_sizes.c's markers) is made safe for it here or there.  A thread that
 * cannot be started leaves its share to the calling thread.
 */
#include "read.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH 256
#define MAX_READERS 8

typedef struct batch {
    unsigned char *slots; /* BATCH slots of ops->slot_size */
    char (*paths)[BUNDLE_PATH_MAX];
    size_t n;
    size_t next; /* atomic: the next bundle a reader takes */
} batch;

typedef struct reader {
    pthread_t thread;
    int started;
    const bundle_batch_ops *ops;
    batch *b;
} reader;

typedef struct pipeline {
    const bundle_batch_ops *ops;
    batch batches[2];
    int filling;     /* the batch being filled by the walk */
    int being_read;  /* the batch the readers have, or -1 */
    reader readers[MAX_READERS];
    int reader_count;
} pipeline;

static void *slot_of(const pipeline *p, const batch *b, size_t i)
{
    return b->slots + i * p->ops->slot_size;
}

/* Reads the batch's bundles not yet taken, one at a time. */
static void read_rest(const bundle_batch_ops *ops, batch *b)
{
    for (size_t i; (i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED)) < b->n;)
        ops->read(b->slots + i * ops->slot_size, b->paths[i], ops->arg);
}

static void *read_share(void *arg)
{
    reader *r = arg;
    read_rest(r->ops, r->b);
    return NULL;
}

static void start_reading(pipeline *p, int which)
{
    batch *b = &p->batches[which];
    b->next = 0;
    int count = p->reader_count;
    for (int t = 0; t < count; t++) {
        reader *r = &p->readers[t];
        *r = (reader){.ops = p->ops, .b = b};
        r->started = count > 1 && pthread_create(&r->thread, NULL, read_share, r) == 0;
        if (!r->started)
            read_share(r); /* one reader, or no thread to be had: read here */
    }
    p->being_read = which;
}

static void finish_reading(pipeline *p)
{
    for (int t = 0; t < p->reader_count; t++)
        if (p->readers[t].started)
            pthread_join(p->readers[t].thread, NULL);
    p->being_read = -1;
}

static void merge(pipeline *p, int which)
{
    batch *b = &p->batches[which];
    for (size_t i = 0; i < b->n; i++)
        p->ops->merge(slot_of(p, b, i), p->ops->arg);
    b->n = 0;
}

/* The batch filled is read, while the one read before it is merged; then
 * this thread reads beside the readers what they have not taken. */
static void turn(pipeline *p)
{
    int was_read = p->being_read;
    if (was_read >= 0)
        finish_reading(p);
    start_reading(p, p->filling);
    p->filling ^= 1;
    if (was_read >= 0)
        merge(p, was_read);
    read_rest(p->ops, &p->batches[p->being_read]);
}

static void collect(const char *path, void *arg)
{
    pipeline *p = arg;
    batch *b = &p->batches[p->filling];
    snprintf(b->paths[b->n], sizeof b->paths[0], "%s", path); /* walk() keeps within it */
    if (++b->n == BATCH)
        turn(p);
}

int for_each_bundle_read(char *path, const bundle_batch_ops *ops)
{
    pipeline p = {.ops = ops, .being_read = -1};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    p.reader_count = cpus < 1 ? 1 : cpus > MAX_READERS ? MAX_READERS : (int)cpus;
    json_wide_markers_ready(); /* made once, before any reader parses */
    int ready = 1;
    for (int i = 0; i < 2; i++) {
        p.batches[i].slots = calloc(BATCH, ops->slot_size);
        p.batches[i].paths = calloc(BATCH, sizeof *p.batches[i].paths);
        ready &= p.batches[i].slots && p.batches[i].paths;
    }
    if (ready) {
        for_each_bundle(path, collect, &p);
        int read = p.being_read; /* the last full batch, then what is left */
        if (read >= 0)
            finish_reading(&p);
        if (p.batches[p.filling].n)
            start_reading(&p, p.filling);
        if (read >= 0)
            merge(&p, read);
        if (p.being_read >= 0) {
            read_rest(ops, &p.batches[p.being_read]);
            finish_reading(&p);
            merge(&p, p.filling);
        }
    }
    for (int i = 0; i < 2; i++) {
        free(p.batches[i].slots);
        free(p.batches[i].paths);
    }
    return ready ? 0 : -1;
}
