/*
 * verdict.c — a bundle's kind, decided from its facts (verdict.h).
 * The order matters: a memory-pressure warning is one whatever followed;
 * an OOM killer named beats everything after it; a kill while the cgroup's
 * OOM killer ran, with no failure of ours, is that; a crash after a failed
 * allocation says so in its reason; a kill or crash with no failure is no
 * death of memory (GMP_ON_CRASH=always writes up any crash); and a failure
 * the process went on from (exit 0, or a death another bundle tells) was
 * survived.  What is left is an out-of-memory death.
 */
#include "verdict.h"
#include "json_text.h"

#include <string.h>

static const struct {
    const char *name;
    int death;
    const char *words;
} kinds[] = {
#define AS_ROW(id, name, death, words) {name, death, words},
    GMP_FOR_EACH_VERDICT(AS_ROW)
#undef AS_ROW
};

static int is(const char *s, const char *want)
{
    return s && !strcmp(s, want);
}

gmp_verdict gmp_verdict_decide(const gmp_verdict_facts *f)
{
    if (is(f->reason, GMP_REASON_PRESSURE) || is(f->exception_type, GMP_REASON_PRESSURE))
        return GMP_VERDICT_PRESSURE;
    if (is(f->exception_type, "oom_killer"))
        return GMP_VERDICT_OOM_KILLED;
    if (!f->failed_request && f->evidence && !strncmp(f->evidence, "cgroup_oom_kill:", 16))
        return GMP_VERDICT_CGROUP_OOM_KILL;
    if (f->reason && strstr(f->reason, " after failed allocation"))
        return GMP_VERDICT_CRASH_AFTER_FAILED;
    int died = is(f->confirmed_by, "recovered") ||
               (f->reason && (is(f->reason, "killed") || !strncmp(f->reason, "SIG", 3)));
    if (died && !f->failed_request)
        return is(f->confirmed_by, "signal") ? GMP_VERDICT_CRASH : GMP_VERDICT_KILLED_UNKNOWN;
    if ((f->exited && f->exit_status == 0) || f->death_bundle || f->caught)
        return GMP_VERDICT_SURVIVED;
    return GMP_VERDICT_OUT_OF_MEMORY;
}

const char *gmp_verdict_name(gmp_verdict k)
{
    return k >= 0 && k < GMP_VERDICT_COUNT ? kinds[k].name : "?";
}

const char *gmp_verdict_words(gmp_verdict k)
{
    return k >= 0 && k < GMP_VERDICT_COUNT ? kinds[k].words : "?";
}

int gmp_verdict_parse(const char *name)
{
    for (int k = 0; name && k < GMP_VERDICT_COUNT; k++)
        if (!strcmp(name, kinds[k].name))
            return k;
    return -1;
}

int gmp_verdict_is_death_of_memory(gmp_verdict k)
{
    return k >= 0 && k < GMP_VERDICT_COUNT && kinds[k].death;
}

void gmp_verdict_facts_from_text(const char *metadata, gmp_verdict_facts *f,
                                gmp_verdict_fact_text *s)
{
    memset(f, 0, sizeof *f);
    if (gmp_json_string_value(metadata, "reason", s->reason, sizeof s->reason) == 0)
        f->reason = s->reason;
    if (gmp_json_string_value(metadata, "exception_type", s->exception_type,
                              sizeof s->exception_type) == 0)
        f->exception_type = s->exception_type;
    if (gmp_json_string_value(metadata, "evidence", s->evidence, sizeof s->evidence) == 0)
        f->evidence = s->evidence; /* its head is what counts */
    if (gmp_json_string_value(metadata, "confirmed_by", s->confirmed_by,
                              sizeof s->confirmed_by) == 0)
        f->confirmed_by = s->confirmed_by;
    f->failed_request = gmp_json_object_value(metadata, "failed_request") != NULL;
    const char *outcome = gmp_json_object_value(metadata, "outcome");
    char state[16], death[8];
    long long status;
    if (outcome && gmp_json_string_value(outcome, "state", state, sizeof state) == 0 &&
        !strcmp(state, "exited") && gmp_json_int_value(outcome, "exit_status", &status) == 0) {
        f->exited = 1;
        f->exit_status = (int)status;
    }
    f->death_bundle = outcome && gmp_json_string_value(outcome, "death_bundle", death,
                                                       sizeof death) == 0;
    char loop[8];
    f->caught = gmp_json_string_value(metadata, "caught_by", loop, sizeof loop) == 0;
}

gmp_verdict gmp_verdict_of_text(const char *metadata)
{
    char name[64];
    if (gmp_json_string_value(metadata, "kind", name, sizeof name) == 0) {
        int k = gmp_verdict_parse(name);
        if (k >= 0)
            return (gmp_verdict)k;
    }
    gmp_verdict_facts f;
    gmp_verdict_fact_text s;
    gmp_verdict_facts_from_text(metadata, &f, &s);
    return gmp_verdict_decide(&f);
}
