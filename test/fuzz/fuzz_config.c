/*
 * fuzz_config.c — libFuzzer harness for what the preload reads from its
 * environment: each input line "NAME=VALUE" becomes a variable (NAME when
 * it is one of ours, else one picked by its first byte), then
 * gmp_config_from_env parses them all; the whole input is also checked as
 * GMP_METADATA (gmp_json_check_object) and
 * classified as an exception message.  Bad values are one stderr line each,
 * never a crash, a hang or a leak.
 */
#include "fuzz_common.h"
#include "gpumemprof.h"
#include "jsonw.h"

#include <stdint.h>

static const char *const vars[] = {
    "GMP_ENABLED", "GMP_DUMP_DIR", "GMP_RUN_DIR", "GMP_BUFFER_SIZE", "GMP_MAX_DUMPS",
    "GMP_MAX_TOTAL_MB", "GMP_CONTEXT", "GMP_METADATA", "GMP_HOST_EVENT_MIN_BYTES",
    "GMP_OOM_CONFIRM_MS", "GMP_OOM_POLICY", "GMP_CUDA_MODE", "GMP_STACKS", "GMP_ON_CRASH",
    "GMP_WATCHDOG", "GMP_WATCHDOG_MIN_MB", "GMP_PRESSURE_PCT", "GMP_PROM_FILE",
    "GMP_PROM_INTERVAL_S", "GMP_LEAK_CHECK", "GMP_SAMPLE_MS", "GMP_NVML",
};
#define VARS (sizeof vars / sizeof *vars)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup("config");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    /* NUL bytes end a variable as they would in the environment */
    for (char *line = text, *next; line && line < text + size; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *eq = strchr(line, '=');
        if (!eq || !line[0])
            continue;
        *eq = '\0';
        /* one of ours, named or picked by the first byte: all unset below */
        const char *name = vars[(unsigned char)line[0] % VARS];
        for (size_t i = 0; i < VARS; i++)
            if (!strcmp(line, vars[i]))
                name = vars[i];
        setenv(name, eq + 1, 1);
    }
    gmp_config cfg;
    gmp_config_from_env(&cfg);
    for (size_t i = 0; i < VARS; i++)
        unsetenv(vars[i]);
    memcpy(text, data, size);
    text[size] = '\0';
    gmp_json_check_object(text, strlen(text), 32);
    gmp_config_defaults(&cfg);
    gmp_classify_exception(text, text, text);
    free(text);
    return 0;
}
