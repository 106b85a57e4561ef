#!/bin/sh
# run.sh BUILD — `make bench`: every workload bare, under gpumemprof and
# under the peers on this machine (heaptrack and glibc's libmemusage.so from
# Debian; Memray and Fil from PyPI for python3), the commands interleaved
# (A B C A B C ...) ROUNDS times (LONG_ROUNDS for the python3 workloads)
# so that machine drift cancels.  Each cell
# is the median of the rounds' own ratios (a tool's time over the bare time
# of the same round) and their range; a peer that is not installed is
# "absent".  Then where the time goes under the preload (perf).  Prints
# Markdown; see docs/performance.md.
set -u
B=$(cd "$1" && pwd)
ROUNDS=${GMP_BENCH_ROUNDS:-21}
# the python3 workloads take seconds each (Fil makes one 10): the first
# LONG_ROUNDS rounds run them too
LONG_ROUNDS=${GMP_BENCH_LONG_ROUNDS:-7}
OPS=${GMP_BENCH_OPS:-5000000}
PRELOAD=$B/libgpumemprof_preload.so
W=$(mktemp -d "${TMPDIR:-/tmp}/gmp-bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
RES=$W/results
: > "$RES"
export GMP_DUMP_DIR="$W/dumps" GMP_RUN_DIR="$W/run"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)

have() { command -v "$1" >/dev/null 2>&1; }

# The interpreter itself, not a launcher in front of it (pyenv's shim is
# a bash script that starts dozens of processes before python3 does, each of
# them then timed under the tool); the Python peers run as its modules.
PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || echo python3)
has_module() { "$PY" -c "import $1" >/dev/null 2>&1; }

# The peers and perf, installed when they can be (Debian for heaptrack and
# perf, PyPI for Memray and Fil); one that cannot is shown as absent.
have heaptrack || sh "$HERE/../mk/install-optional.sh" heaptrack
has_module memray || timeout 300 "$PY" -m pip install -q memray >/dev/null 2>&1
has_module filprofiler || timeout 300 "$PY" -m pip install -q filprofiler >/dev/null 2>&1
[ -n "$(ls /usr/lib/*/libmemusage.so 2>/dev/null)" ] || sh "$HERE/../mk/install-optional.sh" libc-devtools
have perf || sh "$HERE/../mk/install-optional.sh" linux-perf
MEMUSAGE=$(ls /usr/lib/*/libmemusage.so /lib/*/libmemusage.so 2>/dev/null | head -n 1)

# wall CMD...: seconds the whole command took (start-up included)
wall() {
    a=$(date +%s%N)
    "$@" >/dev/null 2>&1
    b=$(date +%s%N)
    awk -v a="$a" -v b="$b" 'BEGIN { printf "%.6f\n", (b - a) / 1e9 }'
}

# under TOOL CMD...: CMD run under a tool, its wall time (the bare run
# through env as well, so that env's own exec is in both)
under() {
    tool=$1
    shift
    case $tool in
    none) wall env "$@" ;;
    gpumemprof) wall env LD_PRELOAD="$PRELOAD" "$@" ;;
    heaptrack) wall heaptrack -o "$W/ht" "$@" ;;
    libmemusage) wall env MEMUSAGE_OUTPUT=/dev/null LD_PRELOAD="$MEMUSAGE" "$@" ;;
    esac
}

# python TOOL SCRIPT: a python3 script under a tool (Memray and Fil start
# the interpreter themselves), its wall time
python() {
    case $1 in
    memray) wall "$PY" -m memray run --native -q -f -o "$W/memray.bin" "$2" ;;
    fil) wall "$PY" -m filprofiler -o "$W/fil" --no-browser run "$2" ;;
    *) under "$1" "$PY" "$2" ;;
    esac
}

