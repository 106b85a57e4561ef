/*
 * verdict.h — what a bundle records, decided in one place: an
 * out-of-memory death, a crash after an unchecked failed allocation, a
 * kill by the kernel's OOM killer, a kill while its cgroup's OOM killer
 * ran, a kill or a crash nothing ties to memory, a memory-pressure warning,
 * a failure the process survived.  The bundle writer decides it from what
 * it writes and puts it first in metadata.json ("kind"); the patcher
 * decides it again when the bundle learns how its process ended (a failure
 * followed by exit 0 was survived); every reader (gmp-inspect's verbs, the
 * Slurm plugin's step line) takes that field, and decides it from the
 * same facts, with the same function, for a bundle written before it had
 * one.  Pure functions, no allocation: they run in a signal handler.
 */
#ifndef GMP_VERDICT_H
#define GMP_VERDICT_H

#include "util.h"

#include <stddef.h>

/* The reason (and exception type) of the watchdog's memory-pressure
 * warning: the one bundle that tells no failure. */
#define GMP_REASON_PRESSURE "memory_pressure"

/* X(id, name in metadata.json, a death of memory, in words) */
#define GMP_FOR_EACH_VERDICT(X)                                                                    \
    X(OUT_OF_MEMORY, "out_of_memory", 1, "out of memory")                                         \
    X(CRASH_AFTER_FAILED, "crash_after_failed_allocation", 1, "crash after a failed allocation")  \
    X(OOM_KILLED, "oom_killed", 1, "killed by the OOM killer")                                    \
    X(KILLED_UNKNOWN, "killed_cause_unknown", 0, "killed, cause unknown")                         \
    X(CRASH, "crash_no_failed_allocation", 0, "crash, no allocation had failed")                  \
    X(PRESSURE, "memory_pressure", 0, "memory-pressure warning")                                  \
    X(SURVIVED, "survived", 0, "survived a failed allocation")                                    \
    X(CGROUP_OOM_KILL, "killed_while_cgroup_oom_killer_ran", 1,                                   \
      "killed while its cgroup's OOM killer ran")

typedef enum gmp_verdict {
#define AS_ENUM(id, name, death, words) GMP_VERDICT_##id,
    GMP_FOR_EACH_VERDICT(AS_ENUM)
#undef AS_ENUM
        GMP_VERDICT_COUNT
} gmp_verdict;

/* What the kind rests on, as metadata.json says it (NULL: absent). */
typedef struct gmp_verdict_facts {
    const char *reason;         /* "ENOMEM", "memory_pressure", "SIGSEGV after failed allocation" */
    const char *exception_type; /* "oom_killer", "memory_pressure" */
    const char *evidence;       /* "cgroup_oom_kill: ..." */
    const char *confirmed_by;   /* "signal", "recovered", "exit" */
    int failed_request;         /* a failed request is recorded */
    int exited;                 /* the process exited, with exit_status */
    int exit_status;
    int death_bundle;           /* its death is written up in another bundle */
    int caught;                 /* a worker loop caught the failure (caught_by) */
} gmp_verdict_facts;

GMP_HIDDEN gmp_verdict gmp_verdict_decide(const gmp_verdict_facts *f);
/* The name metadata.json holds ("out_of_memory"), and back (-1: none);
 * in words ("out of memory", "memory-pressure warning"). */
GMP_HIDDEN const char *gmp_verdict_name(gmp_verdict k);
GMP_HIDDEN const char *gmp_verdict_words(gmp_verdict k);
GMP_HIDDEN int gmp_verdict_parse(const char *name);
/* An out-of-memory death: an allocation failed and the process died of
 * it, a framework said so, or an OOM killer killed it. */
GMP_HIDDEN int gmp_verdict_is_death_of_memory(gmp_verdict k);

/* The facts, from metadata.json's text (the strings kept in s). */
typedef struct gmp_verdict_fact_text {
    char reason[128], exception_type[64], evidence[32], confirmed_by[32];
} gmp_verdict_fact_text;
GMP_HIDDEN void gmp_verdict_facts_from_text(const char *metadata, gmp_verdict_facts *f,
                                           gmp_verdict_fact_text *s);
/* The kind metadata.json's text names, else the one its facts decide. */
GMP_HIDDEN gmp_verdict gmp_verdict_of_text(const char *metadata);

#endif
