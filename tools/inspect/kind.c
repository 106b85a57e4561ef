/*
 * kind.c — what kind of bundle this is, decided once for every verb: an
 * out-of-memory death (an allocation failed, a framework said so, or the
 * kernel's OOM killer is named), a crash after an unchecked failed
 * allocation, a kill or a crash nothing ties to memory, a memory-pressure
 * warning written before any failure, a failure the process survived
 * (its outcome: it went on and exited 0; no death), or a kill while its
 * cgroup's OOM killer killed some process (the kernel log naming none).
 * show's headline, triage's exit status and its formats, and metrics' OOM
 * count all read it from here, so they can never disagree.
 */
#include "inspect.h"

#include <string.h>

/* The exit status the bundle's outcome records, or -1 (it did not exit). */
static long long exit_status(json_t *outcome)
{
    const char *state = jstr(outcome, "state");
    json_t *status = json_object_get(outcome, "exit_status");
    return state && !strcmp(state, "exited") && json_is_integer(status)
               ? (long long)json_integer_value(status)
               : -1;
}

bundle_kind bundle_kind_of(const bundle *b)
{
    json_t *md = b->metadata;
    const char *reason = jstr(md, "reason") ? jstr(md, "reason") : jstr(b->manifest, "reason");
    const char *etype = jstr(md, "exception_type");
    int failed = json_is_object(json_object_get(md, "failed_request"));
    if ((reason && !strcmp(reason, "memory_pressure")) ||
        (etype && !strcmp(etype, "memory_pressure")))
        return KIND_PRESSURE;
    if (etype && !strcmp(etype, "oom_killer"))
        return KIND_OOM_KILLED;
    const char *evidence = jstr(md, "evidence");
    if (!failed && evidence && !strncmp(evidence, "cgroup_oom_kill:", 16))
        return KIND_CGROUP_OOM_KILL;
    if (reason && strstr(reason, " after failed allocation"))
        return KIND_CRASH_AFTER_FAILED;
    const char *confirmed = jstr(md, "confirmed_by");
    int by_signal = confirmed && !strcmp(confirmed, "signal");
    int died = (confirmed && !strcmp(confirmed, "recovered")) ||
               (reason && (!strcmp(reason, "killed") || !strncmp(reason, "SIG", 3)));
    if (died && !failed) /* GMP_ON_CRASH=always writes up any crash */
        return by_signal ? KIND_CRASH : KIND_KILLED_UNKNOWN;
    /* it went on: exited 0, or died later of what another bundle tells */
    json_t *outcome = json_object_get(md, "outcome");
    if (exit_status(outcome) == 0 || jstr(outcome, "death_bundle"))
        return KIND_SURVIVED;
    return KIND_OUT_OF_MEMORY;
}

const char *outcome_words(const bundle *b, char *out, size_t cap)
{
    json_t *outcome = json_object_get(b->metadata, "outcome");
    const char *state = jstr(outcome, "state");
    char raw[240];
    if (!state)
        return NULL;
    if (!strcmp(state, "exited")) {
        long long code = exit_status(outcome);
        if (code == 0 && bundle_kind_of(b) == KIND_PRESSURE)
            snprintf(raw, sizeof raw, "exited 0: no death followed the warning");
        else if (code == 0)
            snprintf(raw, sizeof raw, "exited 0: it went on after the failure, so this was no death");
        else
            snprintf(raw, sizeof raw, "exited %lld", code);
    } else if (!strcmp(state, "killed")) {
        const char *sig = jstr(outcome, "signal"), *death = jstr(outcome, "death_bundle");
        /* the bundle's strings: made inert below */
        if (death)
            snprintf(raw, sizeof raw, "killed by %.24s later; its death is written up in %.100s",
                     sig ? sig : "a signal", death);
        else
            snprintf(raw, sizeof raw, "killed by %.24s", sig ? sig : "a signal");
    } else if (!strcmp(state, "gone")) {
        snprintf(raw, sizeof raw, "ended without exiting; the signal was not seen");
    } else if (!strcmp(state, "running")) {
        snprintf(raw, sizeof raw, "still running when this was written; how it ended is not recorded");
    } else {
        return NULL;
    }
    clean_text(raw, out, cap);
    return out;
}

int kind_is_oom(bundle_kind k)
{
    /* a kill while its cgroup's OOM killer killed: the job died by the
     * cgroup's memory, whichever process the killer chose */
    return k == KIND_OUT_OF_MEMORY || k == KIND_CRASH_AFTER_FAILED || k == KIND_OOM_KILLED ||
           k == KIND_CGROUP_OOM_KILL;
}

const char *kind_label(bundle_kind k)
{
    switch (k) {
    case KIND_OUT_OF_MEMORY:
        return "out of memory";
    case KIND_CRASH_AFTER_FAILED:
        return "crash after a failed allocation";
    case KIND_OOM_KILLED:
        return "killed by the OOM killer";
    case KIND_KILLED_UNKNOWN:
        return "killed, cause unknown";
    case KIND_CRASH:
        return "crash, no allocation had failed";
    case KIND_PRESSURE:
        return "memory-pressure warning";
    case KIND_SURVIVED:
        return "survived a failed allocation";
    case KIND_CGROUP_OOM_KILL:
        return "killed while its cgroup's OOM killer ran";
    }
    return "?";
}
