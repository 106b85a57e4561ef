/*
 * wide_sizes.c — sizes past what jansson holds.  Our writer's sizes go to
 * 2^64-1 (a failed malloc(-4) asks for 2^64-4); jansson's integers stop at
 * 2^63-1.  As a file is read, each integer in (2^63-1, 2^64-1] becomes a
 * string no bundle can hold: a marker with this process's random nonce, then
 * the digits.  ju64 reads it back exactly, and every JSON the tools write
 * goes through json_text_exact, which turns it back into the same integer.
 * Other integers past int64 (below -2^63, or past 2^64-1: no size of ours)
 * become reals, ".0" after them, so that jansson reads the file at all.
 */
#include "read.h"

#include <ctype.h>
#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define NONCE_HEX 16

/* The marker as the string holds it ("\x01gmp-u64-<nonce>:") and as JSON
 * text spells it ("\\u0001gmp-u64-<nonce>:"). */
static char raw_marker[32], text_marker[40];

static void make_markers(void)
{
    if (raw_marker[0])
        return;
    unsigned long long nonce = 0;
    if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != (ssize_t)sizeof nonce)
        nonce = (unsigned long long)time(NULL) * 2654435761u ^ (unsigned long long)getpid() << 32 ^
                (unsigned long long)(uintptr_t)&nonce;
    snprintf(raw_marker, sizeof raw_marker, "\001gmp-u64-%0*llx:", NONCE_HEX, nonce);
    snprintf(text_marker, sizeof text_marker, "\\u0001gmp-u64-%0*llx:", NONCE_HEX, nonce);
}

void json_wide_markers_ready(void)
{
    make_markers();
}

/* Where a number token that starts at text[i] ends, when it is an integer
 * past what jansson holds (int64: 2^63-1, or -2^63); 0 otherwise. */
static size_t wide_integer_end(const char *text, size_t len, size_t i)
{
    int negative = text[i] == '-';
    size_t d = i + negative, end = d;
    while (end < len && text[end] >= '0' && text[end] <= '9')
        end++;
    size_t digits = end - d;
    if (!digits || (end < len && (text[end] == '.' || text[end] == 'e' || text[end] == 'E')))
        return 0;
    const char *limit = negative ? "9223372036854775808" : "9223372036854775807";
    return digits > 19 || (digits == 19 && memcmp(text + d, limit, 19) > 0) ? end : 0;
}

/* n digits at d, no sign, with no leading zero: at most 2^64-1? */
static int fits_u64(const char *d, size_t n)
{
    return n < 20 || (n == 20 && memcmp(d, "18446744073709551615", 20) <= 0);
}

size_t json_widened_integer_end(const char *text, size_t len, size_t i)
{
    size_t digits = i + (text[i] == '-'), end = digits;
    while (end < len && text[end] >= '0' && text[end] <= '9')
        end++;
    if (end + 2 > len || text[end] != '.' || text[end + 1] != '0' ||
        (end + 2 < len && strchr("0123456789eE", text[end + 2])))
        return 0;
    const char *limit = text[i] == '-' ? "9223372036854775808" : "9223372036854775807";
    size_t n = end - digits;
    return n > 19 || (n == 19 && memcmp(text + digits, limit, 19) > 0) ? end : 0;
}

size_t json_wide_size_end(const char *text, size_t len, size_t i, size_t *digits_at)
{
    make_markers();
    size_t m = strlen(text_marker);
    if (text[i] != '"' || len - i < m + 3 || memcmp(text + i + 1, text_marker, m))
        return 0;
    size_t d = i + 1 + m, end = d;
    while (end < len && text[end] >= '0' && text[end] <= '9')
        end++;
    if (end == d || end >= len || text[end] != '"')
        return 0;
    *digits_at = d;
    return end + 1;
}

/* text with each wide integer as a marked string or a real, into out; with
 * out NULL, only how long that would be. */
static size_t widen(const char *text, size_t n, char *out)
{
    size_t o = 0, m = strlen(text_marker);
    int in_string = 0;
#define PUT(s, k)                                                                                  \
    do {                                                                                           \
        if (out)                                                                                   \
            memcpy(out + o, (s), (k));                                                             \
        o += (k);                                                                                  \
    } while (0)
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        size_t end = 0;
        if (in_string) {
            if (c == '\\' && i + 1 < n)
                end = i + 2; /* the escaped character with it */
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if ((c == '-' || (c >= '0' && c <= '9')) &&
                   (i == 0 || strchr(" \t\r\n:,[", text[i - 1]))) {
            end = wide_integer_end(text, n, i);
        }
        size_t take = end ? end - i : 1;
        if (end && !in_string && c != '-' && c != '0' && fits_u64(text + i, take)) {
            PUT("\"", 1);
            PUT(text_marker, m);
            PUT(text + i, take);
            PUT("\"", 1);
        } else {
            PUT(text + i, take);
            if (end && !in_string)
                PUT(".0", 2);
        }
        i += take - 1;
    }
#undef PUT
    return o;
}

