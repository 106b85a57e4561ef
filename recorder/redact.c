/*
 * redact.c — credentials masked before anything of a process is written:
 * secret-looking option values in a command line, a URL's userinfo and an
 * HTTP header's value in free text, and which environment variable names
 * hold secrets.  In place, with '*', no allocation: the ring header, the
 * bundle writer and the stderr scanner all call it, the last on a path
 * where malloc may just have failed.
 */
#include "redact.h"
#include "util.h"

#include <string.h>

static const char *const secret_words[] = {"TOKEN", "SECRET", "KEY", "PASSWORD",
                                           "PASSWD", "PASSPHRASE", "CREDENTIAL", "AUTH"};

int gmp_env_name_is_secret(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof secret_words / sizeof *secret_words; i++)
        if (gmp_find_ci(name, len, secret_words[i]))
            return 1;
    return 0;
}

/* Masks [from, to) with '*'. */
static void mask(char *from, const char *to)
{
    if (to > from)
        memset(from, '*', (size_t)(to - from));
}

static int ends_value(char c)
{
    return c == '\0' || c == '\n' || c == ' ' || c == '\t' || c == '"' || c == '\'';
}

void gmp_redact_text(char *s, size_t len)
{
    /* scheme://user:password@host: the userinfo goes, whatever the scheme */
    for (size_t i = 0; i + 3 <= len; i++) {
        if (memcmp(s + i, "://", 3) != 0)
            continue;
        char *start = s + i + 3, *end = start, *at = NULL;
        while (end < s + len && !ends_value(*end) && *end != '/' && *end != '?' && *end != '#') {
            if (*end == '@')
                at = end;
            end++;
        }
        if (at)
            mask(start, at);
        i = (size_t)(end - s);
    }
    /* an HTTP header's credentials: "Authorization: Bearer X" (curl -H) */
    static const char *const headers[] = {"authorization:", "cookie:"};
    for (size_t h = 0; h < sizeof headers / sizeof *headers; h++)
        for (char *p = s;;) {
            const char *at = gmp_find_ci(p, len - (size_t)(p - s), headers[h]);
            if (!at)
                break;
            p = s + (at - s) + strlen(headers[h]);
            while (p < s + len && *p == ' ')
                p++;
            char *end = p;
            while (end < s + len && *end != '\0' && *end != '\n' && *end != '"')
                end++;
            mask(p, end);
            p = end;
        }
}

/* mysql and mariadb take the password glued to -p: "-pSECRET". */
static int takes_glued_password(const char *program)
{
    const char *base = strrchr(program, '/');
    base = base ? base + 1 : program;
    return !strncmp(base, "mysql", 5) || !strncmp(base, "mariadb", 7);
}

/* "--api-token=abc" and "--api-token abc": the value masked in place. */
void gmp_redact_args(char *args, size_t len)
{
    int mask_next = 0, glued = len && takes_glued_password(args);
    for (size_t i = 0; i < len;) {
        char *arg = args + i;
        size_t n = strnlen(arg, len - i);
        char *eq = memchr(arg, '=', n);
        const char *name = arg;
        while (*name == '-')
            name++;
        size_t name_len = (size_t)((eq ? eq : arg + n) - name);
        int secret = name < arg + n && gmp_env_name_is_secret(name, name_len);
        if (mask_next)
            memset(arg, '*', n);
        else if (secret && eq)
            memset(eq + 1, '*', (size_t)(arg + n - eq - 1));
        else if (glued && i && arg[0] == '-' && arg[1] == 'p' && n > 2)
            memset(arg + 2, '*', n - 2);
        mask_next = secret && !eq && arg[0] == '-';
        i += n + 1;
    }
    gmp_redact_text(args, len);
}
