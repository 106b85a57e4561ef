#!/bin/sh
# test/wheel/old_root.sh WHEEL — the wheel on an older distribution, as on a
# cluster that runs one: in Debian 11's root filesystem (mk/old-root.sh run:
# Python 3.9 and its venv, no compiler, no jansson, no libdw), pip installs
# it with no index, and gmp-run, the preload, gmp-inspect and the Python
# recorder run there on a Python process that runs out of memory.  Run in a
# mount namespace of its own (unshare), so the /proc mounted for it goes
# with it.  Skipped, with a line, where no such root can be made.
set -u
whl=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
old=$(sh "$root/mk/old-root.sh" run 2>&1) || {
    echo "SKIP  wheel: on Debian 11: $old"
    exit 0
}
command -v unshare >/dev/null 2>&1 || {
    echo "SKIP  wheel: on Debian 11: unshare (util-linux) is not installed"
    exit 0
}
rm -rf "$old/work"
mkdir -p "$old/work"
cp "$whl" "$old/work/"
cat >"$old/work/check.sh" <<'EOF'
set -eu
cd /work
python3 -m venv venv
venv/bin/pip install -q --disable-pip-version-check --no-index ./gpumemprof-*.whl
venv/bin/gmp-inspect --version
printf 'block = bytearray(1 << 45)\n' >train.py
rc=0
venv/bin/gmp-run --dump-dir dumps -- venv/bin/python train.py 2>run.err || rc=$?
echo "exit $rc"
venv/bin/gmp-inspect show dumps 2>/dev/null | sed -n 's/^Exception: *//p'
venv/bin/python -c 'import gpumemprof.oom_flight_recorder as r; print(r.__name__)'
echo $(ls venv/share/man/man1) $(ls venv/share/bash-completion/completions)
EOF
unshare -m sh -c 'mount -t proc proc "$1/proc" && chroot "$1" env -i PATH=/usr/bin:/bin HOME=/work sh /work/check.sh' \
    sh "$old" >"$old/work/out" 2>&1
rc=$?
want="gmp-inspect $(sed -n 's/^#define GMP_VERSION_STRING "\(.*\)"$/\1/p' "$root/include/gpumemprof.h")
exit 1
MemoryError
gpumemprof.oom_flight_recorder
gmp-inspect.1 gmp-run.1 gmp-inspect.bash gmp-run.bash"
if [ $rc = 0 ] && [ "$(cat "$old/work/out")" = "$want" ]; then
    echo "ok    wheel: on Debian 11 (glibc $(chroot "$old" ldd --version | sed -n '1s/.* //p')): installed with no index; gmp-run, the preload and gmp-inspect name the MemoryError"
    rm -rf "$old/work"
    exit 0
fi
echo "FAIL  wheel: on Debian 11: exit $rc:"
cat "$old/work/out" "$old/work/run.err" 2>/dev/null
exit 1
