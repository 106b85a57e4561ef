#!/bin/sh
# demo.sh — `make demo`: run a real process into an out-of-memory and read
# the bundle it leaves, with no GPU.  $1 is the build directory.
set -eu
build=${1:-build}
dir=$(mktemp -d "${TMPDIR:-/tmp}/gmp-demo.XXXXXX")
export GMP_DUMP_DIR="$dir/oom_dumps"
export GMP_RUN_DIR="$dir/run"
export GMP_CONTEXT="make demo"
export GMP_METADATA='{"example":"oom-demo","limit_mb":512}'
echo "== running $build/examples/oom-demo (512 MiB address-space limit)"
"$build/examples/oom-demo"
bundle=$(ls -d "$GMP_DUMP_DIR"/oom_dump_* | head -n 1)
echo
echo "== gmp-inspect list $GMP_DUMP_DIR"
"$build/gmp-inspect" list "$GMP_DUMP_DIR"
echo
echo "== gmp-inspect show $bundle"
"$build/gmp-inspect" show "$bundle"
echo
echo "== gmp-inspect validate $bundle"
"$build/gmp-inspect" validate "$bundle"
echo
echo "(the bundle stays in $dir)"
