#!/bin/sh
# old-root.sh build|run — prints the path of an older distribution's root
# filesystem (Debian 11, by debootstrap), made the first time and kept under
# $XDG_CACHE_HOME/gpumemprof-roots (else ~/.cache/...), outside the clone:
#   build  with a C compiler and the -dev packages gmp-inspect builds with:
#          the wheel's native files are built in it (mk/wheel.sh), so that
#          they ask for nothing newer of glibc than its older versions have;
#   run    Python and its venv alone: the wheel is installed and used in it
#          (test/wheel/old_root.sh), as on a cluster's older distribution.
# Debian 10, glibc 2.28 itself, has left the mirrors; Debian 11's glibc is
# 2.31, and what we build there is checked to ask for 2.28 at most.  Needs
# root (chroot) and debootstrap; exit 77 with one line when it cannot make
# the root.
set -eu
kind=$1
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gpumemprof-roots
root=$cache/bullseye-$kind
mirror=${GMP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
case $kind in
build) packages=gcc,make,libc6-dev,pkg-config,libjansson-dev,libdw-dev,libiberty-dev,binutils,python3 ;;
run) packages=python3,python3-venv ;;
*)
    echo "usage: old-root.sh build|run" >&2
    exit 2
    ;;
esac
if [ -f "$root/.complete" ]; then
    echo "$root"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "no Debian 11 root: making one takes root (debootstrap, chroot)" >&2
    exit 77
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "no Debian 11 root: debootstrap is not installed" >&2
    exit 77
fi
mkdir -p "$cache"
rm -rf "$root"
log=$cache/bullseye-$kind.log
if ! timeout 900 debootstrap --variant=minbase --include="$packages" bullseye "$root" "$mirror" \
    >"$log" 2>&1; then
    echo "no Debian 11 root: debootstrap from $mirror failed: $(tail -1 "$log")" >&2
    rm -rf "$root"
    exit 77
fi
touch "$root/.complete"
echo "$root"
