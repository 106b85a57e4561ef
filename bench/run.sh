#!/bin/sh
# run.sh BUILD — `make bench`: every workload under no preload, under
# gpumemprof and under the peers on this machine (heaptrack and glibc's
# libmemusage.so from Debian; Memray and Fil from PyPI for python3), the
# commands interleaved (A B C A B C ...) ROUNDS times so that machine drift
# cancels, medians compared.  A peer that is not installed is "absent".
# Prints one Markdown table; see bench/README.md.
set -u
B=$(cd "$1" && pwd)
ROUNDS=${GMP_BENCH_ROUNDS:-5}
OPS=${GMP_BENCH_OPS:-5000000}
PRELOAD=$B/libgpumemprof_preload.so
W=$(mktemp -d "${TMPDIR:-/tmp}/gmp-bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
RES=$W/results
: > "$RES"
export GMP_DUMP_DIR="$W/dumps" GMP_RUN_DIR="$W/run"
HERE=$(cd "$(dirname "$0")" && pwd)

have() { command -v "$1" >/dev/null 2>&1; }

# The peers, installed when they can be (Debian for heaptrack, PyPI for
# Memray and Fil); one that cannot is shown as absent.
have heaptrack || sh "$HERE/../mk/install-optional.sh" heaptrack
have memray || timeout 300 python3 -m pip install -q memray >/dev/null 2>&1
have fil-profile || timeout 300 python3 -m pip install -q filprofiler >/dev/null 2>&1
[ -n "$(ls /usr/lib/*/libmemusage.so 2>/dev/null)" ] || sh "$HERE/../mk/install-optional.sh" libc-devtools
MEMUSAGE=$(ls /usr/lib/*/libmemusage.so /lib/*/libmemusage.so 2>/dev/null | head -n 1)

# wall TOOL CMD...: seconds the whole command took (startup included)
wall() {
    a=$(date +%s%N)
    "$@" >/dev/null 2>&1
    b=$(date +%s%N)
    awk -v a="$a" -v b="$b" 'BEGIN { printf "%.6f\n", (b - a) / 1e9 }'
}

# churn: the program's own timing of its loop
churn() { # THREADS TOOL
    case $2 in
    none) "$B/bench/churn" "$1" "$OPS" ;;
    gpumemprof) LD_PRELOAD=$PRELOAD "$B/bench/churn" "$1" "$OPS" ;;
    heaptrack) heaptrack -o "$W/ht" "$B/bench/churn" "$1" "$OPS" 2>/dev/null | grep -E '^[0-9.]+$' ;;
    libmemusage) MEMUSAGE_OUTPUT=/dev/null LD_PRELOAD=$MEMUSAGE "$B/bench/churn" "$1" "$OPS" \
        2>/dev/null | grep -E '^[0-9.]+$' ;;
    esac
}

python() { # TOOL
    case $1 in
    none) wall python3 "$HERE/pyload.py" ;;
    gpumemprof) wall env LD_PRELOAD="$PRELOAD" python3 "$HERE/pyload.py" ;;
    memray) wall memray run --native -q -f -o "$W/memray.bin" "$HERE/pyload.py" ;;
    fil) wall fil-profile -o "$W/fil" --no-browser run "$HERE/pyload.py" ;;
    esac
}

available() { # TOOL
    case $1 in
    none | gpumemprof) return 0 ;;
    heaptrack) have heaptrack ;;
    libmemusage) [ -n "$MEMUSAGE" ] ;;
    memray) have memray ;;
    fil) have fil-profile ;;
    esac
}

for round in $(seq "$ROUNDS"); do
    for threads in 1 2; do
        for tool in none gpumemprof heaptrack libmemusage; do
            available $tool || continue
            v=$(churn $threads $tool)
            [ -n "$v" ] && echo "churn$threads $tool $v" >> "$RES"
        done
    done
    for tool in none gpumemprof memray fil; do
        available $tool || continue
        echo "python $tool $(python $tool)" >> "$RES"
    done
    echo "pairs none $("$B/bench/device_pairs" 1000000)" >> "$RES"
    echo "pairs gpumemprof $(GMP_STACKS=0 GMP_WATCHDOG=0 LD_PRELOAD=$PRELOAD \
        "$B/bench/device_pairs" 1000000)" >> "$RES"
    echo "pairs stacks $(GMP_WATCHDOG=0 LD_PRELOAD=$PRELOAD "$B/bench/device_pairs" 1000000)" \
        >> "$RES"
