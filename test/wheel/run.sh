#!/bin/sh
# test/wheel/run.sh BUILD — the wheel as a Python user gets it.  Builds it
# (mk/wheel.sh), installs it with pip into a fresh venv with no index (so
# nothing else comes with it), and runs what a user types: the commands pip
# made (gmp-run, gmp-inspect, gpumemprof), `python -m gpumemprof run` and
# `--preload-path`, each on a real Python process that runs out of memory,
# with the bundle it leaves checked by the installed gmp-inspect; and the
# Python recorder API (api_check.py), alone and under the preload.  The
# installed gmp-inspect must take jansson and libdw from the wheel's own
# copies, not the machine's -dev packages.  Skipped, with a line, where the
# build tools cannot be had from PyPI.
set -u
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
ok() { echo "ok    wheel: $1"; }
fail() {
    echo "FAIL  wheel: $1"
    failed=1
}

sh "$root/mk/wheel.sh" "$build" >"$work/wheel.out" 2>&1
rc=$?
if [ $rc = 77 ]; then
    echo "SKIP  wheel: $(tail -1 "$work/wheel.out")"
    exit 0
fi
if [ $rc != 0 ]; then
    cat "$work/wheel.out"
    fail "make wheel failed"
    exit 1
fi
version=$(sed -n 's/^#define GMP_VERSION_STRING "\(.*\)"$/\1/p' "$root/include/gpumemprof.h")
whl=$(tail -1 "$work/wheel.out")
case "$(basename "$whl")" in
gpumemprof-"$version"-py3-none-manylinux_2_[0-9]*_x86_64.whl) ok "built $(basename "$whl")" ;;
*) fail "the wheel's name is not gpumemprof-$version-py3-none-manylinux_2_N_x86_64: $whl" ;;
esac

venv=$work/venv
/usr/bin/python3 -m venv "$venv" >"$work/venv.log" 2>&1 &&
    "$venv/bin/pip" install -q --disable-pip-version-check --no-index "$whl" >>"$work/venv.log" 2>&1 || {
    cat "$work/venv.log"
    fail "pip install --no-index of the wheel into a fresh venv failed"
    exit 1
}
py=$venv/bin/python
cd "$work" || exit 1

# the preload inside the installed package, for LD_PRELOAD
preload=$("$py" -m gpumemprof --preload-path)
case "$preload" in
"$venv"/lib/python*/site-packages/gpumemprof/_native/libgpumemprof_preload.so)
    [ -r "$preload" ] && ok "--preload-path: the preload inside the installed package" ||
        fail "--preload-path names a file that is not there: $preload" ;;
*) fail "--preload-path is not inside the venv: $preload" ;;
esac
for cmd in "gpumemprof --version" "gmp-run --version" "gmp-inspect --version"; do
    set -- $cmd
    seen=$("$venv/bin/$1" "$2" 2>&1)
    if [ "$seen" = "$1 $version" ]; then ok "$cmd: $seen"; else fail "$cmd said: $seen"; fi
done

# gmp-inspect's libraries beyond glibc come from the wheel
inspect_bin=$(dirname "$preload")/gmp-inspect
deps=$(ldd "$inspect_bin" 2>&1)
if printf '%s\n' "$deps" | grep -q "not found"; then
    fail "the installed gmp-inspect misses libraries: $(printf '%s\n' "$deps" | grep 'not found' | tr -d '\t')"
elif ! printf '%s\n' "$deps" | grep -q "libjansson.*=> $venv/.*gpumemprof.libs/" ||
    ! printf '%s\n' "$deps" | grep -q "libdw.*=> $venv/.*gpumemprof.libs/"; then
    fail "the installed gmp-inspect does not take jansson and libdw from the wheel: $deps"
else
    ok "gmp-inspect takes jansson and libdw from the wheel's own copies"
fi

# one MemoryError, one bundle, checked by the installed tools
oom='import sys
sys.stderr.write("allocating\n")
block = bytearray(1 << 45)'
printf '%s\n' "$oom" >"$work/train.py"
check_one_bundle() { # NAME DIR RC
    n=$(ls -d "$2"/oom_dump_* 2>/dev/null | wc -l)
    if [ "$3" != 1 ] || [ "$n" != 1 ]; then
        fail "$1: exit $3 (1 expected) and $n bundle(s) (1 expected)"
        return
    fi
    b=$(ls -d "$2"/oom_dump_*)
    if ! "$venv/bin/gmp-inspect" validate "$b" >"$work/validate.out" 2>&1; then
        fail "$1: the bundle does not validate: $(tail -1 "$work/validate.out")"
    elif ! "$venv/bin/gmp-inspect" show "$b" 2>&1 | grep -q '^Exception: *MemoryError$'; then
        fail "$1: show does not name the MemoryError"
    else
        ok "$1: one bundle, valid, the MemoryError named"
    fi
}
"$venv/bin/gmp-run" --dump-dir "$work/d1" -- "$py" "$work/train.py" >/dev/null 2>&1
check_one_bundle "gmp-run python train.py" "$work/d1" $?
"$py" -m gpumemprof run --dump-dir "$work/d2" "$work/train.py" >/dev/null 2>&1
check_one_bundle "python -m gpumemprof run train.py" "$work/d2" $?
GMP_DUMP_DIR=$work/d3 LD_PRELOAD=$preload "$py" "$work/train.py" >/dev/null 2>&1
check_one_bundle "LD_PRELOAD=\$(python -m gpumemprof --preload-path)" "$work/d3" $?

# the seed's Python API on the C recorder, then the same under the preload;
# the recorder leaves no ring file behind
mkdir -p "$work/run"
GMP_RUN_DIR=$work/run "$py" "$root/test/wheel/api_check.py" "$venv/bin/gmp-inspect" "$work/api" ||
    failed=1
left=$(find "$work/run" -type f | head -3)
[ -z "$left" ] && ok "the Python recorder leaves no ring file behind" ||
    fail "ring files left behind: $left"
mkdir -p "$work/api_preload"
GMP_DUMP_DIR=$work/api_preload/dumps GMP_API_CHECK_UNDER_PRELOAD=1 LD_PRELOAD=$preload \
    "$py" "$root/test/wheel/api_check.py" "$venv/bin/gmp-inspect" "$work/api_preload" ||
    failed=1

"$py" -m gpumemprof frobnicate >/dev/null 2>"$work/bad.err"
rc=$?
[ $rc = 2 ] && grep -q "unknown command" "$work/bad.err" && ok "an unknown command: exit 2 and a line" ||
    fail "an unknown command: exit $rc, $(cat "$work/bad.err")"
exit $failed
