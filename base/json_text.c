/*
 * json_text.c — top-level values of JSON text our writer made, read in
 * place with no allocation (see json_text.h).
 */
#include "json_text.h"

#include <stdlib.h>
#include <string.h>

/* The end of the JSON value that starts at p, or NULL. */
static const char *skip_value(const char *p)
{
    int depth = 0;
    for (; *p; p++) {
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1])
                    p++;
            if (!*p)
                return NULL;
            if (!depth)
                return p + 1;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (--depth < 0)
                return p; /* a scalar that ended the object */
            if (!depth)
                return p + 1;
        } else if (*p == ',' && !depth) {
            return p;
        }
    }
    return NULL;
}

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

int gmp_json_value_span(const char *doc, const char *key, size_t *start, size_t *end)
{
    const char *p = skip_space(doc);
    if (*p++ != '{')
        return -1;
    size_t klen = strlen(key);
    for (;;) {
        p = skip_space(p);
        if (*p == ',')
            p = skip_space(p + 1);
        if (*p != '"')
            return -1;
        const char *k = p + 1, *kend = skip_value(p);
        if (!kend)
            return -1;
        p = skip_space(kend);
        if (*p++ != ':')
            return -1;
        p = skip_space(p);
        const char *vend = skip_value(p);
        if (!vend || vend == p)
            return -1;
        if ((size_t)(kend - 1 - k) == klen && !memcmp(k, key, klen)) {
            *start = (size_t)(p - doc);
            *end = (size_t)(vend - doc);
            return 0;
        }
        p = vend;
    }
}

int gmp_json_string_value(const char *doc, const char *key, char *out, size_t cap)
{
    size_t start, end, n = 0;
    if (cap)
        out[0] = '\0';
    if (!cap || gmp_json_value_span(doc, key, &start, &end) < 0 || doc[start] != '"')
        return -1;
    for (const char *p = doc + start + 1; p < doc + end - 1 && n + 1 < cap; p++) {
        char c = *p;
        if (c == '\\' && p + 1 < doc + end - 1) {
            c = *++p;
            if (c == 'n' || c == 't' || c == 'r' || c == 'b' || c == 'f' || c == 'u')
                c = '?'; /* a control character, or one we do not decode */
        }
        out[n++] = (unsigned char)c < 0x20 ? '?' : c;
    }
    out[n] = '\0';
    return 0;
}

int gmp_json_int_value(const char *doc, const char *key, long long *value)
{
    size_t start, end;
    if (gmp_json_value_span(doc, key, &start, &end) < 0)
        return -1;
    char *stop;
    long long v = strtoll(doc + start, &stop, 10);
    if (stop == doc + start || (*stop != ',' && *stop != '}' && *stop != ' ' && *stop != '\n'))
        return -1;
    *value = v;
    return 0;
}

const char *gmp_json_object_value(const char *doc, const char *key)
{
    size_t start, end;
    return gmp_json_value_span(doc, key, &start, &end) == 0 && doc[start] == '{' ? doc + start
                                                                                  : NULL;
}
