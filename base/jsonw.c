/*
 * jsonw.c — the streaming, allocation-free JSON writer (see jsonw.h).
 */
#include "jsonw.h"

#include <errno.h>
#include <string.h>

void gmp_jw_init(gmp_jw *w, int fd, char *buf, size_t cap)
{
    memset(w, 0, sizeof *w);
    w->fd = fd;
    w->buf = buf;
    w->cap = cap;
}

static void flush(gmp_jw *w)
{
    if (w->err || !w->len)
        return;
    if (w->fd < 0) {
        w->err = ENOSPC;
        return;
    }
    if (gmp_write_all(w->fd, w->buf, w->len) < 0)
        w->err = errno ? errno : EIO;
    w->len = 0;
}

static void put_slow(gmp_jw *w, const char *s, size_t n)
{
    while (n && !w->err) {
        if (w->len == w->cap) {
            flush(w);
            if (w->err)
                return;
        }
        size_t room = w->cap - w->len;
        size_t k = n < room ? n : room;
        memcpy(w->buf + w->len, s, k);
        w->len += k;
        s += k;
        n -= k;
    }
}

/* Most pieces fit in the buffer as it is: one copy (a bundle's million
 * events are some thirty pieces each). */
static inline void put(gmp_jw *w, const char *s, size_t n)
{
    w->total += n;
    if (__builtin_expect(w->cap - w->len >= n && !w->err, 1)) {
        memcpy(w->buf + w->len, s, n);
        w->len += n;
        return;
    }
    put_slow(w, s, n);
}

static void putc1(gmp_jw *w, char c)
{
    put(w, &c, 1);
}

/* Before a value: a comma when the container already has an item. */
static void before_value(gmp_jw *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (w->depth > 0) {
        uint64_t bit = 1ull << (w->depth - 1);
        if (w->has_items & bit)
            putc1(w, ',');
        w->has_items |= bit;
    }
}

static void open_container(gmp_jw *w, char c)
{
    before_value(w);
    putc1(w, c);
    if (w->depth >= GMP_JW_MAX_DEPTH) {
        w->err = E2BIG;
        return;
    }
    w->depth++;
    w->has_items &= ~(1ull << (w->depth - 1));
}

static void close_container(gmp_jw *w, char c)
{
    if (w->depth > 0)
        w->depth--;
    putc1(w, c);
}

void gmp_jw_next_line(gmp_jw *w)
{
    before_value(w);
    putc1(w, '\n');
    w->after_key = 1; /* the comma is written: the next value needs none */
}

void gmp_jw_space(gmp_jw *w, const char *ws)
{
    put(w, ws, strlen(ws));
}

void gmp_jw_obj_begin(gmp_jw *w) { open_container(w, '{'); }
void gmp_jw_obj_end(gmp_jw *w) { close_container(w, '}'); }
void gmp_jw_arr_begin(gmp_jw *w) { open_container(w, '['); }
void gmp_jw_arr_end(gmp_jw *w) { close_container(w, ']'); }

/* Length of a valid UTF-8 sequence at s (n bytes left), 0 when invalid
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min, cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        min = 0x80;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        min = 0x800;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        min = 0x10000;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

static void put_escaped(gmp_jw *w, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    putc1(w, '"');
    size_t run = 0; /* bytes that need no escaping, written in one go */
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : utf8_len(s + i, n - i);
        if (len && c >= 0x20 && c != '"' && c != '\\') {
            run += len;
            i += len;
            continue;
        }
        put(w, (const char *)s + i - run, run);
        run = 0;
        if (!len) {
            put(w, "\\ufffd", 6);
            i++;
            continue;
        }
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        switch (c) {
        case '"': esc[1] = '"'; put(w, esc, 2); break;
        case '\\': esc[1] = '\\'; put(w, esc, 2); break;
        case '\n': esc[1] = 'n'; put(w, esc, 2); break;
        case '\r': esc[1] = 'r'; put(w, esc, 2); break;
        case '\t': esc[1] = 't'; put(w, esc, 2); break;
        case '\b': esc[1] = 'b'; put(w, esc, 2); break;
        case '\f': esc[1] = 'f'; put(w, esc, 2); break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            put(w, esc, 6);
        }
        i++;
    }
    put(w, (const char *)s + n - run, run);
    putc1(w, '"');
}

/* key quoted, with its colon, into out: its length, or 0 when something
 * in it needs escaping or it does not fit. */