done
# start-up: a shell loop of 300 /bin/true with the library in every
# process, gpumemprof against an empty preload, in pairs (order alternating)
startup() { # LIBRARY
    wall env LD_PRELOAD="$1" sh -c 'i=0; while [ $i -lt 300 ]; do /bin/true; i=$((i+1)); done'
}
for pair in $(seq "${GMP_BENCH_STARTUP_PAIRS:-40}"); do
    if [ $((pair % 2)) = 0 ]; then
        e=$(startup "$B/bench/libempty.so"); g=$(startup "$PRELOAD")
    else
        g=$(startup "$PRELOAD"); e=$(startup "$B/bench/libempty.so")
    fi
    echo "startup pair $g $e" >> "$RES"
done
"$B/bench/recorder_bench" "$W" | sed 's/^/recorder /' >> "$RES"
"$B/bench/rss" | sed 's/^/rss none /' >> "$RES"
LD_PRELOAD=$PRELOAD "$B/bench/rss" | sed 's/^/rss gpumemprof /' >> "$RES"

python3 - "$RES" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def med(kind, tool):
    v = [float(r[2]) for r in rows if r[0] == kind and r[1] == tool and len(r) > 2]
    return statistics.median(v) if v else None
def ratio(kind, tool):
    base, v = med(kind, "none"), med(kind, tool)
    return "absent" if v is None or base is None else "%.2fx" % (v / base)
print("| workload | gpumemprof | heaptrack | libmemusage.so | Memray --native | Fil | target |")
print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
for t, target in ((1, "<= 1.3x"), (2, "<= 1.5x")):
    k = "churn%d" % t
    print("| malloc/free churn, %d thread%s (%.3f s bare) | %s | %s | %s | - | - | %s |" % (
        t, "s" if t > 1 else "", med(k, "none") or 0, ratio(k, "gpumemprof"),
        ratio(k, "heaptrack"), ratio(k, "libmemusage"), target))
print("| python3 dict of 300k, JSON round-trip (%.2f s bare) | %s | - | - | %s | %s | <= 1.05x |" % (
    med("python", "none") or 0, ratio("python", "gpumemprof"), ratio("python", "memray"),
    ratio("python", "fil")))
added = (med("pairs", "gpumemprof") or 0) - (med("pairs", "none") or 0)
print("| device alloc/free pair, cudart double (%.0f ns bare), GMP_STACKS=0 | +%.0f ns | - | - | - | - | <= 150 ns |" % (
    med("pairs", "none") or 0, added))
with_stacks = (med("pairs", "stacks") or 0) - (med("pairs", "none") or 0)
print("| the same with allocation stacks (the default) | +%.0f ns | - | - | - | - | <= 2 us |" % with_stacks)
pairs = sorted(float(r[2]) / float(r[3]) for r in rows if r[0] == "startup")
if pairs:
    print("| start-up: 300 `/bin/true` in a shell loop, against an empty preload (%d pairs; %.3f s with the empty one) | %.2fx (pairs %.2f-%.2f) | - | - | - | - | <= 1.10x |" % (
        len(pairs), statistics.median(float(r[3]) for r in rows if r[0] == "startup"),
        statistics.median(pairs), pairs[0], pairs[-1]))
rec = {r[1]: float(r[2]) for r in rows if r[0] == "recorder"}
print("| ring push, 1 thread / 2 threads | %.1f / %.1f ns | | | | | <= 10 ns (1 thread) |" % (
    rec.get("push1", 0), rec.get("push2", 0)))
print("| dump with 10k / 1M events | %.1f / %.0f ms | | | | | <= 20 ms / <= 1 s |" % (
    rec.get("dump10k", 0), rec.get("dump1m", 0)))
def rss(tool):
    r = [x for x in rows if x[0] == "rss" and x[1] == tool]
    return (int(r[0][3]), int(r[0][5])) if r else (0, 0)
(n, _), (g, ring) = rss("none"), rss("gpumemprof")
print("| memory added to a process, apart from the ring | %.2f MiB (ring %.2f MiB) | | | | | <= 2 MiB |" % (
    (g - ring - n) / 1024, ring / 1024))
PY
