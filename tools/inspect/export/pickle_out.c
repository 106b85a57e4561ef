/*
 * pickle_out.c — the small part of Python's pickle format (protocol 2) that
 * a PyTorch memory snapshot needs: dicts, lists, a 2-tuple, strings, ints of
 * any size, floats, True/False/None, and the memo (a frames list written
 * once and referred to after).  Written straight to a FILE as it goes, so a
 * snapshot of any size costs no memory; Python's pickle.load (and so
 * PyTorch's memory_viz) reads it, with no PyTorch on the machine that
 * writes it.  A string that is not UTF-8 is written with U+FFFD for each
 * bad byte, as Python's decoder would refuse it.
 */
#include "pickle_out.h"

#include <string.h>

static void put(pickle_out *p, const void *data, size_t n)
{
    if (!p->err && fwrite(data, 1, n, p->f) != n)
        p->err = 1;
}

static void op(pickle_out *p, unsigned char code)
{
    put(p, &code, 1);
}

static void le32(pickle_out *p, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(p, b, 4);
}

void pickle_begin(pickle_out *p, FILE *f)
{
    memset(p, 0, sizeof *p);
    p->f = f;
    op(p, 0x80); /* PROTO */
    op(p, 2);
}

int pickle_end(pickle_out *p)
{
    op(p, '.'); /* STOP */
    return p->err ? -1 : 0;
}

void pickle_dict(pickle_out *p)
{
    op(p, '}'); /* EMPTY_DICT */
    op(p, '('); /* MARK */
}

void pickle_dict_end(pickle_out *p)
{
    op(p, 'u'); /* SETITEMS */
}

void pickle_list(pickle_out *p)
{
    op(p, ']'); /* EMPTY_LIST */
    op(p, '('); /* MARK */
}

void pickle_list_end(pickle_out *p)
{
    op(p, 'e'); /* APPENDS */
}

void pickle_tuple2_end(pickle_out *p)
{
    op(p, 0x86); /* TUPLE2 of the two values before it */
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0)))
        return 0; /* overlong, or a surrogate */
    if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90)))
        return 0;
    return n;
}

void pickle_str(pickle_out *p, const char *s)
{
    if (!s) {
        pickle_none(p);
        return;
    }
    static const unsigned char replacement[] = {0xef, 0xbf, 0xbd};
    const unsigned char *u = (const unsigned char *)s;
    size_t out = 0;
    for (size_t i = 0, n; u[i]; i += n ? n : 1)
        out += (n = utf8_len(u + i)) ? n : sizeof replacement;
    op(p, 'X'); /* BINUNICODE: 4-byte length, UTF-8 */
    le32(p, (uint32_t)out);
    for (size_t i = 0, n; u[i]; i += n ? n : 1) {
        n = utf8_len(u + i);
        if (n)
            put(p, u + i, n);
        else
            put(p, replacement, sizeof replacement);
    }
}

void pickle_int(pickle_out *p, int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX) {
        op(p, 'J'); /* BININT */
        le32(p, (uint32_t)(int32_t)v);
        return;
    }
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    op(p, 0x8a); /* LONG1: little-endian two's complement */
    op(p, 8);
    put(p, b, 8);
}

void pickle_uint(pickle_out *p, uint64_t v)
{
    if (v <= INT64_MAX) {
        pickle_int(p, (int64_t)v);
        return;
    }
    unsigned char b[9];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    b[8] = 0; /* positive */
    op(p, 0x8a);
    op(p, 9);
    put(p, b, 9);
}

void pickle_float(pickle_out *p, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(bits >> (56 - 8 * i)); /* BINFLOAT: big-endian */
    op(p, 'G');
    put(p, b, 8);
}

void pickle_bool(pickle_out *p, int v)
{
    op(p, v ? 0x88 : 0x89); /* NEWTRUE, NEWFALSE */
}

void pickle_none(pickle_out *p)
{
    op(p, 'N');
}

void pickle_key(pickle_out *p, const char *key)
{
    pickle_str(p, key);
}

uint32_t pickle_memo_put(pickle_out *p)
{
    uint32_t id = p->memo++;
    op(p, 'r'); /* LONG_BINPUT */
    le32(p, id);
    return id;
}

void pickle_memo_get(pickle_out *p, uint32_t id)
{
    op(p, 'j'); /* LONG_BINGET */
    le32(p, id);
}
