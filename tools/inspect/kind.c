/*
 * kind.c — what kind of bundle this is, decided once for every verb: an
 * out-of-memory death (an allocation failed, a framework said so, or the
 * kernel's OOM killer is named), a crash after an unchecked failed
 * allocation, a kill or a crash nothing ties to memory, or a memory-pressure
 * warning written before any failure.  show's headline, triage's exit status and
 * its formats, and metrics' OOM count all read it from here, so they can
 * never disagree.
 */
#include "inspect.h"

#include <string.h>

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
    if (reason && strstr(reason, " after failed allocation"))
        return KIND_CRASH_AFTER_FAILED;
    const char *confirmed = jstr(md, "confirmed_by");
    int by_signal = confirmed && !strcmp(confirmed, "signal");
    int died = (confirmed && !strcmp(confirmed, "recovered")) ||
               (reason && (!strcmp(reason, "killed") || !strncmp(reason, "SIG", 3)));
    if (died && !failed) /* GMP_ON_CRASH=always writes up any crash */
        return by_signal ? KIND_CRASH : KIND_KILLED_UNKNOWN;
    return KIND_OUT_OF_MEMORY;
}

int kind_is_oom(bundle_kind k)
{
    return k == KIND_OUT_OF_MEMORY || k == KIND_CRASH_AFTER_FAILED || k == KIND_OOM_KILLED;
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
    }
    return "?";
}
