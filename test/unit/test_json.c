/*
 * test_json.c — the allocation-free JSON writer and the GMP_METADATA
 * checker, against jansson as the referee: adversarial strings (every byte,
 * invalid UTF-8, overlong forms, surrogates, NUL) always produce JSON that
 * jansson parses, valid UTF-8 round-trips exactly, and the checker never
 * accepts a document that jansson refuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "jsonw.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Write {"k": <s>} into memory and parse it back with jansson. */
static json_t *round_trip(const char *s, size_t n)
{
    char buf[65536];
    gmp_jw w;
    gmp_jw_init(&w, -1, buf, sizeof buf);
    gmp_jw_obj_begin(&w);
    gmp_jw_key(&w, "k");
    gmp_jw_strn(&w, s, n);
    gmp_jw_obj_end(&w);
    assert_int_equal(gmp_jw_finish(&w), 0);
    json_error_t err;
    json_t *doc = json_loadb(buf, w.len, JSON_ALLOW_NUL, &err);
    if (!doc)
        fail_msg("jansson refused our output: %s in %.200s", err.text, buf);
    return doc;
}

/* Our own reading of UTF-8 validity, independent of the writer's. */
static int valid_utf8(const unsigned char *s, size_t n)
{
    json_t *j = json_stringn((const char *)s, n); /* NULL unless valid UTF-8 */
    int ok = j != NULL;
    json_decref(j);
    return ok;
}

static void check_string(const char *s, size_t n)
{
    json_t *doc = round_trip(s, n);
    json_t *v = json_object_get(doc, "k");
    assert_true(json_is_string(v));
    if (valid_utf8((const unsigned char *)s, n)) {
        assert_int_equal(json_string_length(v), n);
        assert_memory_equal(json_string_value(v), s, n);
    } else {
        /* invalid bytes become U+FFFD: never longer than 3x, never empty */
        assert_true(json_string_length(v) > 0);
        assert_true(json_string_length(v) <= 3 * n);
    }
    json_decref(doc);
}

static void test_every_single_byte(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        char s[3] = {'a', (char)c, 'z'};
        check_string(s, 3);
    }
}

static void test_adversarial_strings(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "plain", "", "quote\" backslash\\ slash/", "\b\f\n\r\t\x01\x1f\x7f",
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",    /* valid 2, 3, 4 bytes */
        "\xc0\xaf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf", /* overlong '/' */
        "\xed\xa0\x80", "\xed\xbf\xbf",                 /* UTF-16 surrogates */
        "\xf4\x90\x80\x80",                             /* past U+10FFFF */
        "\xc3", "\xe2\x82", "\xf0\x9f\x98",              /* cut short */
        "\x80\x80\xbf", "\xfe\xff", "\xc3\x28",
        "</script><!--", "\\u0000", "\"\"\"\"",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_string(cases[i], strlen(cases[i]));
    check_string("nul\0inside", 10);

    srand(12345);
    char s[512];
    for (int round = 0; round < 20000; round++) {
        size_t n = (size_t)(rand() % (int)sizeof s);
        for (size_t i = 0; i < n; i++)
            s[i] = (char)(rand() % 4 ? rand() % 256 : 0x80 + rand() % 64);
        check_string(s, n);
    }
}

/* Keys take a shortcut when nothing in them needs escaping: plain, long,
 * escaped and non-ASCII keys all come back as they went in. */
static void test_keys_round_trip(void **state)
{
    (void)state;
    char long_key[200];
    memset(long_key, 'x', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    const char *keys[] = {"seq", "", "a\"quote", "back\\slash", "tab\there", "caf\xc3\xa9",
                          long_key, "x123456789012345678901234567890123456789012345678901234567890"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char buf[4096];
        gmp_jw w;
        gmp_jw_init(&w, -1, buf, sizeof buf);
        gmp_jw_obj_begin(&w);
        gmp_jw_ku64(&w, keys[i], i + 1);
        gmp_jw_ku64(&w, "after", 7);
        gmp_jw_obj_end(&w);
        assert_int_equal(gmp_jw_finish(&w), 0);
        json_error_t err;
        json_t *doc = json_loadb(buf, w.len, 0, &err);
        if (!doc)
            fail_msg("jansson refused %.*s: %s", (int)w.len, buf, err.text);
        assert_int_equal(json_integer_value(json_object_get(doc, keys[i])), (json_int_t)(i + 1));
        assert_int_equal(json_integer_value(json_object_get(doc, "after")), 7);
        json_decref(doc);
    }
}

static void test_long_string_through_small_buffer(void **state)
{
    (void)state;
    /* a writer flushing through a file, 64-byte buffer, 1 MiB value */
    FILE *f = tmpfile();
    size_t n = 1 << 20;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)(i % 7 ? 'a' + i % 26 : '\n');
    char buf[64];
    gmp_jw w;
    gmp_jw_init(&w, fileno(f), buf, sizeof buf);
    gmp_jw_arr_begin(&w);
    gmp_jw_strn(&w, big, n);
    gmp_jw_u64(&w, UINT64_MAX);
    gmp_jw_i64(&w, INT64_MIN);
    gmp_jw_seconds(&w, 1795241673000000042ull);
    gmp_jw_hex(&w, 0xdeadbeefull);
    gmp_jw_bool(&w, 1);
    gmp_jw_null(&w);
    gmp_jw_arr_end(&w);
    assert_int_equal(gmp_jw_finish(&w), 0);
    rewind(f);
    json_error_t err;
    /* jansson holds integers as int64: the 64-bit maximum is a real to it */
    json_t *doc = json_loadf(f, JSON_DECODE_INT_AS_REAL, &err);
    assert_non_null(doc);
    assert_int_equal(json_string_length(json_array_get(doc, 0)), n);
    assert_memory_equal(json_string_value(json_array_get(doc, 0)), big, n);
    assert_true(json_is_real(json_array_get(doc, 2)));
    assert_true(json_real_value(json_array_get(doc, 2)) == (double)INT64_MIN);
    assert_true(json_is_real(json_array_get(doc, 3)));
    assert_string_equal(json_string_value(json_array_get(doc, 4)), "0xdeadbeef");
    assert_true(json_is_real(json_array_get(doc, 1)));
    json_decref(doc);
    /* the 64-bit maximum is written with all its digits, as an integer */
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    char *text = malloc((size_t)size + 1);
    rewind(f);
    assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
    text[size] = '\0';
    assert_non_null(strstr(text, "\",18446744073709551615,-9223372036854775808,"
                                 "1795241673.000000042,\"0xdeadbeef\",true,null]"));
    free(text);
    fclose(f);
    free(big);
}