# churn: the program's own timing of its loop (tool start-up left out)
churn() { # THREADS TOOL
    case $2 in
    none) "$B/bench/churn" "$1" "$OPS" ;;
    gpumemprof) LD_PRELOAD=$PRELOAD "$B/bench/churn" "$1" "$OPS" ;;
    heaptrack) heaptrack -o "$W/ht" "$B/bench/churn" "$1" "$OPS" 2>/dev/null | grep -E '^[0-9.]+$' ;;
    libmemusage) MEMUSAGE_OUTPUT=/dev/null LD_PRELOAD=$MEMUSAGE "$B/bench/churn" "$1" "$OPS" \
        2>/dev/null | grep -E '^[0-9.]+$' ;;
    esac
}

available() { # TOOL
    case $1 in
    none | gpumemprof) return 0 ;;
    heaptrack) have heaptrack ;;
    libmemusage) [ -n "$MEMUSAGE" ] ;;
    memray) has_module memray ;;
    fil) has_module filprofiler ;;
    esac
}

# the compile: one of our own files, as the Makefile builds it
compile() { # TOOL
    under "$1" gcc -std=gnu11 -D_GNU_SOURCE -O2 -I"$ROOT/include" -I"$ROOT/base" \
        -I"$ROOT/recorder" -I"$ROOT/collectors" -c "$ROOT/recorder/bundle.c" -o "$W/bundle.o"
}

for round in $(seq "$ROUNDS"); do
    for threads in 1 2; do
        for tool in none gpumemprof heaptrack libmemusage; do
            available $tool || continue
            v=$(churn $threads $tool)
            [ -n "$v" ] && echo "churn$threads $tool $round $v" >> "$RES"
        done
    done
    for tool in none gpumemprof memray fil; do
        [ "$round" -le "$LONG_ROUNDS" ] && available $tool || continue
        echo "python $tool $round $(python $tool "$HERE/pyload.py")" >> "$RES"
        echo "pylarge $tool $round $(python $tool "$HERE/pylarge.py")" >> "$RES"
    done
    for tool in none gpumemprof; do
        echo "pystderr $tool $round $(python $tool "$HERE/pystderr.py")" >> "$RES"
    done
    for tool in none gpumemprof libmemusage; do
        available $tool || continue
        echo "gcc $tool $round $(compile $tool)" >> "$RES"
    done
    # the doubles read their settings with getenv on every call: the bare
    # run gets an environment as long (an empty preload, the same variables)
    echo "pairs none $round $(GMP_STACKS=0 GMP_WATCHDOG=0 LD_PRELOAD=$B/bench/libempty.so \
        "$B/bench/device_pairs" 1000000)" >> "$RES"
    echo "pairs gpumemprof $round $(GMP_STACKS=0 GMP_WATCHDOG=0 LD_PRELOAD=$PRELOAD \
        "$B/bench/device_pairs" 1000000)" >> "$RES"
    echo "pairs stacks $round $(GMP_STACKS=1 GMP_WATCHDOG=0 LD_PRELOAD=$PRELOAD \
        "$B/bench/device_pairs" 1000000)" >> "$RES"
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
# the same loop under gmp-run (its job directory, its look at the job 20
# times a second, a proxy ring for the shell), against the empty preload
supervised() {
    wall "$B/gmp-run" sh -c 'i=0; while [ $i -lt 300 ]; do /bin/true; i=$((i+1)); done'
}
for pair in $(seq "${GMP_BENCH_STARTUP_PAIRS:-40}"); do
    if [ $((pair % 2)) = 0 ]; then
        e=$(startup "$B/bench/libempty.so"); g=$(supervised)
    else
        g=$(supervised); e=$(startup "$B/bench/libempty.so")
    fi
    echo "supervised pair $g $e" >> "$RES"
