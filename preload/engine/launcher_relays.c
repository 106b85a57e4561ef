/*
 * launcher_relays.c — a launcher's lines that are its ranks' words, for
 * oom_messages.c: a child's traceback a launcher relays in its own
 * exception, and the prefix a rank or torchrun's agent writes before each
 * line.  The child's death is told by the child's own bundle, so none of
 * these lines is read as this process's out-of-memory words, and a rank's
 * own prefixed lines are read as it wrote them.  Called under
 * oom_messages.c's lock: one line at a time, in order.
 */
#include "preload.h"

#include <string.h>

/* The line past the prefix a rank writes before each line of an uncaught
 * error once torch.distributed knows its rank ("[rank3]: "): behind it a
 * traceback is a traceback, and an exception's line names its exception.
 * NULL for a line torchrun's agent relays from a rank's log ("[default3]:",
 * the role's name and the local rank, with --tee or --redirects): the
 * rank wrote those words, and its own bundle tells them. */
const char *gmp_line_past_rank_prefix(const char *line)
{
    if (line[0] != '[')
        return line;
    const char *p = line + 1;
    p += strspn(p, "abcdefghijklmnopqrstuvwxyz_");
    size_t digits = strspn(p, "0123456789");
    if (p == line + 1 || !digits || p[digits] != ']' || p[digits + 1] != ':')
        return line;
    if (p - line != 5 || strncmp(line + 1, "rank", 4))
        return NULL; /* the agent's, from the log of its local rank */
    p += digits + 2;
    return *p == ' ' ? p + 1 : p;
}

/* A launcher relaying its child's traceback in its own exception: the
 * child's death, told by the child's own bundle, is no death of this
 * process.
 *   - torch.multiprocessing.spawn: "-- Process 1 terminated with the
 *     following error:", then the child's traceback, to its exception line;
 *   - torchrun's agent (and accelerate's, which is torchrun's): its
 *     ChildFailedError's summary, from the exception's line through the
 *     "=" rule that closes its "Root Cause (first observed failure)", where
 *     a rank that used @record has its traceback, indented. */
static enum { RELAY_NONE, RELAY_SPAWN, RELAY_ELASTIC, RELAY_ELASTIC_ROOT } relaying;

static int is_rule(const char *line, char c)
{
    return line[0] == c && line[strspn(line, (char[]){c, 0})] == '\0';
}

int gmp_line_in_relay(const char *line)
{
    if (!strncmp(line, "-- Process ", 11) && strstr(line, " terminated with the following error:")) {
        relaying = RELAY_SPAWN;
        return 1;
    }
    if (relaying == RELAY_ELASTIC || relaying == RELAY_ELASTIC_ROOT) {
        if (!strcmp(line, "Traceback (most recent call last):"))
            relaying = RELAY_NONE; /* the launcher's own, at the margin */
        else if (!strncmp(line, "Root Cause (first observed failure):", 36))
            relaying = RELAY_ELASTIC_ROOT;
        else if (relaying == RELAY_ELASTIC_ROOT && is_rule(line, '='))
            relaying = RELAY_NONE;
        if (relaying != RELAY_NONE)
            return 1;
    }
    return 0;
}

int gmp_line_relayed_traceback(const char *line, int traceback_state)
{
    if (relaying == RELAY_SPAWN) {
        if (traceback_state == 2 || (traceback_state == 0 && line[0] != ' '))
            relaying = RELAY_NONE; /* the child's exception line ends what is relayed */
        return 1;
    }
    if (line[0] != ' ' && strstr(line, "ChildFailedError:")) {
        relaying = RELAY_ELASTIC; /* its summary follows, on lines of its own */
        return 1;
    }
    return 0;
}
