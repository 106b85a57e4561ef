#!/bin/sh
# run.sh PROGRAMS_BUILD INSPECT TEST... — run each cmocka test program
# (even after one fails) with the programs, doubles and preload of
# PROGRAMS_BUILD and the gmp-inspect INSPECT; prints a summary, exits 1 when
# any failed.  `make test` runs it once as built, then again for the
# sanitizer builds (see the Makefile's `sanitize`).
set -u
programs=$(cd "$1" && pwd)
inspect=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
# With GMP_TEST_SAN_RUNTIME (a preload built with ASan or TSan), the
# processes under the preload write their sanitizer reports into a directory
# (test/support.c); a report there fails the test program that ran them.
logs=
if [ -n "${GMP_TEST_SAN_RUNTIME:-}" ]; then
    logs=$(mktemp -d "${TMPDIR:-/tmp}/gmp-san-XXXXXX")
    trap 'rm -rf "$logs"' EXIT
    export GMP_TEST_SAN_LOG="$logs"
fi
report="ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error:"
failed=0
for t in "$@"; do
    echo "== $t"
    bad=0
    GMP_INSPECT=$inspect GMP_TEST_FIXTURES=$here/fixtures GMP_BUILD=$programs "$t" || bad=1
    if [ -n "$logs" ]; then
        if grep -q -E "$report" "$logs"/* 2>/dev/null; then
            echo "sanitizer reports from processes under the preload of $t:"
            grep -l -E "$report" "$logs"/* | while IFS= read -r r; do cat "$r"; done
            bad=1
        fi
        rm -f "$logs"/*
    fi
    failed=$((failed + bad))
    # (for `make test`'s last line)
    [ "$bad" = 0 ] || [ -z "${GMP_TEST_FAILED_LOG:-}" ] || basename "$t" >>"$GMP_TEST_FAILED_LOG"
done
if [ "$failed" -ne 0 ]; then
    echo "$failed test program(s) failed"
    exit 1
fi
echo "all $# test programs passed"
