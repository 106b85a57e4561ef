/*
 * redact.c — credentials masked before anything of a process is written:
 * secret-looking option values in a command line (and the same options in
 * free text: an allow-listed variable's value, a context), a URL's
 * userinfo (scheme-less "user:pass@host" too), an HTTP header's value
 * (Authorization, Cookie, X-API-Key, X-Auth-Token), a bearer token, keys
 * whose shape gives them away (sk-..., hf_..., ghp_..., xoxb-..., AKIA...),
 * and which environment variable names hold secrets.  In place, with '*',
 * no allocation: the ring header, the bundle writer and the stderr scanner
 * all call it, the last on a path where malloc may just have failed.
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

/* An option's name (its dashes gone) that takes a secret: the variable
 * words, and the short spellings of a password (--pass, --pw, --passwd). */
static int option_is_secret(const char *name, size_t len)
{
    static const char *const short_names[] = {"pass", "pw", "pwd"};
    if (gmp_env_name_is_secret(name, len))
        return 1;
    for (size_t i = 0; i < sizeof short_names / sizeof *short_names; i++)
        if (len == strlen(short_names[i]) && gmp_find_ci(name, len, short_names[i]))
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

static void mask_words(char *s, size_t len);

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
    static const char *const headers[] = {"authorization:", "cookie:", "x-api-key:",
                                          "x-auth-token:", "api-key:"};
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
    mask_words(s, len);
}

/* Whether [w, w+n) looks like a key by its shape: a prefix a provider
 * gives its keys, then enough of the key's alphabet. */
static int key_shaped(const char *w, size_t n)
{
    static const struct {
        const char *prefix;
        size_t min;
    } shapes[] = {{"sk-", 20},  {"hf_", 30},   {"ghp_", 30}, {"gho_", 30},
                  {"ghs_", 30}, {"xoxb-", 20}, {"xoxp-", 20}, {"AKIA", 16}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        size_t p = strlen(shapes[i].prefix);
        if (n < p + shapes[i].min || memcmp(w, shapes[i].prefix, p))
            continue;
        size_t k = p;
        while (k < n && ((w[k] >= 'a' && w[k] <= 'z') || (w[k] >= 'A' && w[k] <= 'Z') ||
                         (w[k] >= '0' && w[k] <= '9') || w[k] == '-' || w[k] == '_'))
            k++;
        if (k == n)
            return 1;
    }
    return 0;
}

/* Word by word (spaces, quotes and line ends between): "Bearer X", an
 * option that takes a secret ("--token=X", "--password X"), a scheme-less
 * "user:pass@host", and key-shaped words. */
static void mask_words(char *s, size_t len)
{
    int next = 0; /* the word after "Bearer" or a secret option */
    for (size_t i = 0; i < len;) {
        while (i < len && ends_value(s[i])) /* NULs too: a command line's arguments */
            i++;
        if (i >= len)
            break;
        char *w = s + i;
        size_t n = 0;
        while (i + n < len && !ends_value(w[n]))
            n++;
        i += n;
        if (next) {
            mask(w, w + n);
            next = 0;
            continue;
        }
        if (n == 6 && gmp_find_ci(w, n, "bearer")) {
            next = 1;
            continue;
        }
        if (key_shaped(w, n)) {
            mask(w, w + n);
            continue;
        }
        char *eq = memchr(w, '=', n), *at = memchr(w, '@', n), *colon = memchr(w, ':', n);
        if (w[0] == '-') {
            const char *name = w;
            while (name < w + n && *name == '-')
                name++;
            size_t name_len = (size_t)((eq ? eq : w + n) - name);
            if (name_len && option_is_secret(name, name_len)) {
                if (eq)
                    mask(eq + 1, w + n);
                else
                    next = 1;
            }
            continue;
        }
        /* user:pass@host with no scheme (a URL's userinfo was masked above) */
        if (at && colon && colon < at && !memchr(w, '/', (size_t)(at - w)) &&
            (size_t)(at - colon) > 1)
            mask(colon + 1, at);
    }
}

/* mysql and mariadb take the password glued to -p ("-pSECRET"), and
 * sshpass takes it as -p SECRET or -pSECRET. */
static int takes_glued_password(const char *program)
{
    const char *base = strrchr(program, '/');
    base = base ? base + 1 : program;
    return !strncmp(base, "mysql", 5) || !strncmp(base, "mariadb", 7) ||
           !strcmp(base, "sshpass");
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
        int secret = name < arg + n && (arg[0] == '-' ? option_is_secret(name, name_len)
                                                      : gmp_env_name_is_secret(name, name_len));
        if (mask_next)
            memset(arg, '*', n);
        else if (secret && eq)
            memset(eq + 1, '*', (size_t)(arg + n - eq - 1));
        else if (glued && i && arg[0] == '-' && arg[1] == 'p' && n > 2)
            memset(arg + 2, '*', n - 2);
        /* sshpass -p SECRET: its next argument */
        int sshpass_p = glued && i && n == 2 && !strcmp(arg, "-p") && strstr(args, "sshpass");
        mask_next = (secret && !eq && arg[0] == '-') || sshpass_p;
        i += n + 1;
    }
    gmp_redact_text(args, len);
}
