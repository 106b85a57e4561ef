#!/bin/sh
# run.sh BUILD — `make bench`: every workload bare, under gpumemprof, under
# an empty preload (and, for the churn, a hook that only forwards) and
# under the peers on this machine (heaptrack and glibc's libmemusage.so
# from Debian; Memray and Fil from PyPI for python3), the commands
# interleaved ROUNDS times (LONG_ROUNDS for Memray and Fil) so that
# machine drift cancels, each timed in wall and CPU time.  bench/summary.py
# makes the tables (medians of the rounds' own ratios, with their range)
# and the verdict against each target.  Then where the time goes under the
# preload (perf).  Prints Markdown; see docs/performance.md.  With
# GMP_BENCH_RESULTS=FILE the rounds' raw times are kept there, for
# `python3 bench/summary.py FILE` to read again.
set -u
B=$(cd "$1" && pwd)
ROUNDS=${GMP_BENCH_ROUNDS:-21}
# Memray and Fil take seconds a run (Fil's of the dict 12): they run in
# the first LONG_ROUNDS rounds, the python3 workloads bare and under the
# preloads in every round (seven rounds of the dict, an interval their
# whole range, could not tell 0.99x from its target of 1.03)
LONG_ROUNDS=${GMP_BENCH_LONG_ROUNDS:-7}
# the churn takes 0.1 s bare (its passes through the PLT, and as many
# straight to glibc): CHURN_ROUNDS rounds of it bare and under the preloads
# (the peers, 3-30 times slower, in the first ROUNDS)
CHURN_ROUNDS=${GMP_BENCH_CHURN_ROUNDS:-61}
STARTUP_ROUNDS=${GMP_BENCH_STARTUP_ROUNDS:-60}
[ "$CHURN_ROUNDS" -ge "$ROUNDS" ] || CHURN_ROUNDS=$ROUNDS
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

# pinned CMD...: CMD on one CPU, the last (when there are two or more).
PIN_CPU=$(($(nproc) - 1))
pinned() {
    if command -v taskset >/dev/null 2>&1 && [ "$PIN_CPU" -gt 0 ]; then
        taskset -c "$PIN_CPU" "$@"
    else
        "$@"
    fi
}

# timed CMD...: "WALL CPU FAULTS" of the whole command, start-up included
# (the CPU time and the page faults of the command and the children it
# waited for), on one CPU: a process moved between the two CPUs of this
# VM mid-run differs from the next by more than a tool costs (seven
# rounds of the python3 dict under the preload ranged over 0.82-1.07x of
# bare unpinned, 0.97-1.04x pinned).  Every tool alike but heaptrack, whose
# interpreter process would share that CPU (timed_unpinned).
timed() { pinned "$B/bench/timed" "$@"; }
timed_unpinned() { "$B/bench/timed" "$@"; }

# under PEER CMD...: CMD run under a peer that wraps a native program
# (the bare run and the preloads are timed in pairs: see paired)
under() {
    tool=$1
    shift
    case $tool in
    heaptrack) timed_unpinned heaptrack -o "$W/ht" "$@" ;;
    libmemusage) timed env MEMUSAGE_OUTPUT=/dev/null LD_PRELOAD="$MEMUSAGE" "$@" ;;
    esac
}

# python PEER SCRIPT: a python3 script under Memray or Fil, which start
# the interpreter themselves
python() {
    case $1 in
    memray) timed "$PY" -m memray run --native -q -f -o "$W/memray.bin" "$2" ;;
    fil) timed "$PY" -m filprofiler -o "$W/fil" --no-browser run "$2" ;;
    esac
}

# churn THREADS TOOL: the program's own "WALL CPU WALL_RATIO CPU_RATIO":
# its passes through the PLT (the tool's malloc and free) in seconds, and
# the median ratio of each such pass over the same pass calling glibc's
# own straight, in the same process a millisecond apart (bench/churn.c):
# the tool's cost, the machine's drift between runs left out.  One thread
# runs pinned, every tool alike but heaptrack, whose separate interpreter
# process would share the loop's CPU.
churn() {
    pin=
    [ "$1" = 1 ] && pin=pinned
    case $2 in
    none) $pin "$B/bench/churn" "$1" "$OPS" ;;
    empty) $pin env LD_PRELOAD="$B/bench/libempty.so" "$B/bench/churn" "$1" "$OPS" ;;
    forward) $pin env LD_PRELOAD="$B/bench/libforward.so" "$B/bench/churn" "$1" "$OPS" ;;
    gpumemprof) $pin env LD_PRELOAD="$PRELOAD" "$B/bench/churn" "$1" "$OPS" ;;
    heaptrack) heaptrack -o "$W/ht" "$B/bench/churn" "$1" "$OPS" 2>/dev/null ;;
    libmemusage) $pin env MEMUSAGE_OUTPUT=/dev/null LD_PRELOAD="$MEMUSAGE" "$B/bench/churn" \
        "$1" "$OPS" 2>/dev/null ;;
    esac | grep -E '^[0-9.]+ [0-9.]+ [0-9.]+ [0-9.]+$'
}

