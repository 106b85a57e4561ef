/*
 * json_arena.c — where jansson's values live while a reader of many
 * bundles (triage) holds one bundle's documents.  Parsing a bundle's
 * manifest, metadata and environment makes some five hundred values, each
 * a malloc, and closing it as many frees: a third of triage's time over a
 * cluster's week of bundles.  So a bundle opened with an arena has its
 * documents' values cut from a few large blocks, handed back all at once
 * when the bundle is closed, without a walk through its documents.
 *
 * Every block jansson asks for carries a word in front saying whose it is:
 * an arena's (freeing it is a no-op: the arena's end frees it) or the
 * heap's (freed as ever).  So a value made outside any arena (a verb's
 * own documents, a value set into a bundle's document later) is freed as
 * it always was, by whichever thread, and json_decref of a bundle's
 * document stays correct.  The arena a thread allocates into is that
 * thread's (json_arena_use): threads reading different bundles never share
 * one.  A value of an arena must not outlive its bundle: readers copy what
 * they keep (triage's groups and runs hold text, never values).  What
 * jansson hands its caller to free (json_dumps' text) is tagged too, and
 * goes back through json_arena_free_text (by whichever allocator jansson
 * has: a program that never installed this one, a fuzzer, frees it so).
 */
#include "read.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TAG_HEAP 0x6865617070ull  /* "heapp" */
#define TAG_ARENA 0x6172656e61ull /* "arena" */
#define HEADER 16                 /* the tag, and malloc's alignment kept */
#define BLOCK_MIN (16u << 10)

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    alignas(16) unsigned char data[];
} arena_block;

struct json_arena {
    arena_block *blocks; /* the newest first: where values are cut */
};

int inspect_bundle_arenas;

static _Thread_local json_arena *in_use;

static void *tagged(unsigned char *p, uint64_t tag)
{
    memcpy(p, &tag, sizeof tag);
    return p + HEADER;
}

static void *arena_malloc(size_t n)
{
    json_arena *a = in_use;
    if (n > SIZE_MAX / 2)
        return NULL;
    size_t need = (n + HEADER + 15) & ~(size_t)15;
    if (!a) {
        unsigned char *p = malloc(n + HEADER);
        return p ? tagged(p, TAG_HEAP) : NULL;
    }
    arena_block *b = a->blocks;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > BLOCK_MIN ? need : BLOCK_MIN;
        if (!(b = malloc(sizeof *b + cap)))
            return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = a->blocks;
        a->blocks = b;
    }
    unsigned char *p = b->data + b->used;
    b->used += need;
    return tagged(p, TAG_ARENA);
}

static void arena_free(void *v)
{
    if (!v)
        return;
    unsigned char *p = (unsigned char *)v - HEADER;
    uint64_t tag;
    memcpy(&tag, p, sizeof tag);
    if (tag == TAG_HEAP)
        free(p);
    /* an arena's: freed with its arena */
}

void json_arena_free_text(char *text)
{
    json_free_t free_fn;
    json_get_alloc_funcs(NULL, &free_fn); /* ours, or jansson's own where not installed */
    free_fn(text);
}

void json_arena_install(void)
{
    json_set_alloc_funcs(arena_malloc, arena_free);
    json_object_seed(0); /* its hash seed, before reader threads make objects */
}

int json_arena_installed(void)
{
    json_malloc_t malloc_fn;
    json_get_alloc_funcs(&malloc_fn, NULL); /* a program that never installed ours (a fuzzer) */
    return malloc_fn == arena_malloc;
}

json_arena *json_arena_new(void)
{
    return calloc(1, sizeof(json_arena));
}

json_arena *json_arena_use(json_arena *a)
{
    json_arena *was = in_use;
    in_use = a;
    return was;
}

void json_arena_free(json_arena *a)
{
    if (!a)
        return;
    for (arena_block *b = a->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(a);
}
