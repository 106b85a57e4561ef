#!/bin/sh
# torch-venv.sh — a Python with PyTorch for the tests that run the real
# torchrun, torch.multiprocessing.spawn and accelerate's launcher
# (test_distributed): PyPI's default torch wheel (used on the CPU, gloo
# between ranks), numpy and accelerate, in a venv kept outside the clone
# ($GMP_TORCH_VENV, else
# $XDG_CACHE_HOME/gpumemprof-torch, else ~/.cache/gpumemprof-torch), so a
# second run is instant and a fresh clone does not fetch 5 GB again.
# Prints the venv's python on stdout and exits 0; exits 1 with one line on
# stderr saying why when it cannot be had here (no network, no pip).
set -u
venv=${GMP_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gpumemprof-torch}
ready() { "$venv/bin/python" -c 'import torch, torch.distributed as d, numpy, accelerate; assert d.is_gloo_available()' >/dev/null 2>&1; }
if ! ready; then
    log=$(mktemp) || exit 1
    mkdir -p "$(dirname "$venv")" &&
        { [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >"$log" 2>&1; } &&
        "$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: \
            torch numpy accelerate >"$log" 2>&1
    if ! ready; then
        echo "torch-venv: no torch here ($(tail -1 "$log" 2>/dev/null))" >&2
        rm -f "$log"
        exit 1
    fi
    rm -f "$log"
fi
echo "$venv/bin/python"
