/*
 * clean.c — a bundle's strings made safe for a terminal or a CI log.  A
 * bundle's author (any job) chooses its strings: an escape sequence would
 * retitle or clear the reader's terminal, a newline would start a line of
 * its own ("::error ..." is a command to GitHub Actions).  Text output shows
 * every control character visibly instead: C0 and DEL as \n, \t, \r or
 * \xNN, the C1 controls (U+0080-U+009F) and the invisible format
 * characters that reorder or hide text (the bidi embeddings, overrides and
 * isolates, LRM/RLM/ALM, zero-width characters, U+2028 and U+2029, the
 * BOM: "Trojan Source") as \uNNNN, and bytes that are not UTF-8 as \xNN.  The bundle's documents are cleaned once, as they are
 * loaded, unless a verb prints JSON: print_json (verbs/output.c) is the one
 * encoder of a verb's JSON, and it escapes by JSON's rules, in ASCII.
 */
#include "read.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int inspect_raw_json;

/* Length of the valid UTF-8 sequence at s (of n bytes left), or 0. */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
                                 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || len > n || (len == 2 && s[0] < 0xc2))
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

unsigned invisible_format_char(const unsigned char *c, size_t len)
{
    unsigned cp = len == 2 ? (unsigned)(c[0] & 0x1f) << 6 | (c[1] & 0x3f)
                  : len == 3 ? (unsigned)(c[0] & 0x0f) << 12 | (unsigned)(c[1] & 0x3f) << 6 |
                                   (c[2] & 0x3f)
                             : 0;
    return cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
                   (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x2069) ||
                   cp == 0xfeff
               ? cp
               : 0;
}

size_t clean_text_n(const char *s, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (!cap)
        return 0;
    for (size_t i = 0; i < n;) {
        const unsigned char *c = (const unsigned char *)s + i;
        char esc[8];
        size_t elen = 0, len = utf8_length(c, n - i);
        if (len == 1 && (c[0] < 0x20 || c[0] == 0x7f)) {
            esc[0] = '\\';
            esc[1] = c[0] == '\n' ? 'n' : c[0] == '\t' ? 't' : c[0] == '\r' ? 'r' : 'x';
            elen = 2;
            if (esc[1] == 'x') {
                esc[2] = hex[c[0] >> 4];
                esc[3] = hex[c[0] & 15];
                elen = 4;
            }
        } else if (len == 2 && c[0] == 0xc2 && c[1] < 0xa0) { /* U+0080-U+009F */
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c[1] >> 4];
            esc[5] = hex[c[1] & 15];
            elen = 6;
        } else if (len > 1 && invisible_format_char(c, len)) {
            unsigned cp = invisible_format_char(c, len);
            memcpy(esc, "\\u", 2);
            for (int k = 0; k < 4; k++)
                esc[2 + k] = hex[(cp >> (12 - 4 * k)) & 15];
            elen = 6;
        } else if (!len) {
            esc[0] = '\\';
            esc[1] = 'x';
            esc[2] = hex[c[0] >> 4];
            esc[3] = hex[c[0] & 15];
            elen = 4;
            len = 1;
        }
        const char *piece = elen ? esc : (const char *)c;
        size_t plen = elen ? elen : len;
        if (o + plen >= cap)
            break; /* never half an escape or half a character */
        memcpy(out + o, piece, plen);
        o += plen;
        i += len;
    }
    out[o] = '\0';
    return o;
}

size_t clean_text(const char *s, char *out, size_t cap)
{
    return clean_text_n(s, strlen(s), out, cap);
}

void print_clean(FILE *f, const char *s, size_t max)
{
    char buf[4096];
    size_t n = strlen(s), take = n < max ? n : max;
    if (take > (sizeof buf - 1) / 6)
        take = (sizeof buf - 1) / 6; /* each byte may become six */
    clean_text_n(s, take, buf, sizeof buf);
    fputs(buf, f);
    if (take < n)
        fputs("...", f);
}

/* The cleaned copy of a string of n bytes (which may hold NULs), or NULL
 * when it needs none. */
static char *cleaned(const char *s, size_t n)
{
    int dirty = 0;
    for (size_t i = 0; i < n && !dirty; i++) {
        unsigned char c = (unsigned char)s[i];
        dirty = c < 0x20 || c == 0x7f || (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] < 0xa0) ||
                c == 0xd8 || c == 0xe2 || c == 0xef; /* leads of the format characters */
    }
    if (!dirty)
        return NULL;
    size_t cap = n * 6 + 1;
    char *out = malloc(cap);
    if (out)
        clean_text_n(s, n, out, cap);
    return out;
}

/* Whether any of the 8 bytes of w is a control character, past ASCII's
 * printable range, or a backslash: word-at-a-time tests (each exact as to
 * whether any byte matches, which is all that is asked). */
static int word_may_need_cleaning(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t del = w ^ (ones * 0x7f), backslash = w ^ (ones * '\\');
    uint64_t below_space = (w - ones * 0x20) & ~w, past_ascii = w;
    uint64_t is_del = (del - ones) & ~del, is_backslash = (backslash - ones) & ~backslash;
    return ((below_space | past_ascii | is_del | is_backslash) & highs) != 0;
}

int json_text_needs_cleaning(const char *text, size_t len)
{
    const char *end = text + len;
    for (const char *p = text; p < end; p++) {
        /* eight plain bytes at a time: a bundle's text is mostly plain */
        uint64_t w;
        while (end - p >= 8 && (memcpy(&w, p, 8), !word_may_need_cleaning(w)))
            p += 8;
        if (p == end)
            break;
        unsigned char c = (unsigned char)*p;
        if (c >= 0x7f || (c < 0x20 && c != '\n' && c != '\t' && c != '\r'))
            return 1; /* DEL is valid JSON as it is; the others, as text's own */
        if (*p == '\\') {
            if (p + 1 == end || !strchr("\"\\/", p[1]))
                return 1;
            p++;
        }
    }
    return 0;
}

void json_clean_strings(json_t *v)
{
    if (json_is_string(v) && !json_is_wide_size(v, NULL)) { /* the reader's own mark stays */
        char *c = cleaned(json_string_value(v), json_string_length(v));
        if (c)
            json_string_set(v, c);
        free(c);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item)
            json_clean_strings(item);
    } else if (json_is_object(v)) {
        const char *key;
        json_t *item;
        void *tmp;
        json_object_foreach_safe(v, tmp, key, item) {
            json_clean_strings(item);
            char *c = cleaned(key, strlen(key)), *old = c ? strdup(key) : NULL;
            if (c && old) { /* the key as it is cleaned; the first of a clash wins */
                if (!json_object_get(v, c))
                    json_object_set(v, c, item);
                json_object_del(v, old);
            }
            free(old);
            free(c);
        }
    }
}
