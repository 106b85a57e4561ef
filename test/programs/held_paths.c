/*
 * held_paths.c — memory held through three call paths, then a request that
 * fails, for the tests of what a bundle says held the memory.  Each path
 * is its own function (never inlined), so its line is the site:
 *   keep_batches   12 blocks of 8 MiB (96 MiB)
 *   keep_cache      6 blocks of 4 MiB (24 MiB), half of them freed again
 *   keep_scratch    4 blocks of 2 MiB (8 MiB)
 * Every page is touched.  Then malloc(2^62) fails and it exits 1, printing
 * "held <bytes>" first: what the three paths hold then.  STAY_HERE after
 * each loop keeps its last call from becoming a tail call, which would
 * leave the path's own frame out of the stack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024u * 1024u)

#define STAY_HERE() __asm__ volatile("" ::: "memory")

static void *blocks[64];
static size_t count, held;

static __attribute__((noinline)) void *keep(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p)
        exit(2);
    memset(p, 1, bytes);
    blocks[count++] = p;
    held += bytes;
    return p;
}

static __attribute__((noinline)) void keep_batches(void)
{
    for (int i = 0; i < 12; i++)
        keep(8 * MIB);
    STAY_HERE();
}

static __attribute__((noinline)) void keep_cache(void)
{
    for (int i = 0; i < 6; i++) {
        void *p = keep(4 * MIB);
        if (i % 2) { /* evicted: a free the bundle must not count as held */
            free(p);
            blocks[--count] = NULL;
            held -= 4 * MIB;
        }
    }
    STAY_HERE();
}

static __attribute__((noinline)) void keep_scratch(void)
{
    for (int i = 0; i < 4; i++)
        keep(2 * MIB);
    STAY_HERE();
}

int main(void)
{
    keep_batches();
    keep_cache();
    keep_scratch();
    printf("held %zu\n", held);
    fflush(stdout);
    void *huge = malloc((size_t)1 << 62);
    return huge ? 0 : 1;
}