/* Whether text may hold an integer past jansson's: a run of more than 19
 * digits, or of 19 above 2^63-1.  Most documents have none, and are left
 * as they are after this one quick look; a manifest's nanosecond times
 * (19 digits, below 2^63) are not made to go through widen's two passes.
 * Any 19 bytes in a row hold one of every 19th, so only those are looked
 * at, and the run of digits around one that is a digit. */
static int may_hold_wide(const char *text, size_t len)
{
    for (size_t i = 18; i < len; i += 19) {
        if (!isdigit((unsigned char)text[i]))
            continue;
        size_t start = i, end = i + 1;
        while (start > 0 && isdigit((unsigned char)text[start - 1]))
            start--;
        while (end < len && isdigit((unsigned char)text[end]))
            end++;
        size_t run = end - start;
        if (run > 19 || (run == 19 && memcmp(text + start, "9223372036854775807", 19) > 0))
            return 1;
        while (i + 19 < end) /* on from the first one past this run */
            i += 19;
    }
    return 0;
}

char *json_text_widen_integers(char *text, size_t *len)
{
    make_markers();
    if (!may_hold_wide(text, *len))
        return text;
    size_t wide_len = widen(text, *len, NULL);
    if (wide_len == *len)
        return text;
    char *wide = malloc(wide_len + 1);
    if (!wide)
        return text; /* jansson then says "too big integer" */
    widen(text, *len, wide);
    wide[wide_len] = '\0';
    free(text);
    *len = wide_len;
    return wide;
}

json_t *json_u64(uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX)
        return json_integer((json_int_t)v);
    make_markers();
    char s[64];
    snprintf(s, sizeof s, "%s%llu", raw_marker, (unsigned long long)v);
    return json_string(s);
}

int json_is_wide_size(json_t *v, uint64_t *out)
{
    make_markers();
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    size_t m = strlen(raw_marker);
    if (!s || strncmp(s, raw_marker, m))
        return 0;
    s += m;
    size_t n = strspn(s, "0123456789");
    if (!n || s[n] || !fits_u64(s, n))
        return 0;
    if (out)
        *out = strtoull(s, NULL, 10);
    return 1;
}

int ju64(json_t *obj, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_wide_size(v, out))
        return 0;
    if (json_is_real(v) && json_real_value(v) >= 0) { /* past 2^64-1: the most there is */
        double d = json_real_value(v);
        *out = d >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)d;
        return 0;
    }
    return -1;
}

char *json_text_exact(json_t *v, size_t flags)
{
    char *dumped = json_dumps(v, flags);
    char *t = dumped ? strdup(dumped) : NULL; /* the caller's to free() */
    json_arena_free_text(dumped);
    if (!t)
        return NULL;
    make_markers();
    size_t len = strlen(t), o = 0, digits;
    for (size_t i = 0; i < len; i++) {
        size_t end = t[i] == '"' ? json_wide_size_end(t, len, i, &digits) : 0;
        if (end) { /* the digits without the quotes and the marker */
            memmove(t + o, t + digits, end - 1 - digits);
            o += end - 1 - digits;
            i = end - 1;
        } else if (t[i] == '"') { /* any other string, copied whole */
            size_t j = i + 1;
            while (j < len && t[j] != '"')
                j += t[j] == '\\' ? 2 : 1;
            size_t take = (j < len ? j + 1 : len) - i;
            memmove(t + o, t + i, take);
            o += take;
            i += take - 1;
        } else {
            t[o++] = t[i];
        }
    }
    t[o] = '\0';
    return t;
}

int json_dumpf_exact(json_t *v, FILE *f, size_t flags)
{
    char *t = json_text_exact(v, flags);
    if (!t)
        return -1;
    int bad = fputs(t, f) == EOF;
    free(t);
    return bad ? -1 : 0;
}

int jreal(json_t *obj, const char *key, double *out)
{
    json_t *v = json_object_get(obj, key);
    uint64_t wide;
    if (json_is_wide_size(v, &wide))
        *out = (double)wide;
    else if (json_is_number(v))
        *out = json_number_value(v);
    else
        return -1;
    return isfinite(*out) ? 0 : -1;
}
