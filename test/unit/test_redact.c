/*
 * test_redact.c — the credential masks (recorder/redact.c) every file a
 * process's strings go to passes through: a command line's options, the
 * words of free text (an allow-listed variable's value, GMP_CONTEXT and
 * GMP_METADATA, an OOM message), headers, bearer tokens, userinfo with or
 * without a scheme, key-shaped words; and what must stay (a port, a git
 * remote, an email, the words of an OOM message).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpumemprof.h"
#include "redact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* each of secrets gone from masked, each of kept still there */
static void expect_masked(const char *masked, const char *const *secrets,
                          const char *const *kept)
{
    for (; secrets && *secrets; secrets++)
        if (strstr(masked, *secrets))
            fail_msg("'%s' survived in: %s", *secrets, masked);
    for (; kept && *kept; kept++)
        if (!strstr(masked, *kept))
            fail_msg("'%s' was masked in: %s", *kept, masked);
}

static void expect_text(const char *text, const char *const *secrets, const char *const *kept)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", text);
    gmp_redact_text(buf, strlen(buf));
    expect_masked(buf, secrets, kept);
}

static void test_free_text(void **state)
{
    (void)state;
    const char *s1[] = {"hunter1", NULL}, *k1[] = {"Authorization: ", NULL};
    expect_text("Authorization: Bearer hunter1", s1, k1);
    const char *s2[] = {"hunter2", NULL}, *k2[] = {"Bearer ", "curl", NULL};
    expect_text("curl -H \"Bearer hunter2\" https://x", s2, k2);
    const char *s3[] = {"hunter3", "hunter4", NULL}, *k3[] = {"--token=", "--password ", NULL};
    expect_text("--token=hunter3 --password hunter4 --epochs 3", s3, k3);
    const char *s4[] = {"hunter5", "hunter6", NULL}, *k4[] = {"x-api-key: ", "X-Auth-Token: ", NULL};
    expect_text("x-api-key: hunter5\nX-Auth-Token: hunter6", s4, k4);
    const char *s5[] = {"hunter7", NULL}, *k5[] = {"admin:", "@db.example.com", NULL};
    expect_text("dsn admin:hunter7@db.example.com", s5, k5);
    const char *s6[] = {"abcdefghijklmnopqrstuvwx", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefgh", NULL};
    expect_text("key sk-abcdefghijklmnopqrstuvwx and hf_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefgh", s6,
                NULL);
    const char *s7[] = {"AKIAABCDEFGHIJKLMNOP", NULL};
    expect_text("AKIAABCDEFGHIJKLMNOP", s7, NULL);
    const char *s8[] = {"hunter8", NULL}, *k8[] = {"--pass=", "--pw ", "hunter9x", NULL};
    expect_text("--pass=hunter8 --pw hunter8 hunter9x", s8, k8);
    /* what stays */
    const char *k9[] = {"git@github.com:org/repo.git", "someone@example.com",
                        "CUDA out of memory. Tried to allocate 2.00 GiB", "sk-learn",
                        "localhost:8080", NULL};
    expect_text("git@github.com:org/repo.git someone@example.com CUDA out of memory. Tried to "
                "allocate 2.00 GiB sk-learn localhost:8080",
                NULL, k9);
}

/* args NUL-separated (a /proc cmdline): masked as a preload writes them */
static void expect_args(const char *const *argv, const char *const *secrets,
                        const char *const *kept)
{
    char buf[1024];
    size_t n = 0;
    for (const char *const *a = argv; *a; a++) {
        size_t l = strlen(*a) + 1;
        memcpy(buf + n, *a, l);
        n += l;
    }
    gmp_redact_args(buf, n);
    for (size_t i = 0; i + 1 < n; i++)
        if (!buf[i])
            buf[i] = ' ';
    expect_masked(buf, secrets, kept);
}

static void test_command_lines(void **state)
{
    (void)state;
    const char *a1[] = {"train", "--pass=hunter1", "--pw", "hunter2", "--lr", "0.1", NULL};
    const char *s1[] = {"hunter1", "hunter2", NULL}, *k1[] = {"--pass=", "--lr 0.1", NULL};
    expect_args(a1, s1, k1);
    const char *a2[] = {"/usr/bin/sshpass", "-p", "hunter3", "ssh", "host", NULL};
    const char *s2[] = {"hunter3", NULL}, *k2[] = {"ssh host", NULL};
    expect_args(a2, s2, k2);
    const char *a3[] = {"sshpass", "-phunter4", "ssh", NULL};
    const char *s3[] = {"hunter4", NULL};
    expect_args(a3, s3, NULL);
    const char *a4[] = {"mysql", "-uroot", "-phunter5", "-P", "3306", NULL};
    const char *s4[] = {"hunter5", NULL}, *k4[] = {"-uroot", "-P 3306", NULL};
    expect_args(a4, s4, k4);
    const char *a5[] = {"env", "API_TOKEN=hunter6", "python", "x.py", NULL};
    const char *s5[] = {"hunter6", NULL}, *k5[] = {"API_TOKEN=", "x.py", NULL};
    expect_args(a5, s5, k5);
    const char *a6[] = {"curl", "-H", "Authorization: Bearer hunter7", "https://u:hunter8@h/",
                        NULL};
    const char *s6[] = {"hunter7", "hunter8", NULL}, *k6[] = {"@h/", NULL};
    expect_args(a6, s6, k6);
}

/* GMP_CONTEXT and GMP_METADATA masked as read, so that metadata.json holds
 * what environment.json holds; metadata stays a JSON object */
static void test_context_and_metadata(void **state)
{
    (void)state;
    setenv("GMP_CONTEXT", "fetch https://u:hunter9@h.example/w --token=hunter10", 1);
    setenv("GMP_METADATA", "{\"url\":\"https://u:hunter11@h\",\"auth\":\"Bearer hunter12\"}", 1);
    gmp_config cfg;
    gmp_config_from_env(&cfg);
    unsetenv("GMP_CONTEXT");
    unsetenv("GMP_METADATA");
    if (strstr(cfg.context, "hunter") || strstr(cfg.metadata_json, "hunter"))
        fail_msg("a credential survived: %s / %s", cfg.context, cfg.metadata_json);
    assert_non_null(strstr(cfg.context, "@h.example/w"));
    assert_non_null(strstr(cfg.metadata_json, "\"auth\":\"Bearer "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_text),
        cmocka_unit_test(test_command_lines),
        cmocka_unit_test(test_context_and_metadata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