available() { # TOOL
    case $1 in
    none | empty | forward | gpumemprof) return 0 ;;
    heaptrack) have heaptrack ;;
    libmemusage) [ -n "$MEMUSAGE" ] ;;
    memray) has_module memray ;;
    fil) has_module filprofiler ;;
    esac
}

# compile CMD...: CMD, then the compile as its arguments: one of our own
# files, as the Makefile builds it
compile() {
    "$@" gcc -std=gnu11 -D_GNU_SOURCE -O2 -I"$ROOT/include" -I"$ROOT/base" \
        -I"$ROOT/recorder" -I"$ROOT/collectors" -c "$ROOT/recorder/bundle.c" -o "$W/bundle.o"
}

# record KIND TOOL ROUND "WALL CPU [FAULTS]": one result line (nothing when
# the run gave no times)
record() {
    [ -n "$4" ] && echo "$1 $2 $3 $4" >> "$RES"
}

# Each round runs every tool once, in an order that turns round every
# round (A B C, then C B A), so that neither drift nor a tool's place in
# the round favours one.
order() { # ROUND TOOL...
    r=$1
    shift
    if [ $((r % 2)) = 0 ]; then
        echo "$@"
    else
        printf '%s\n' "$@" | tac | tr '\n' ' '
    fi
}

# paired KIND ROUND CMD...: the whole process CMD bare beside it under the
# empty preload, then bare beside it under the library (or the other way
# round, turning every round), each pair a second or less apart
# (bench/start_pairs.c): a round's ratio for each preload is its pair's.
# Whole runs of a few seconds timed in turn, as these rows were until
# 2026-12-03, ranged over 0.64-1.43x of the same round's bare run; a pair
# over 0.93-1.05x.  The bare run beside the library's is the round's bare
# run, which the peers are measured against.
paired() {
    kind=$1
    round=$2
    shift 2
    turn=
    [ $((round % 2)) = 0 ] || turn=-r
    for tool in $(order "$round" empty gpumemprof); do
        lib=$PRELOAD
        [ "$tool" = gpumemprof ] || lib=$B/bench/libempty.so
        pair=$(pinned "$B/bench/start_pairs" $turn 1 "" "$lib" "$@")
        record "$kind" "$tool" "$round" "$pair"
        # start_pairs' 7th, 8th and 6th: the bare run's WALL CPU FAULTS
        [ "$tool" = empty ] || record "$kind" none "$round" "$(echo "$pair" | awk '{ print $7, $8, $6 }')"
    done
}

for round in $(seq "$CHURN_ROUNDS"); do
    for threads in 1 2; do
        for tool in $(order "$round" none empty forward gpumemprof heaptrack libmemusage); do
            case $tool in heaptrack | libmemusage) [ "$round" -le "$ROUNDS" ] || continue ;; esac
            available $tool || continue
            record churn$threads $tool $round "$(churn $threads $tool)"
        done
    done
