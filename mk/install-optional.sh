#!/bin/sh
# install-optional.sh PACKAGE... — for tests that need a large tool only they
# use (chromium to render a plot, prometheus's promtool): install the Debian
# packages with apt-get when we are root or have password-less sudo, within
# 5 minutes.  Exit 0 when installed, 1 otherwise (the test then skips).
set -u
if [ "$(id -u)" = 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
else
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
timeout 300 $sudo apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1 && exit 0
timeout 120 $sudo apt-get update -q >/dev/null 2>&1
timeout 300 $sudo apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1