static void test_memory_buffer_overflow_is_an_error(void **state)
{
    (void)state;
    char buf[16];
    gmp_jw w;
    gmp_jw_init(&w, -1, buf, sizeof buf);
    gmp_jw_str(&w, "this does not fit in sixteen bytes");
    assert_int_equal(gmp_jw_finish(&w), -1);
}

static void test_checker_accepts_objects_only(void **state)
{
    (void)state;
    static const char *const good[] = {
        "{}", " { } ", "{\"a\":1}", "{\"a\":[1,2.5e-3,-0,true,false,null,\"x\"]}",
        "{\"nested\":{\"b\":{\"c\":[{}]}}}", "{\"u\":\"\\u00e9\\ud83d\\ude00\"}",
        "{\"s\":\"caf\xc3\xa9\"}",
    };
    static const char *const bad[] = {
        "", "[]", "1", "\"s\"", "{", "}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}",
        "{a:1}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":tru}",
        "{\"a\":\"\\x\"}", "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00\"}",
        "{\"a\":\"raw\ncontrol\"}", "{\"a\":\"\xc3\x28\"}", "{} {}", "{\"a\":1}x",
        "{\"a\":\"\\u12\"}", "{\"a\":-}", "{\"a\":1e}",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        if (gmp_json_check_object(good[i], strlen(good[i]), 32) != 0)
            fail_msg("refused valid %s", good[i]);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (gmp_json_check_object(bad[i], strlen(bad[i]), 32) == 0)
            fail_msg("accepted invalid %s", bad[i]);
    }
    char deep[256];
    size_t n = 0;
    deep[n++] = '{';
    deep[n++] = '"';
    deep[n++] = 'a';
    deep[n++] = '"';
    deep[n++] = ':';
    for (int i = 0; i < 40; i++)
        deep[n++] = '[';
    for (int i = 0; i < 40; i++)
        deep[n++] = ']';
    deep[n++] = '}';
    assert_int_equal(gmp_json_check_object(deep, n, 32), -1);
    assert_int_equal(gmp_json_check_object(deep, n, 64), 0);
}

/* Mutate valid documents at random: whatever the checker accepts, jansson
 * must parse as an object (the bundle embeds it verbatim). */
static void test_checker_never_disagrees_with_jansson(void **state)
{
    (void)state;
    static const char seed[] =
        "{\"model\":\"resnet\",\"batch\":32,\"lr\":1e-3,\"tags\":[\"a\",\"\\u00e9\"],"
        "\"ok\":true,\"none\":null,\"nested\":{\"x\":[1,{\"y\":-2.5}]}}";
    static const char alphabet[] = "{}[]\":,\\u0123456789abcdefnulltruefalse.-+eE \t\n\x80\xc3\xa9";
    srand(99);
    char doc[sizeof seed + 8];
    int accepted = 0;
    for (int round = 0; round < 50000; round++) {
        memcpy(doc, seed, sizeof seed);
        size_t n = sizeof seed - 1;
        int edits = 1 + rand() % 3;
        for (int e = 0; e < edits; e++)
            doc[rand() % n] = alphabet[rand() % (sizeof alphabet - 1)];
        if (gmp_json_check_object(doc, n, 32) == 0) {
            accepted++;
            json_error_t err;
            json_t *j = json_loadb(doc, n, 0, &err);
            if (!j || !json_is_object(j))
                fail_msg("checker accepted what jansson refuses: %.*s (%s)", (int)n, doc,
                         err.text);
            json_decref(j);
        }
    }
    assert_true(accepted > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_single_byte),
        cmocka_unit_test(test_adversarial_strings),
        cmocka_unit_test(test_keys_round_trip),
        cmocka_unit_test(test_long_string_through_small_buffer),
        cmocka_unit_test(test_memory_buffer_overflow_is_an_error),
        cmocka_unit_test(test_checker_accepts_objects_only),
        cmocka_unit_test(test_checker_never_disagrees_with_jansson),
    };
    return cmocka_run_group_tests_name("json", tests, NULL, NULL);
}
