#!/usr/bin/env python3
"""gpu_check.py — the real-GPU check: `make gpu-check` runs it.

Runs each case in its own process under the preload on a machine with an
NVIDIA GPU (PyTorch, CuPy, JAX, nvcc there; no network), compares what the
bundles say with what should happen, prints one table (case, expected, seen,
pass/fail) and writes it as Markdown and JSON, with every bundle made, under
$OUT (or --out).  Exits 1 when a case fails, 0 otherwise.

Without a GPU it says so in one line and exits 0.  With --doubles DIR it
runs the cases that are C programs, and cases 18 to 21 with a ctypes
program in place of PyTorch, against the test doubles in DIR (the
libcudart/libcuda stand-ins of test/doubles): `make test` does, so that the
checks themselves are exercised where no GPU is.

This file holds the list of cases and the table; the cases are
frameworks.py's (1 to 17) and program_lines.py's (18 to 21), what they
share harness.py's.  Only the standard library: the GPU machine has
python3 and nothing to install from.  Bundles are read with json, as any
user would read them.
"""
import argparse
import ctypes
import json
import os
import sys
import time

from frameworks import (killed_under_gmp_run, leak_check, memory_viz, one_bundle_case,
                        other_process, overhead, profiler_with_torch, static_cudart,
                        torch_fits, torch_history, torch_oom, torch_recovers,
                        tracker_with_torch, CUPY_OOM, JAX_OOM)
from harness import GIB, ROOT, Check, build_programs, failed
from program_lines import caught_oom, caught_then_fatal, leak_held_by_line, two_ranks


def cases(c, only):
    """The cases, by number; `only` (a set of numbers, or empty for all)
    picks some: a case fixed in the preload is run again alone."""
    progs = build_programs(c)
    gpu = not c.doubles

    def want(n, needs_gpu=False):
        return (not only or n in only) and (gpu or not needs_gpu)

    if want(1, True):
        torch_oom(c, "1_torch", "1 PyTorch OOM, caching allocator", api=("cudaMalloc",))
    if want(2, True) or want(13, True):
        torch_fits(c)
    if want(3, True):
        torch_recovers(c)
    if want(4, True):
        torch_oom(c, "4_expandable", "4 PyTorch OOM, expandable segments",
                  {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                   "CHECK_BEYOND_FREE": str(GIB)},
                  api=("cuMemCreate", "cuMemMap"), exact=False)
    if want(5, True):
        torch_oom(c, "5_async", "5 PyTorch OOM, cudaMallocAsync backend",
                  {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}, exact=False)
    if want(6, True):
        other_process(c)
    if want(7):
        static_cudart(c, progs, "7 static cudart until OOM")
    if want(8, True):
        one_bundle_case(c, "8_cupy", "8 CuPy OOM, default pool", CUPY_OOM)
    if want(9, True):
        one_bundle_case(c, "9_jax_platform", "9 JAX OOM, platform allocator", JAX_OOM,
                        {"XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                         "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"},
                        ("from the allocation", lambda md: bool(failed(md))))
        one_bundle_case(c, "9_jax_default", "9 JAX OOM, BFC pool (defaults)", JAX_OOM, None,
                        ("from its message",
                         lambda md: str(md.get("reason", "")).startswith("message_pattern")))
    if want(10, True):
        torch_oom(c, "10_torch_cupti", "10 case 1 with GMP_CUDA_MODE=cupti",
                  {"GMP_CUDA_MODE": "cupti"}, api=("cudaMalloc",))
    if want(10):
        static_cudart(c, progs, "10 case 7 with GMP_CUDA_MODE=cupti", {"GMP_CUDA_MODE": "cupti"})
    if want(11):
        leak_check(c, progs)
    if want(12):
        killed_under_gmp_run(c, progs)
    if want(13):
        overhead(c, progs)
    if want(14, True):
        tracker_with_torch(c)
    if want(16, True):
        torch_history(c)
    if want(17, True):
        profiler_with_torch(c)
    if want(18):
        caught_oom(c)
    if want(19):
        leak_held_by_line(c)
    if want(20):
        two_ranks(c)
    if want(21):
        caught_then_fatal(c)
    if want(15, True):  # after 19: its bundle is the snapshot's, unless one is given
        memory_viz(c)


# ---- the machine ------------------------------------------------------------

def gpu_here():
    """(True, description) when libcuda sees a device, else (False, why not)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return False, "no libcuda.so.1 (%s)" % e
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return False, "libcuda sees no device"
    name = ctypes.create_string_buffer(256)
    dev = ctypes.c_int(0)
    cuda.cuDeviceGet(ctypes.byref(dev), 0)
    cuda.cuDeviceGetName(name, 256, dev)
    version = ctypes.c_int(0)
    cuda.cuDriverGetVersion(ctypes.byref(version))
    return True, "%s, CUDA driver %d.%d" % (name.value.decode(errors="replace"),
                                            version.value // 1000, version.value % 1000 // 10)


def write_table(c, machine, seconds):
    md = ["# gpu-check: %s, %s, %.0f s" % (machine, time.strftime("%Y-%m-%d"), seconds), "",
          "| case | expected | seen | result |", "| --- | --- | --- | --- |"]
    md += ["| %s | %s | %s | %s |" % (r["case"], r["expected"], r["seen"].replace("|", "/"),
                                      r["status"]) for r in c.rows]
    with open(os.path.join(c.out, "gpu_check.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(c.out, "gpu_check.json"), "w") as f:
        json.dump({"machine": machine, "date": time.strftime("%Y-%m-%d"), "seconds": seconds,
                   "cases": c.rows}, f, indent=2)


def main():
    ap = argparse.ArgumentParser(description="The real-GPU check of gpumemprof.")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.environ.get("OUT") or None)
    ap.add_argument("--doubles", help="run the C cases against the test doubles in DIR")
    ap.add_argument("--only", default="", help="the cases to run, by number: 1,7,10")
    a = ap.parse_args()
    try:
        only = {int(n) for n in a.only.split(",") if n.strip()}
    except ValueError:
        ap.error("--only takes case numbers, such as 1,7,10")
    if a.doubles:
        machine = "test doubles (%s)" % a.doubles
    else:
        ok, machine = gpu_here()
        if not ok:
            print("gpu-check: no GPU here (%s); nothing run" % machine)
            return 0
    out = a.out or os.path.join(a.build, "gpu-check")
    c = Check(a.build, out, a.doubles)
    for need in (c.preload, c.gmp_run):
        if not os.access(need, os.R_OK):
            print("gpu-check: %s is missing: build it first (make gpu-check)" % need)
            return 1
    print("gpu-check on %s; results in %s" % (machine, out), flush=True)
    start = time.time()
    cases(c, only)
    write_table(c, machine, time.time() - start)
    failed_rows = [r for r in c.rows if r["status"] == "fail"]
    print("gpu-check: %d passed, %d failed, %d skipped (%s)" % (
        sum(r["status"] == "pass" for r in c.rows), len(failed_rows),
        sum(r["status"] == "skip" for r in c.rows), os.path.join(out, "gpu_check.md")))
    return 1 if failed_rows else 0


if __name__ == "__main__":
    sys.exit(main())
