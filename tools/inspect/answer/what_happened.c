/*
 * what_happened.c — a bundle's headline: what happened, in one sentence,
 * one per kind of bundle (verdict.h), for show's first line and its JSON.
 */
#include "answer.h"

#include <string.h>

/* The headline, one per kind of bundle.  A death written up after
 * the fact (gmp-run, recover) is an out-of-memory death only with
 * evidence: the kernel's OOM killer named, or an allocation that failed
 * before the signal. */
void what_happened(FILE *f, bundle *b, const char *reason, const char *backend)
{
    json_t *md = b->metadata;
    const char *memory = backend && strcmp(backend, "cpu") ? backend : "host";
    const char *sig = reason && !strncmp(reason, "SIG", 3) ? reason : NULL;
    char signame[24] = "";
    if (sig) /* "SIGSEGV after failed allocation": the signal alone */
        snprintf(signame, sizeof signame, "%.*s", (int)strcspn(sig, " "), sig);
    const runtime_words *words = runtime_words_of(b);
    switch (bundle_kind_of(b)) {
    case GMP_VERDICT_PRESSURE:
        fprintf(f, "memory came close to a limit; a warning, written before anything failed");
        return;
    case GMP_VERDICT_OOM_KILLED:
        fprintf(f, "the process was killed by the kernel's OOM killer (");
        print_clean(f, sig ? signame : "SIGKILL", 20);
        fprintf(f, ")");
        return;
    case GMP_VERDICT_KILLED_UNKNOWN: {
        const char *evidence = jstr(md, "evidence");
        const char *other = evidence && !strncmp(evidence, "kernel_log:", 11)
                                ? strstr(evidence, " victim since it started, pid ")
                                : NULL;
        if (other) { /* "pid 773, not this one" */
            other += strlen(" victim since it started, pid ");
            fprintf(f, "the process was %s", sig ? "killed by " : "ended by a signal nobody saw");
            print_clean(f, sig ? signame : "", 20);
            fprintf(f, "; not by the OOM killer: the kernel log names its victim, pid %.*s, and not "
                   "this process",
                   (int)strspn(other, "0123456789"), other);
        } else if (sig) {
            fprintf(f, "the process was killed by ");
            print_clean(f, signame, 20);
            fprintf(f, ", cause unknown (no sign that it was out of memory)");
        } else {
            fprintf(f, "the process died without exiting, cause unknown (no sign that it was out "
                   "of memory)");
        }
        return;
    }
    case GMP_VERDICT_CRASH_AFTER_FAILED:
        if (words && sig && !strcmp(signame, "SIGABRT")) { /* the runtime's own abort */
            fprintf(f, "%s ended the program (SIGABRT): %s", words->runtime, words->what);
            return;
        }
        if (words && words->own_heap) { /* a page of a full /dev/shm (SIGBUS) */
            fprintf(f, "%s ran out of memory: %s", words->runtime, words->what);
            return;
        }
        fprintf(f, "the process crashed (");
        print_clean(f, sig ? signame : "a signal", 20);
        fprintf(f, ") after an allocation of ");
        print_clean(f, memory, 20);
        fprintf(f, " memory failed");
        return;
    case GMP_VERDICT_CRASH:
        fprintf(f, "the process crashed (");
        print_clean(f, sig ? signame : "a signal", 20);
        fprintf(f, "); no allocation had failed, so memory is not the known cause");
        return;
    case GMP_VERDICT_CGROUP_OOM_KILL:
        fprintf(f, "the process was killed (");
        print_clean(f, sig ? signame : "SIGKILL", 20);
        fprintf(f, ") while its cgroup's OOM killer ran: it killed a process while this one ran, "
               "and nothing here says which");
        return;
    case GMP_VERDICT_SURVIVED: {
        char later[200];
        const char *loop = jstr(md, "caught_by");
        fprintf(f, "the process survived: an allocation of ");
        print_clean(f, memory, 20);
        fprintf(f, " memory failed (");
        print_clean(f, reason ? reason : "unknown reason", 200);
        if (loop) { /* a pool's worker: the process that waits for it raises the error */
            const bundle_outcome *o = bundle_outcome_of(b);
            fprintf(f, ") in a task of %s, whose worker loop caught the error and handed it to "
                       "the process that waits for the task's result (that process's bundle "
                       "tells what followed); this one went on",
                    worker_loop_owner(loop));
            if (o->end == BUNDLE_END_EXITED && o->has_exit_status)
                fprintf(f, " and exited %lld", o->exit_status);
            else if (o->end == BUNDLE_END_KILLED) { /* its pool's teardown, as a rule */
                fprintf(f, " until it was killed by ");
                print_clean(f, o->signal ? o->signal : "a signal", 24);
            }
        } else if (bundle_outcome_of(b)->death_bundle)
            fprintf(f, "), and it went on; %s", outcome_words(b, later, sizeof later));
        else
            fprintf(f, "), and it went on and exited 0; no death");
        return;
    }
    case GMP_VERDICT_OUT_OF_MEMORY:
    case GMP_VERDICT_COUNT: /* not a kind */
        break;
    }
    const char *confirmed = jstr(md, "confirmed_by");
    if (confirmed && !strcmp(confirmed, "recovered")) {
        fputs(sig ? "the process was killed by " : "the process died", f);
        print_clean(f, sig ? signame : "", 20);
        fprintf(f, " after an allocation of ");
        print_clean(f, memory, 20);
        fprintf(f, " memory failed");
        return;
    }
    if (words) {
        fprintf(f, "%s ran out of memory: %s", words->runtime, words->what);
        return;
    }
    fprintf(f, "the process ran out of ");
    print_clean(f, memory, 20);
    fprintf(f, " memory (");
    print_clean(f, reason ? reason : "unknown reason", 200);
    fprintf(f, ")");
}
