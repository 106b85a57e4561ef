/*
 * lean_text.c — a document read without the members its reader never asks
 * for.  triage reads every bundle of a cluster's week, and jansson's parse
 * is most of what a bundle costs it; metadata.json's host_state and
 * device_state (half of its text) are what triage never reads.  So those
 * members are cut from the text before the parse, but only where the whole
 * document is one JSON object by the writer's own strict grammar
 * (gmp_json_value_end), so that what is left parses to exactly the other
 * members; on any doubt the text stays whole and jansson judges it, as it
 * judges every other document.  A reader that asks for a cut member later
 * gets it then (bundle_metadata_whole).
 */
#include "read.h"
#include "jsonw.h"

#include <string.h>

#define MAX_CUTS 8
#define MAX_DEPTH 2048 /* jansson's own bound: deeper is its to refuse */

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_space(const char *s, size_t n, size_t i)
{
    while (i < n && is_space(s[i]))
        i++;
    return i;
}

/* Whether the key token s[0..n) (quotes included) spells one of names,
 * with no escape in it. */
static int named(const char *s, size_t n, const char *const *names)
{
    for (; *names; names++) {
        size_t len = strlen(*names);
        if (n == len + 2 && !memcmp(s + 1, *names, len))
            return 1;
    }
    return 0;
}

size_t json_text_drop_members(char *text, size_t len, const char *const *names)
{
    size_t cut[MAX_CUTS][2], cuts = 0;
    size_t i = skip_space(text, len, 0);
    if (i >= len || text[i] != '{')
        return len;
    i = skip_space(text, len, i + 1);
    if (i < len && text[i] == '}')
        return len;
    for (;;) { /* each member: "key" : value, then , or } */
        size_t key = i, key_end = i < len && text[i] == '"'
                                      ? gmp_json_value_end(text, len, i, MAX_DEPTH, NULL)
                                      : 0;
        if (!key_end)
            return len;
        i = skip_space(text, len, key_end);
        if (i >= len || text[i] != ':')
            return len;
        /* a value with a number jansson may refuse as past a double's
         * range (it calls that an overflow) stays for it to judge: a
         * document triage reads is one every verb reads */
        unsigned long_numbers = 0;
        size_t value = skip_space(text, len, i + 1);
        size_t value_end = gmp_json_value_end(text, len, value, MAX_DEPTH, &long_numbers);
        if (!value_end)
            return len;
        if (named(text + key, key_end - key, names) && !long_numbers) {
            if (cuts == MAX_CUTS)
                return len;
            cut[cuts][0] = key;
            cut[cuts][1] = value_end;
            cuts++;
        }
        i = skip_space(text, len, value_end);
        if (i < len && text[i] == ',') {
            i = skip_space(text, len, i + 1);
            continue;
        }
        if (i >= len || text[i] != '}')
            return len;
        if (skip_space(text, len, i + 1) != len)
            return len; /* something after the object: jansson's to name */
        break;
    }
    /* the last cut first, so the earlier ones' places hold; each with the
     * comma after it, or, the object's last member, the comma before it */
    for (size_t k = cuts; k-- > 0;) {
        size_t from = cut[k][0], to = cut[k][1];
        size_t after = skip_space(text, len, to);
        if (text[after] == ',') {
            to = after + 1;
        } else {
            size_t before = from;
            while (before > 0 && is_space(text[before - 1]))
                before--;
            if (before > 0 && text[before - 1] == ',')
                from = before - 1;
        }
        memmove(text + from, text + to, len - to);
        len -= to - from;
        text[len] = '\0';
    }
    return len;
}
