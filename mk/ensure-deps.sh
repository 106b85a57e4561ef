#!/bin/sh
# ensure-deps.sh — make sure the build's libraries are present (jansson for
# the tools, cmocka for the tests).  Missing ones are installed with apt-get
# when we are root or have password-less sudo; otherwise one line names them.
set -u
missing=""
for pc in jansson cmocka; do
    pkg-config --exists "$pc" 2>/dev/null || missing="$missing $pc"
done
command -v pkg-config >/dev/null 2>&1 || missing="pkg-config$missing"
[ -z "$missing" ] && exit 0

pkgs="libjansson-dev libcmocka-dev pkg-config"
if [ "$(id -u)" = 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
else
    echo "gpumemprof: missing$missing; install the Debian packages: $pkgs" >&2
    exit 1
fi
echo "gpumemprof: installing $pkgs (missing:$missing)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y -q $pkgs >/dev/null 2>&1; then
    $sudo apt-get update -q >/dev/null 2>&1
    $sudo apt-get install -y -q $pkgs >/dev/null || {
        echo "gpumemprof: apt-get could not install $pkgs" >&2
        exit 1
    }
fi
