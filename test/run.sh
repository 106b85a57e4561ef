#!/bin/sh
# run.sh PROGRAMS_BUILD INSPECT TEST... — run each cmocka test program
# (even after one fails) with the programs, doubles and preload of
# PROGRAMS_BUILD and the gmp-inspect INSPECT; prints a summary, exits 1 when
# any failed.  `make test` runs it once as built, then again for the
# sanitizer builds (test binaries and tools under ASan+UBSan, the preload
# and the programs it is loaded into under UBSan).
set -u
programs=$(cd "$1" && pwd)
inspect=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
failed=0
for t in "$@"; do
    echo "== $t"
    GMP_INSPECT=$inspect GMP_TEST_FIXTURES=$here/fixtures GMP_BUILD=$programs "$t" ||
        failed=$((failed + 1))
done
if [ "$failed" -ne 0 ]; then
    echo "$failed test program(s) failed"
    exit 1
fi
echo "all $# test programs passed"
