#!/bin/sh
# debian-python.sh BUILD VERSION — a CPython newer than this machine's, for
# the tests that read the interpreter's own structures (test_held: which
# Python line holds the memory; the conformance suite: its own tests, each
# allocation reading its frames).  Debian unstable's python3.X packages, its
# test package and the C library they were built against, fetched with
# apt-get from its own lists under BUILD (the machine's sources, packages
# and dpkg state are not touched; its apt configuration, a proxy included,
# is used) and unpacked into BUILD/debian-python/VERSION/root.
# BUILD/debian-python/VERSION/python starts it on that C library: patchelf
# points the interpreter at its loader, so the subprocesses it starts of
# itself start too (without patchelf it is started through the loader).
# Kept: a second run is instant.  Exit 0 with the interpreter ready; 1,
# with one line saying why, when it cannot be had here (no network, no such
# version).
set -u
V=$2
mkdir -p "$1/debian-python" || exit 1
D=$(cd "$1/debian-python" && pwd)/$V # apt takes its directories absolute
if [ -x "$D/python" ] && "$D/python" -c 'import sys' >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
    echo "debian-python: no apt-get or dpkg-deb here"
    exit 1
fi
rm -rf "$D"
mkdir -p "$D/apt/lists/partial" "$D/apt/cache/archives/partial" "$D/apt/parts" "$D/debs" \
    "$D/root" || exit 1
echo "deb http://deb.debian.org/debian unstable main" > "$D/apt/sources.list"
: > "$D/apt/status"
unstable() { # timeout SECONDS apt-get ARGS...
    t=$1
    shift
    timeout "$t" apt-get -q -o Dir::Etc::SourceList="$D/apt/sources.list" \
        -o Dir::Etc::SourceParts="$D/apt/parts" -o Dir::State="$D/apt" \
        -o Dir::State::Lists="$D/apt/lists" -o Dir::State::status="$D/apt/status" \
        -o Dir::Cache="$D/apt/cache" -o Acquire::Languages=none \
        -o APT::Sandbox::User="$(id -un)" -o Debug::NoLocking=1 "$@"
}
if ! unstable 300 update >"$D/apt.log" 2>&1; then
    echo "debian-python: apt-get update of Debian unstable failed (see $D/apt.log)"
    exit 1
fi
# the interpreter, its standard library and the C library; then, each on
# its own (a renamed one costs only its modules), what their modules load
if ! (cd "$D/debs" && unstable 300 download "python$V-minimal" "libpython$V-minimal" \
    "libpython$V-stdlib" libc6 libexpat1 zlib1g >>"$D/apt.log" 2>&1); then
    echo "debian-python: Debian unstable has no python$V to download (see $D/apt.log)"
    exit 1
fi
for p in libssl3t64 libffi8 libbz2-1.0 liblzma5 libzstd1 libmpdec4 "libpython$V-testsuite"; do
    (cd "$D/debs" && unstable 120 download "$p" >>"$D/apt.log" 2>&1)
done
for deb in "$D"/debs/*.deb; do
    dpkg-deb -x "$deb" "$D/root" || exit 1
done
loader=
for f in "$D"/root/usr/lib/*-linux-gnu/ld-linux*.so.*; do
    [ -f "$f" ] && loader=$f && break
done
if [ -z "$loader" ]; then
    echo "debian-python: Debian's libc6 brought no loader"
    exit 1
fi
# The interpreter starts its own subprocesses (sys.executable): with
# patchelf it is made to start by itself, on that C library; else only
# through the loader
if command -v patchelf >/dev/null 2>&1 &&
    patchelf --set-interpreter "$loader" --force-rpath --set-rpath "${loader%/*}" \
        "$D/root/usr/bin/python$V" >>"$D/apt.log" 2>&1; then
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$D/root/usr/bin/python$V" >"$D/python"
else
    cat > "$D/python" <<EOF
#!/bin/sh
exec "$loader" --library-path "${loader%/*}" "$D/root/usr/bin/python$V" "\$@"
EOF
fi
chmod +x "$D/python"
rm -rf "$D/debs" "$D/apt"
if ! "$D/python" -c 'import sys' >/dev/null 2>&1; then
    echo "debian-python: Debian's python$V does not start here"
    exit 1
fi
