/*
 * word_pairs.h — a line's pairs of adjacent bytes, each hashed to one of
 * 512 bits: a word one of whose pairs has no bit set is not in the line.
 * The stderr scan asks a line that reads as an OOM message for a dozen
 * words or more (the frameworks that may have written it, the runtimes'
 * last words); a line holds few of them, and the pairs let it skip the
 * searches for the rest (a test suite printing its expected errors writes
 * such a line many thousand times).  A set bit proves nothing: a search
 * follows.
 */
#ifndef GMP_WORD_PAIRS_H
#define GMP_WORD_PAIRS_H

#include <stdint.h>
#include <string.h>

typedef struct gmp_word_pairs {
    uint64_t bits[8];
} gmp_word_pairs;

static inline void gmp_word_pairs_add(gmp_word_pairs *p, unsigned char a, unsigned char b)
{
    unsigned bit = ((unsigned)a * 31u + b) & 511u;
    p->bits[bit >> 6] |= 1ull << (bit & 63);
}

static inline int gmp_word_pairs_has(const gmp_word_pairs *p, unsigned char a, unsigned char b)
{
    unsigned bit = ((unsigned)a * 31u + b) & 511u;
    return (p->bits[bit >> 6] >> (bit & 63)) & 1;
}

/* The pairs of text, as it is. */
static inline void gmp_word_pairs_of(gmp_word_pairs *p, const char *text)
{
    memset(p, 0, sizeof *p);
    for (size_t i = 1; text[0] && text[i]; i++)
        gmp_word_pairs_add(p, (unsigned char)text[i - 1], (unsigned char)text[i]);
}

/* 0 when word is surely not in the text the pairs are of. */
static inline int gmp_word_pairs_may_hold(const gmp_word_pairs *p, const char *word)
{
    for (size_t i = 1; word[0] && word[i]; i++)
        if (!gmp_word_pairs_has(p, (unsigned char)word[i - 1], (unsigned char)word[i]))
            return 0;
    return 1;
}

#endif