done
"$B/bench/recorder_bench" "$W" | sed 's/^/recorder /' >> "$RES"
# triage at a cluster's scale: 100,000 bundles of 1,000 torchrun runs, each
# a copy of one real rank's bundle (python3 out of memory under ulimit -v,
# with a torchrun rank's variables); the median of 5 warm runs, and the
# most memory one took
TRIAGE_BUNDLES=${GMP_BENCH_TRIAGE_BUNDLES:-100000}
mkdir -p "$W/rank"
GMP_DUMP_DIR="$W/rank" RANK=1 LOCAL_RANK=1 WORLD_SIZE=100 TORCHELASTIC_RUN_ID=bench \
    TORCHELASTIC_RESTART_COUNT=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 LD_PRELOAD="$PRELOAD" \
    sh -c 'ulimit -v 600000; exec "$1" -c "x = [bytearray(64 << 20) for _ in range(100)]"' \
    sh "$PY" >/dev/null 2>&1
TEMPLATE=$(ls -d "$W"/rank/oom_dump_* 2>/dev/null | head -n 1)
if [ -n "$TEMPLATE" ] && "$PY" "$HERE/triage_corpus.py" "$TEMPLATE" "$W/week" "$TRIAGE_BUNDLES" \
    $((TRIAGE_BUNDLES / 100)) 2>"$W/corpus.err"; then
    "$B/gmp-inspect" triage "$W/week" >/dev/null 2>&1 # warm: the files in the page cache
    echo "triage count 0 $TRIAGE_BUNDLES" >> "$RES"
    "$PY" - "$B/gmp-inspect" "$W/week" >> "$RES" <<'PY'
import resource, subprocess, sys, time
for i in range(5):
    a = time.monotonic()
    subprocess.run([sys.argv[1], "triage", sys.argv[2]], stdout=subprocess.DEVNULL)
    print("triage gpumemprof %d %.3f" % (i, time.monotonic() - a))
