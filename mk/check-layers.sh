#!/bin/sh
# check-layers.sh — the folders depend one way.  Every #include "X" of our
# sources must name a header of a folder its own folder may use:
#
#   include/ (the public header)  <- everyone
#   base/        strings, files, time, logging, the JSON writer
#   collectors/  on base
#   recorder/    on base and collectors
#   preload/     on base, collectors and recorder, in two rooms: hooks/
#                (the interposed functions, their tables and checks) on
#                engine/ (what the hooks call), never the reverse
#   tools/       on base and their own folder, plus the reader interface of
#                the recorder (ring.h, rundir.h: rings, which gmp-run also
#                makes and samples into for the processes of its job;
#                bundle.h and collector.h: `info`, which prints what a
#                bundle holds; kernel_log.h: gmp-run reads the kernel log
#                from its job's start; dumpdir.h: `list` counts what waits
#                in the fallback dump directory; verdict.h: a bundle's
#                kind, decided as its writer decided it; ring_recovery.h:
#                the bundles of rings their processes left, which recover
#                and gmp-run write; printed_frame.h: the JVM's and V8's
#                printed frames, read as the preload read them;
#                worker_loops.h: Python's pools' worker loops, named as the
#                preload names them)
#   tools/inspect/ gmp-inspect's rooms, each on the ones before it:
#                read (bundles and rings) <- answer (what a bundle means)
#                <- draw (on read alone) <- export (on read and answer)
#                <- verbs (on every room)
#
# One line per include that crosses a line it must not; exit 1 if any.
set -u
cd "$(dirname "$0")/.."
room_may_use() { # room_may_use FROM_ROOM ROOM: gmp-inspect's rooms, one way
    [ "$1" = "$2" ] && return 0
    case "$1:$2" in
    answer:read | draw:read | export:read | export:answer | verbs:*) return 0 ;;
    esac
    return 1
}
allowed() { # allowed FROM_FOLDER HEADER_FOLDER HEADER
    case "$1:$2" in
    *:include | *:base) return 0 ;;
    collectors:collectors | recorder:collectors | recorder:recorder) return 0 ;;
    preload/*:collectors | preload/*:recorder) return 0 ;;
    preload/engine:preload/engine | preload/hooks:preload/hooks | preload/hooks:preload/engine) return 0 ;;
    tools/run:tools/run) return 0 ;;
    tools/inspect/*:tools/inspect/*) room_may_use "${1#tools/inspect/}" "${2#tools/inspect/}" && return 0 ;;
    tools/*:recorder) case "$3" in ring.h | rundir.h | bundle.h | kernel_log.h | dumpdir.h | verdict.h | ring_recovery.h | printed_frame.h | worker_loops.h) return 0 ;; esac ;;
    tools/*:collectors) [ "$3" = collector.h ] && return 0 ;;
    esac
    return 1
}
folder_of() { # the folder that holds header $1, or "" (a system or test header)
    for d in include base collectors recorder preload/engine preload/hooks $rooms tools/run; do
        [ -f "$d/$1" ] && { echo "$d"; return; }
    done
}
rooms=$(for r in tools/inspect/*/; do echo "${r%/}"; done)
bad=0
for f in base/*.[ch] collectors/*.[ch] recorder/*.[ch] preload/*/*.[ch] preload/hooks/check/*.c \
    tools/inspect/*/*.[ch] tools/run/*.[ch]; do
    from=$(dirname "$f")
    from=${from%/check}
    case "$f" in preload/hooks/check/*) from=preload/hooks ;; esac
    for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
        to=$(folder_of "$h")
        [ -z "$to" ] && continue
        if ! allowed "$from" "$to" "$h"; then
            echo "layers: $f includes $to/$h, which $from/ may not use"
            bad=1
        fi
    done
done
[ "$bad" -eq 0 ] && echo "layers: every include goes one way"
exit "$bad"
