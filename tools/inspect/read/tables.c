/*
 * tables.c — a bundle's stacks and modules as tables, built once from
 * stacks.json and modules.json (or a live ring's records, read as those
 * files hold them): a stack found by its id, and the module that holds an
 * address, each by binary search, where every frame named looked through
 * the whole file before.
 */
#include "read.h"

#include <stdlib.h>
#include <string.h>

static int by_base(const void *a, const void *b)
{
    const module_entry *x = a, *y = b;
    /* equal bases keep the file's order: the later one wins, as it did */
    return x->base < y->base ? -1 : x->base > y->base ? 1 : (x->order > y->order) - (x->order < y->order);
}

int module_table_build(module_table *t, json_t *mods)
{
    memset(t, 0, sizeof *t);
    size_t i, n = json_array_size(mods);
    json_t *m;
    t->v = n ? calloc(n, sizeof *t->v) : NULL;
    if (n && !t->v)
        return -1;
    json_array_foreach(mods, i, m) {
        const char *base = jstr(m, "base"), *path = jstr(m, "path"), *end = jstr(m, "end");
        if (!path || !base)
            continue;
        t->v[t->n] = (module_entry){strtoull(base, NULL, 16), end ? strtoull(end, NULL, 16) : 0,
                                    path, t->n};
        t->n++;
    }
    if (t->n) /* qsort wants an array, even of none */
        qsort(t->v, t->n, sizeof *t->v, by_base);
    return 0;
}

void module_table_free(module_table *t)
{
    free(t->v);
    memset(t, 0, sizeof *t);
}

const char *module_of(const module_table *t, uint64_t at, uint64_t *bias)
{
    *bias = 0;
    if (!t || !t->n)
        return NULL;
    size_t lo = 0, hi = t->n; /* the first entry whose base is past at */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->v[mid].base <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* the highest base at or below at whose object reaches it (a recovered
     * bundle lists only some objects, with their ends) */
    for (size_t k = lo; k-- > 0;)
        if (!t->v[k].end || at < t->v[k].end) {
            *bias = t->v[k].base;
            return t->v[k].path;
        }
    return NULL;
}

static int by_id(const void *a, const void *b)
{
    const stack_entry *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id ? 1 : (x->order > y->order) - (x->order < y->order);
}

int stack_index_build(stack_index *x, json_t *stacks)
{
    memset(x, 0, sizeof *x);
    size_t i, n = json_array_size(stacks);
    json_t *s;
    x->v = n ? calloc(n, sizeof *x->v) : NULL;
    if (n && !x->v)
        return -1;
    json_array_foreach(stacks, i, s) {
        int64_t id;
        if (!jint(s, "id", &id)) {
            x->v[x->n] = (stack_entry){id, s, x->n};
            x->n++;
        }
    }
    if (x->n)
        qsort(x->v, x->n, sizeof *x->v, by_id);
    return 0;
}

void stack_index_free(stack_index *x)
{
    free(x->v);
    memset(x, 0, sizeof *x);
}

json_t *stack_with_id(const stack_index *x, int64_t id)
{
    size_t lo = 0, hi = x ? x->n : 0; /* the first entry of id: the file's first */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return x && lo < x->n && x->v[lo].id == id ? x->v[lo].stack : NULL;
}

const module_table *bundle_modules(bundle *b)
{
    if (!b->modules_read) {
        b->modules_read = 1;
        if (module_table_build(&b->modules, bundle_json(b, "modules.json")) < 0)
            return NULL;
    }
    return &b->modules;
}

const stack_index *bundle_stacks(bundle *b)
{
    if (!b->stacks_read) {
        b->stacks_read = 1;
        if (stack_index_build(&b->stacks, bundle_json(b, "stacks.json")) < 0)
            return NULL;
    }
    return &b->stacks;
}

/* ---- tables that grow ----------------------------------------------------- */

int array_room(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t more = *cap ? *cap * 2 : 8;
    void *grown = realloc(*v, more * elem);
    if (!grown)
        return -1;
    *v = grown;
    *cap = more;
    return 0;
}

long index_find(index_table *t, size_t n, uint64_t h, index_same same, index_hash hash_of,
                const void *arg)
{
    if (2 * (n + 1) > t->count) { /* at most half full: short probes */
        size_t count = t->count ? t->count * 2 : 64;
        size_t *slots = calloc(count, sizeof *slots);
        if (!slots)
            return -1;
        for (size_t i = 0; i < n; i++) {
            size_t at = hash_of(i, arg) & (count - 1);
            while (slots[at])
                at = (at + 1) & (count - 1);
            slots[at] = i + 1;
        }
        free(t->slots);
        t->slots = slots;
        t->count = count;
    }
    size_t at = h & (t->count - 1);
    for (; t->slots[at]; at = (at + 1) & (t->count - 1))
        if (same(t->slots[at] - 1, arg))
            break;
    return (long)at;
}

void index_free(index_table *t)
{
    free(t->slots);
    t->slots = NULL;
    t->count = 0;
}
