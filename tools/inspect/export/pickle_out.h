/*
 * pickle_out.h — a streaming writer of the pickle subset a PyTorch memory
 * snapshot uses (pickle_out.c).  A dict is pickle_dict, then key and value
 * pairs, then pickle_dict_end; a list likewise; a 2-tuple is its two values
 * then pickle_tuple2_end.  pickle_memo_put right after a value remembers it
 * (its id returned); pickle_memo_get writes it again by reference.
 */
#ifndef GMP_PICKLE_OUT_H
#define GMP_PICKLE_OUT_H

#include <stdint.h>
#include <stdio.h>

typedef struct pickle_out {
    FILE *f;
    int err;       /* a write failed */
    uint32_t memo; /* the next memo id */
} pickle_out;

void pickle_begin(pickle_out *p, FILE *f);
int pickle_end(pickle_out *p); /* 0, or -1 when a write failed */
void pickle_dict(pickle_out *p);
void pickle_dict_end(pickle_out *p);
void pickle_list(pickle_out *p);
void pickle_list_end(pickle_out *p);
void pickle_tuple2_end(pickle_out *p);
void pickle_key(pickle_out *p, const char *key);
void pickle_str(pickle_out *p, const char *s); /* NULL: None */
void pickle_int(pickle_out *p, int64_t v);
void pickle_uint(pickle_out *p, uint64_t v);
void pickle_float(pickle_out *p, double v);
void pickle_bool(pickle_out *p, int v);
void pickle_none(pickle_out *p);
uint32_t pickle_memo_put(pickle_out *p);
void pickle_memo_get(pickle_out *p, uint32_t id);

#endif
