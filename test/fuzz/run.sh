#!/bin/sh
# run.sh BUILD SECONDS — run every libFuzzer harness for SECONDS at once
# (side by side: they share the machine's cores), each from its kept seed
# corpus under test/fuzz/<name>/ plus what earlier runs found in
# BUILD/fuzz/corpus-<name>/.  A crash, a leak, a timeout or an out-of-memory
# input fails the run; its reproducer is named in the output.
set -u
B=$1
S=$2
here=$(dirname "$0")
pids=""
for h in bundle ring config; do
    mkdir -p "$B/fuzz/corpus-$h" "$B/fuzz/artifacts-$h"
    dict=""
    [ -f "$here/$h.dict" ] && dict="-dict=$here/$h.dict"
    "$B/fuzz/fuzz_$h" "$B/fuzz/corpus-$h" "$here/$h" $dict -max_total_time="$S" -timeout=10 \
        -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -close_fd_mask=3 \
        -artifact_prefix="$B/fuzz/artifacts-$h/" >"$B/fuzz/fuzz_$h.log" 2>&1 &
    pids="$pids $!:$h"
done
failed=0
for p in $pids; do
    pid=${p%%:*}
    h=${p#*:}
    if wait "$pid"; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/fuzz/fuzz_$h.log")
        echo "fuzz_$h: ${runs:-?} inputs in ${S} s, no crash, leak or timeout"
    else
        failed=$((failed + 1))
        echo "fuzz_$h FAILED (log $B/fuzz/fuzz_$h.log):"
        grep -E "ERROR|SUMMARY|Test unit written|==[0-9]+==" "$B/fuzz/fuzz_$h.log" | head -20
    fi
done
[ "$failed" -eq 0 ]
