/*
 * kind.c — what kind of bundle this is, for every verb: an
 * out-of-memory death (an allocation failed, a framework said so, or the
 * kernel's OOM killer is named), a crash after an unchecked failed
 * allocation, a kill or a crash nothing ties to memory, a memory-pressure
 * warning written before any failure, a failure the process survived
 * (its outcome: it went on and exited 0; no death), or a kill while its
 * cgroup's OOM killer killed some process (the kernel log naming none).
 * The writer decides it (recorder/verdict.c) and writes it into
 * metadata.json as "kind"; a bundle written before that is decided here
 * from its facts by the same function.  show's headline, triage's exit
 * status and its formats, metrics' OOM count and the Slurm plugin's step
 * line all read it so, and can never disagree.
 */
#include "answer.h"

#include <string.h>

gmp_verdict bundle_kind_of(bundle *b)
{
    json_t *md = b->metadata;
    int named = gmp_verdict_parse(jstr(md, "kind"));
    if (named >= 0)
        return (gmp_verdict)named;
    /* written before bundles had a kind (or by the Python recorder, whose
     * reason is in the manifest): its facts, decided as the writer does */
    const bundle_outcome *outcome = bundle_outcome_of(b);
    long long status = outcome->has_exit_status ? outcome->exit_status : -1;
    gmp_verdict_facts facts = {
        .reason = jstr(md, "reason") ? jstr(md, "reason") : jstr(b->manifest, "reason"),
        .exception_type = jstr(md, "exception_type"),
        .evidence = jstr(md, "evidence"),
        .confirmed_by = jstr(md, "confirmed_by"),
        .failed_request = json_is_object(json_object_get(md, "failed_request")),
        .exited = status >= 0,
        .exit_status = (int)status,
        .death_bundle = outcome->death_bundle != NULL,
        .caught = json_is_string(json_object_get(md, "caught_by")),
    };
    return gmp_verdict_decide(&facts);
}

const char *outcome_words(bundle *b, char *out, size_t cap)
{
    const bundle_outcome *o = bundle_outcome_of(b);
    char raw[240];
    switch (o->end) {
    case BUNDLE_END_EXITED: {
        long long code = o->has_exit_status ? o->exit_status : -1;
        if (code == 0 && bundle_kind_of(b) == GMP_VERDICT_PRESSURE)
            snprintf(raw, sizeof raw, "exited 0: no death followed the warning");
        else if (code == 0)
            snprintf(raw, sizeof raw, "exited 0: it went on after the failure, so this was no death");
        else if (o->death_bundle) /* the bundle's string: made inert below */
            snprintf(raw, sizeof raw, "exited %lld later, of another failure written up in %.100s",
                     code, o->death_bundle);
        else
            snprintf(raw, sizeof raw, "exited %lld", code);
        break;
    }
    case BUNDLE_END_KILLED: {
        const char *sig = o->signal, *death = o->death_bundle;
        /* the bundle's strings: made inert below */
        if (death)
            snprintf(raw, sizeof raw, "killed by %.24s later; its death is written up in %.100s",
                     sig ? sig : "a signal", death);
        else
            snprintf(raw, sizeof raw, "killed by %.24s", sig ? sig : "a signal");
        break;
    }
    case BUNDLE_END_GONE:
        snprintf(raw, sizeof raw, "ended without exiting; the signal was not seen");
        break;
    case BUNDLE_END_RUNNING:
        snprintf(raw, sizeof raw, "still running when this was written; how it ended is not recorded");
        break;
    default:
        return NULL;
    }
    clean_text(raw, out, cap);
    return out;
}