done
for round in $(seq "$ROUNDS"); do
    for workload in pyload pylarge; do
        kind=$workload
        [ $kind = pyload ] && kind=python
        paired $kind "$round" "$PY" "$HERE/$workload.py"
        for tool in memray fil; do
            available $tool && [ "$round" -le "$LONG_ROUNDS" ] || continue
            record $kind $tool $round "$(python $tool "$HERE/$workload.py")"
        done
    done
    paired pystderr "$round" "$PY" "$HERE/pystderr.py"
    compile paired gcc "$round"
    for tool in heaptrack libmemusage; do
        available $tool || continue
        record gcc $tool $round "$(compile under $tool)"
    done
    # the doubles read their settings with getenv on every call: the bare
    # run gets an environment as long (an empty preload, the same variables)
    echo "pairs none $round $(pinned env GMP_STACKS=0 GMP_WATCHDOG=0 \
        LD_PRELOAD="$B/bench/libempty.so" "$B/bench/device_pairs" 1000000)" >> "$RES"
    echo "pairs gpumemprof $round $(pinned env GMP_STACKS=0 GMP_WATCHDOG=0 \
        LD_PRELOAD="$PRELOAD" "$B/bench/device_pairs" 1000000)" >> "$RES"
    echo "pairs stacks $round $(pinned env GMP_STACKS=1 GMP_WATCHDOG=0 \
        LD_PRELOAD="$PRELOAD" "$B/bench/device_pairs" 1000000)" >> "$RES"
    # the ring alone, 0.1 s a round: one thread pinned as the rest, two on
    # two CPUs (seven rounds, each interval their whole range, had called
    # 8.3 ns too close to 10 for one round of 19)
    pinned "$B/bench/recorder_bench" "$W" push1 | sed "s/^\([a-z0-9]*\) /recorder \1 $round /" >> "$RES"
    "$B/bench/recorder_bench" "$W" push2 | sed "s/^\([a-z0-9]*\) /recorder \1 $round /" >> "$RES"
done
# start-up: 300 /bin/true under the library, each beside one under an
# empty preload a millisecond apart (bench/start_pairs.c: the loops of a
# fifth of a second that this row timed until 2026-12-02 read 0.62-1.23x
# of the same loop run again); and a shell loop of 300 /bin/true under
# gmp-run (its job directory, its look at the job 20 times a second, a
# proxy ring for the shell) beside the same loop under the empty preload,
# a pair a round, in turn.  Everything on one CPU (the last): a fork, an
# exec and a wait that cross between two CPUs differ from run to run by
# more than the library costs (a round's own ratio ranged over 0.85-1.46x
# unpinned); gmp-run's looks on that CPU too.
LOOP='i=0; while [ $i -lt 300 ]; do /bin/true; i=$((i+1)); done'
for round in $(seq "$STARTUP_ROUNDS"); do
    turn=
    [ $((round % 2)) = 0 ] || turn=-r
    for tool in $(order "$round" gpumemprof gmp-run); do
        case $tool in
        gmp-run) record startup gmp-run $round "$(pinned "$B/bench/start_pairs" $turn \
            -w "$B/gmp-run" 1 "$B/bench/libempty.so" "" sh -c "$LOOP")" ;;
        gpumemprof) record startup gpumemprof $round "$(pinned "$B/bench/start_pairs" 300 \
            "$B/bench/libempty.so" "$PRELOAD" /bin/true)" ;;
        esac
    done
done
# the recorder's dumps, ROUNDS times (half a second both): in seven
# rounds, each interval their whole range, one dump of 25 ms among 4-9 ms
# had called the 10k dump too close to its 20 ms
for round in $(seq "$ROUNDS"); do
    "$B/bench/recorder_bench" "$W" dump | sed "s/^\([a-z0-9]*\) /recorder \1 $round /" >> "$RES"
done
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

echo "$(date -u +%Y-%m-%d), $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1), Linux $(uname -r); $ROUNDS rounds ($CHURN_ROUNDS for the churn bare and under the preloads; $LONG_ROUNDS for Memray and Fil, $("$PY" -V 2>&1) at $PY; $STARTUP_ROUNDS for start-up):"
echo
python3 "$HERE/summary.py" "$RES"
echo
[ -z "${GMP_BENCH_RESULTS:-}" ] || cp "$RES" "$GMP_BENCH_RESULTS"

# Where the time goes: the churn (1 thread) under the preload, by function.
echo
if have perf && perf record -q -o "$W/perf.data" -- env LD_PRELOAD="$PRELOAD" \
    "$B/bench/churn" 1 "$OPS" >/dev/null 2>"$W/perf.err"; then
    echo "Where the churn's time goes under the preload (perf, the 8 largest):"
    echo
    echo '```text'
    perf report -i "$W/perf.data" --stdio --no-children --sort dso,sym 2>/dev/null |
        grep -E '^ +[0-9]' | head -n 8
    echo '```'
else
    echo "perf: not run ($(head -n 1 "$W/perf.err" 2>/dev/null || echo 'not installed'))"
fi