static size_t quoted_plain_key(const char *key, char *out, size_t cap)
{
    size_t n = 0;
    out[n++] = '"';
    for (const char *k = key; *k; k++) {
        unsigned char c = (unsigned char)*k;
        if (n > cap - 3 || c < 0x20 || c >= 0x80 || c == '"' || c == '\\')
            return 0;
        out[n++] = (char)c;
    }
    out[n++] = '"';
    out[n++] = ':';
    return n;
}

/* Keys are nearly always our own short names: quoted, with the colon, in
 * one piece when nothing in them needs escaping. */
void gmp_jw_key(gmp_jw *w, const char *key)
{
    before_value(w);
    char quoted[64];
    size_t n = quoted_plain_key(key, quoted, sizeof quoted);
    if (n) {
        put(w, quoted, n);
    } else {
        put_escaped(w, key, strlen(key));
        putc1(w, ':');
    }
    w->after_key = 1;
}

void gmp_jw_strn(gmp_jw *w, const char *s, size_t n)
{
    before_value(w);
    put_escaped(w, s, n);
}

void gmp_jw_str(gmp_jw *w, const char *s)
{
    if (!s) {
        gmp_jw_null(w);
        return;
    }
    gmp_jw_strn(w, s, strlen(s));
}

void gmp_jw_u64(gmp_jw *w, uint64_t v)
{
    char num[24];
    before_value(w);
    /* every digit, an integer whatever its size: malloc(SIZE_MAX) is a
     * classic request (gmp-inspect reads past INT64_MAX, load.c) */
    put(w, num, gmp_fmt_u64(v, num));
}

void gmp_jw_i64(gmp_jw *w, int64_t v)
{
    char num[24];
    before_value(w);
    put(w, num, gmp_fmt_i64(v, num));
}

void gmp_jw_hex(gmp_jw *w, uint64_t v)
{
    char num[24];
    before_value(w);
    putc1(w, '"');
    put(w, num, gmp_fmt_hex(v, num));
    putc1(w, '"');
}

void gmp_jw_bool(gmp_jw *w, int v)
{
    before_value(w);
    if (v)
        put(w, "true", 4);
    else
        put(w, "false", 5);
}

void gmp_jw_null(gmp_jw *w)
{
    before_value(w);
    put(w, "null", 4);
}