print("triage rss 0 %d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
fi
rm -rf "$W/week"
"$B/bench/rss" | sed 's/^/rss none /' >> "$RES"
LD_PRELOAD=$PRELOAD "$B/bench/rss" | sed 's/^/rss gpumemprof /' >> "$RES"

echo "$(date -u +%Y-%m-%d), $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1), Linux $(uname -r); $ROUNDS rounds ($LONG_ROUNDS for python3, $("$PY" -V 2>&1) at $PY):"
echo
python3 - "$RES" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def times(kind, tool):
    return {r[2]: float(r[3]) for r in rows if r[0] == kind and r[1] == tool and len(r) > 3}
def cell(kind, tool):
    """median of the rounds' ratios to the bare run of the same round, and their range"""
    base, t = times(kind, "none"), times(kind, tool)
    ratios = sorted(t[k] / base[k] for k in t if k in base and base[k] > 0)
    if not ratios:
        return "absent"
    return "%.2fx (%.2f-%.2f)" % (statistics.median(ratios), ratios[0], ratios[-1])
def bare(kind):
    v = list(times(kind, "none").values())
    return statistics.median(v) if v else 0
print("| workload | gpumemprof | heaptrack | libmemusage.so | Memray --native | Fil | target |")
print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
for t in (1, 2):
    k = "churn%d" % t
    print("| malloc/free churn, %d thread%s (%.3f s bare) | %s | %s | %s | - | - | <= 1.15x |" % (
        t, "s" if t > 1 else "", bare(k), cell(k, "gpumemprof"), cell(k, "heaptrack"),
        cell(k, "libmemusage")))
print("| python3 dict of 300k, JSON round-trip (%.2f s bare) | %s | - | - | %s | %s | <= 1.03x |" % (
    bare("python"), cell("python", "gpumemprof"), cell("python", "memray"), cell("python", "fil")))
print("| python3, 20,000 blocks of 2 MiB, each an event with a stack (%.2f s bare) | %s | - | - | %s | %s | <= 1.05x |" % (
    bare("pylarge"), cell("pylarge", "gpumemprof"), cell("pylarge", "memray"), cell("pylarge", "fil")))
print("| python3 printing 20,000 lines on stderr that read as OOM messages (%.2f s bare) | %s | - | - | - | - | <= 1.30x |" % (
    bare("pystderr"), cell("pystderr", "gpumemprof")))
print("| gcc -O2 -c recorder/bundle.c (%.2f s bare) | %s | - | %s | - | - | <= 1.05x |" % (
    bare("gcc"), cell("gcc", "gpumemprof"), cell("gcc", "libmemusage")))
def added(tool):
    base, t = times("pairs", "none"), times("pairs", tool)
    d = sorted(t[k] - base[k] for k in t if k in base)
    return "+%.0f ns (%+.0f to %+.0f)" % (statistics.median(d), d[0], d[-1]) if d else "absent"
print("| device alloc/free pair, cudart double (%.0f ns bare), GMP_STACKS=0 | %s | - | - | - | - | <= 100 ns |" % (
    bare("pairs"), added("gpumemprof")))
print("| the same with allocation stacks (the default) | %s | - | - | - | - | <= 400 ns |" % added("stacks"))
pairs = sorted(float(r[2]) / float(r[3]) for r in rows if r[0] == "startup")
if pairs:
    print("| start-up: 300 `/bin/true` in a shell loop, against an empty preload (%d pairs; %.3f s with the empty one) | %.2fx (%.2f-%.2f) | - | - | - | - | <= 1.10x |" % (
        len(pairs), statistics.median(float(r[3]) for r in rows if r[0] == "startup"),
        statistics.median(pairs), pairs[0], pairs[-1]))
pairs = sorted(float(r[2]) / float(r[3]) for r in rows if r[0] == "supervised")
if pairs:
    print("| the same loop under `gmp-run`, against the empty preload without it (%d pairs) | %.2fx (%.2f-%.2f) | - | - | - | - | <= 1.10x |" % (
        len(pairs), statistics.median(pairs), pairs[0], pairs[-1]))
rec = {r[1]: float(r[2]) for r in rows if r[0] == "recorder"}
print("| ring push, 1 thread / 2 threads | %.1f / %.1f ns | | | | | <= 10 ns (1 thread) |" % (
    rec.get("push1", 0), rec.get("push2", 0)))
print("| dump with 10k / 1M events | %.1f / %.0f ms | | | | | <= 20 ms / <= 1 s |" % (
    rec.get("dump10k", 0), rec.get("dump1m", 0)))
t = sorted(times("triage", "gpumemprof").values())
if t:
    n = int(times("triage", "count").get("0", 0))
    print("| `gmp-inspect triage` of {:,} bundles from {:,} torchrun runs ({} warm runs; at most {:.0f} MiB) | {:.2f} s ({:.2f}-{:.2f}) | | | | | <= 6 s (100,000) |".format(
        n, n // 100, len(t), times("triage", "rss").get("0", 0) / 1024, statistics.median(t), t[0], t[-1]))
def rss(tool):
    r = [x for x in rows if x[0] == "rss" and x[1] == tool]
    return (int(r[0][3]), int(r[0][5])) if r else (0, 0)
(n, _), (g, ring) = rss("none"), rss("gpumemprof")
print("| memory added to a process, apart from the ring | %.2f MiB (ring %.2f MiB) | | | | | <= 2 MiB |" % (
    (g - ring - n) / 1024, ring / 1024))
PY

# Where the time goes: the churn (1 thread) under the preload, by function.
echo
if have perf && perf record -q -o "$W/perf.data" -- env LD_PRELOAD="$PRELOAD" \
    "$B/bench/churn" 1 "$OPS" >/dev/null 2>"$W/perf.err"; then
    echo "Where the churn's time goes under the preload (perf, the 8 largest):"
    echo
    echo '```'
    perf report -i "$W/perf.data" --stdio --no-children --sort dso,sym 2>/dev/null |
        grep -E '^ +[0-9]' | head -n 8
    echo '```'
else
    echo "perf: not run ($(head -n 1 "$W/perf.err" 2>/dev/null || echo 'not installed'))"
fi