void gmp_jw_seconds(gmp_jw *w, uint64_t ns)
{
    char num[32];
    size_t n = gmp_fmt_u64(ns / 1000000000ull, num);
    uint64_t frac = ns % 1000000000ull;
    num[n++] = '.';
    for (int i = 8; i >= 0; i--) {
        num[n + (size_t)i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    n += 9;
    before_value(w);
    put(w, num, n);
}

void gmp_jw_raw(gmp_jw *w, const char *json, size_t n)
{
    before_value(w);
    put(w, json, n);
}

void gmp_jw_kstr(gmp_jw *w, const char *key, const char *s)
{
    gmp_jw_key(w, key);
    gmp_jw_str(w, s);
}

void gmp_jw_ku64(gmp_jw *w, const char *key, uint64_t v)
{
    gmp_jw_key(w, key);
    gmp_jw_u64(w, v);
}

void gmp_jw_ki64(gmp_jw *w, const char *key, int64_t v)
{
    gmp_jw_key(w, key);
    gmp_jw_i64(w, v);
}

int gmp_jw_finish(gmp_jw *w)
{
    if (w->fd >= 0)
        flush(w);
    else if (!w->err && w->len < w->cap)
        w->buf[w->len] = '\0';
    else if (!w->err)
        w->err = ENOSPC;
    if (w->depth != 0 && !w->err)
        w->err = EINVAL;
    return w->err ? -1 : 0;
}

/* ---- strict checker for JSON given to us (GMP_METADATA; gmp-inspect's lean reads) */

typedef struct checker {
    const unsigned char *s;
    size_t n, i;
    int depth, max_depth;
    unsigned long_numbers; /* with an exponent, or past 300 characters */
} checker;

static void skip_ws(checker *c)
{
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' ||
                           c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

static int is_hex(unsigned c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
           (c >= 'A' && c <= 'F');
}

/* At the 'u' of "\\uXXXX": the code unit, with i moved past it; -1 if bad. */
static long read_u_escape(checker *c)
{
    if (c->i + 4 >= c->n)
        return -1;
    long v = 0;
    for (size_t k = 1; k <= 4; k++) {
        unsigned h = c->s[c->i + k];
        if (!is_hex(h))
            return -1;
        v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    c->i += 5;
    return v;
}

static int check_string(checker *c)
{
    if (c->i >= c->n || c->s[c->i] != '"')
        return -1;
    c->i++;
    while (c->i < c->n) {
        unsigned ch = c->s[c->i];
        if (ch == '"') {
            c->i++;
            return 0;
        }
        if (ch < 0x20)
            return -1;
        if (ch == '\\') {
            if (++c->i >= c->n)
                return -1;
            ch = c->s[c->i];
            if (ch == 'u') {
                long cp = read_u_escape(c);
                if (cp < 0 || (cp >= 0xDC00 && cp <= 0xDFFF))
                    return -1;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    /* a high surrogate must be followed by a low one */
                    if (c->i + 1 >= c->n || c->s[c->i] != '\\' ||
                        c->s[c->i + 1] != 'u')
                        return -1;
                    c->i++;
                    long lo = read_u_escape(c);
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return -1;
                }
                continue;
            }
            if (!strchr("\"\\/bfnrt", (int)ch) || !ch)
                return -1;
            c->i++;
            continue;
        }
        if (ch < 0x80) { /* the common case, without a call */
            c->i++;
            continue;
        }
        size_t len = utf8_len(c->s + c->i, c->n - c->i);
        if (!len)
            return -1;
        c->i += len;
    }
    return -1;
}

static int digits(checker *c)
{
    size_t start = c->i;
    while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9')
        c->i++;
    return c->i > start ? 0 : -1;
}

static int check_number(checker *c)
{
    size_t start = c->i;
    if (c->i < c->n && c->s[c->i] == '-')
        c->i++;
    if (c->i < c->n && c->s[c->i] == '0')
        c->i++;
    else if (digits(c) < 0)
        return -1;
    if (c->i < c->n && c->s[c->i] == '.') {
        c->i++;
        if (digits(c) < 0)
            return -1;
    }
    if (c->i < c->n && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
        c->i++;
        if (c->i < c->n && (c->s[c->i] == '+' || c->s[c->i] == '-'))
            c->i++;
        if (digits(c) < 0)
            return -1;
        c->long_numbers++;
    } else if (c->i - start > 300) {
        c->long_numbers++;
    }
    return 0;
}

static int check_literal(checker *c, const char *lit)
{
    size_t len = strlen(lit);
    if (c->n - c->i < len || memcmp(c->s + c->i, lit, len) != 0)
        return -1;
    c->i += len;
    return 0;
}

static int check_value(checker *c);

static int check_container(checker *c, char close, int is_object)
{
    if (++c->depth > c->max_depth)
        return -1;
    c->i++;
    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == (unsigned char)close) {
        c->i++;
        c->depth--;
        return 0;
    }
    for (;;) {
        skip_ws(c);
        if (is_object) {
            if (check_string(c) < 0)
                return -1;
            skip_ws(c);
            if (c->i >= c->n || c->s[c->i] != ':')
                return -1;
            c->i++;
            skip_ws(c);
        }
        if (check_value(c) < 0)
            return -1;
        skip_ws(c);
        if (c->i >= c->n)
            return -1;
        if (c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if (c->s[c->i] != (unsigned char)close)
            return -1;
        c->i++;
        c->depth--;
        return 0;
    }
}

static int check_value(checker *c)
{
    if (c->i >= c->n)
        return -1;
    switch (c->s[c->i]) {
    case '{': return check_container(c, '}', 1);
    case '[': return check_container(c, ']', 0);
    case '"': return check_string(c);
    case 't': return check_literal(c, "true");
    case 'f': return check_literal(c, "false");
    case 'n': return check_literal(c, "null");
    default: return check_number(c);
    }
}

int gmp_json_check_object(const char *s, size_t n, int max_depth)
{
    checker c = {(const unsigned char *)s, n, 0, 0, max_depth, 0};
    skip_ws(&c);
    if (c.i >= c.n || c.s[c.i] != '{')
        return -1;
    if (check_value(&c) < 0)
        return -1;
    skip_ws(&c);
    return c.i == c.n ? 0 : -1;
}

size_t gmp_json_value_end(const char *s, size_t n, size_t at, int max_depth,
                          unsigned *long_numbers)
{
    checker c = {(const unsigned char *)s, n, at, 0, max_depth, 0};
    if (at >= n || check_value(&c) < 0)
        return 0;
    if (long_numbers)
        *long_numbers = c.long_numbers;
    return c.i;
}
