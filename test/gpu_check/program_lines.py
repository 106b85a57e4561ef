"""program_lines.py — cases 18 to 21 of the real-GPU check (gpu_check.py
runs them): the program's own line named for device memory in a caught
OOM, a leak, a run of two ranks under torchrun and a caught failure then a
fatal one.  Each runs on the GPU with PyTorch, and in make test against the
test doubles with a ctypes program in its place.  Only the standard
library."""
import os
import re
import subprocess
import sys

from harness import (at_line, bundles, failed, innermost_words, load, marked_line, only_metadata,
                     python_frames)


# Cases 18 and 19: the program's own lines for device memory, what the
# H200 showed missing (a caught OOM called a death and sited in the caching
# allocator; a leak's live bytes sited in alloc_block).  Each program marks
# the line to be named ("# <- the line"); with the doubles, a ctypes
# program calls the double's cudaMalloc the same way, so that the checks
# run in make test too.
CAUGHT_TORCH = r"""
import torch
def try_batch(scale):
    total = torch.cuda.mem_get_info()[1]
    return torch.empty(int(scale * total) // (2 << 20) * (2 << 20), dtype=torch.uint8, device="cuda")  # <- the line
for scale in (1.5, 1.2):
    try:
        try_batch(scale)
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
x = try_batch(0.5)
print("fitted", x.numel())
"""

CAUGHT_DOUBLE = r"""
import ctypes
cudart = ctypes.CDLL("libcudart.so.13")
def try_batch(scale):
    p = ctypes.c_void_p()
    if cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(int(scale * (1 << 30)))):  # <- the line
        raise MemoryError("no room for the batch")
    return p
for scale in (1.5, 1.2):
    try:
        try_batch(scale)
    except MemoryError:
        pass
x = try_batch(0.5)
print("fitted", x.value)
"""

LEAK_TORCH = r"""
import torch
history = []
def step(i):
    history.append(torch.empty(2 << 30, dtype=torch.uint8, device="cuda"))  # <- the line
for i in range(100000):
    step(i)
"""

LEAK_DOUBLE = r"""
import ctypes
cudart = ctypes.CDLL("libcudart.so.13")
history = []
def step(i):
    p = ctypes.c_void_p()
    if cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(64 << 20)):  # <- the line
        raise MemoryError("CUDA out of memory")
    history.append(p)
for i in range(100000):
    step(i)
"""


def caught_oom(c):
    """A device OOM the program catches, then it fits a smaller batch and
    exits 0: each bundle says the process survived (exited 0), and names
    the failing Python line, though no traceback is printed."""
    label = "18 caught OOM: survived, at its line"
    want = "exit 0; every bundle exited 0, its failed call at the marked line"
    code = CAUGHT_DOUBLE if c.doubles else CAUGHT_TORCH
    line = marked_line(code)
    rc, out, err, dumps = c.python("18_caught", code)
    found = bundles(dumps)
    problems, sites = [], []
    for b in found:
        md = load(b, "metadata.json") or {}
        if md.get("outcome") != {"state": "exited", "exit_status": 0}:
            problems.append("outcome %s" % md.get("outcome"))
        frames = python_frames(b, failed(md).get("stack_id"))
        sites.append(innermost_words(frames))
        if not at_line(frames, line, "try_batch"):
            problems.append("site")
    if rc != 0 or "fitted" not in out:
        problems.append("rc %s" % rc)
    if not found:
        problems.append("no bundle")
    c.row(label, want, "rc %s, %d bundle(s), failed at %s (marked %d)%s" % (
        rc, len(found), ", ".join(sites) or "-", line,
        " [wrong: %s]" % ", ".join(problems) if problems else ""), not problems)


def leak_held_by_line(c):
    """A loop that keeps every step's device block until the device is full:
    one bundle, and its largest live site (allocations.json's top stack) is
    the marked line, called from the loop, with nearly all of the device
    memory held."""
    label = "19 a leak held by its line"
    want = "one bundle; top site the marked line in step, >= 90% of live device bytes"
    code = LEAK_DOUBLE if c.doubles else LEAK_TORCH
    line = marked_line(code)
    rc, out, err, dumps = c.python("19_leak", code, timeout=600)
    md, why = only_metadata(dumps)
    if not md:
        return c.row(label, want, "rc %s, %s" % (rc, why), False)
    found = bundles(dumps)[0]
    allocs = load(found, "allocations.json") or {}
    top = (allocs.get("top_stacks") or [{}])[0]
    device = sum(d.get("bytes", 0) for d in allocs.get("by_device") or []
                 if isinstance(d, dict) and d.get("device", -1) >= 0)
    frames = python_frames(found, top.get("stack_id"))
    held = top.get("bytes") or 0
    ok = at_line(frames, line, "step") and device > 0 and held >= 0.9 * device
    c.row(label, want, "top site %s holds %s of %s device bytes in %s allocation(s)" % (
        innermost_words(frames),
        held, device, top.get("count")), ok)


# ---- case 20: a run of two ranks ---------------------------------------

RANK_TORCH = r"""
import time, torch, torch.distributed as dist
def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(1 << 16)
    for _ in range(10):
        dist.all_reduce(t)
    torch.zeros(1, device="cuda")  # both ranks on GPU 0
    if rank == 1:
        total = torch.cuda.mem_get_info()[1]
        x = torch.empty(2 * total, dtype=torch.uint8, device="cuda")  # <- the line
    time.sleep(60)
main()
"""

RANK_DOUBLE = r"""
import ctypes, os, time
cudart = ctypes.CDLL("libcudart.so.13")
def main():
    if os.environ["RANK"] == "1":
        p, n = ctypes.c_void_p(), ctypes.c_size_t(1 << 40)
        if cudart.cudaMalloc(ctypes.byref(p), n): raise MemoryError("CUDA out of memory")  # <- the line
    time.sleep(60)
main()
"""

# torchrun's part, where there is no torch: two ranks with its variables
# (its run id "none", as torchrun gives without --rdzv-id); the first to
# end has the other stopped by SIGTERM
LAUNCHER_STANDIN = r"""
import os, signal, subprocess, sys, time
env = dict(os.environ, WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
           MASTER_PORT="29541", TORCHELASTIC_RUN_ID="none", TORCHELASTIC_RESTART_COUNT="0")
ranks = [subprocess.Popen([sys.executable, sys.argv[1]], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
         for r in range(2)]
while all(p.poll() is None for p in ranks):
    time.sleep(0.05)
for p in ranks:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
sys.exit(max(abs(p.wait()) for p in ranks))
"""


def two_ranks(c):
    """torchrun's two gloo ranks on one GPU, rank 1's CUDA allocation
    fails (far beyond the device), torchrun stops rank 0: one bundle,
    rank 1's, of the torchrun run, failed at the marked line; and triage's
    verdict says so: rank 1 ran out of cuda:0 memory, at that line, rank 0
    left no bundle (where the build's gmp-inspect runs here; the bundles
    are kept to triage elsewhere when it does not)."""
    label = "20 two ranks on one GPU, rank 1 out"
    want = ("one bundle, rank 1's, the run's first, at the marked line; triage: "
            "1 death, rank 1 out of cuda:0 memory, rank 0 left no bundle")
    code = RANK_DOUBLE if c.doubles else RANK_TORCH
    line = marked_line(code)
    d = os.path.join(c.bin, "20_ranks")
    os.makedirs(d, exist_ok=True)
    rank_py = os.path.join(d, "rank.py")
    with open(rank_py, "w") as f:
        f.write(code)
    if c.doubles:
        launcher = os.path.join(d, "launcher.py")
        with open(launcher, "w") as f:
            f.write(LAUNCHER_STANDIN)
        argv = [sys.executable, launcher, rank_py]
    else:
        argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                "--master-port", "29541", rank_py]
    rc, out, err, dumps = c.run("20_two_ranks", argv, {"OMP_NUM_THREADS": "1"}, timeout=300)
    found = bundles(dumps)
    problems = []
    if len(found) != 1:
        problems.append("%d bundles" % len(found))
    man = (load(found[0], "manifest.json") or {}) if found else {}
    md = (load(found[0], "metadata.json") or {}) if found else {}
    frames = python_frames(found[0], failed(md).get("stack_id")) if found else []
    # torchrun with no --rdzv-id names its run "none": the run is its
    # launcher's and rendezvous's, told as torchrun's
    if man.get("rank") != 1 or not str(man.get("run", "")).startswith(("torchrun|", "launcher|")) \
            or man.get("run_first") is not True:
        problems.append("manifest rank %s run %s" % (man.get("rank"), man.get("run")))
    if failed(md).get("device") != 0 or not at_line(frames, line, "main"):
        problems.append("failed at %s" % innermost_words(frames, "-"))
    verdict = "triage not run"
    try:
        p = subprocess.run([os.path.join(c.build, "gmp-inspect"), "triage", dumps],
                           capture_output=True, text=True, timeout=60)
    except OSError as e:
        p = subprocess.CompletedProcess([], 127, "", str(e))
    if p.returncode in (0, 1, 3) and "run(s)" in p.stdout:
        said = re.search(r"\n    (rank .*)\n", p.stdout)
        verdict = said.group(1) if said else p.stdout.strip()[-300:]
        if p.returncode != 3 or " 1 out-of-memory death(s)" not in p.stdout or \
                not re.search(r"\n  run 1  torchrun run ", p.stdout) or \
                not re.search(r"rank 1 ran out of cuda:0 memory at [^\n]* at rank\.py:%d in main"
                              r"\); rank 0 left no bundle" % line, p.stdout):
            problems.append("triage")
        shown = subprocess.run([os.path.join(c.build, "gmp-inspect"), "show", found[0]],
                               capture_output=True, text=True, timeout=60) if found else p
        if not re.search(r"\nRun: +torchrun run(?! none)[ ,].*rank 1 of 2", shown.stdout):
            problems.append("show's Run: line")
    else:
        verdict = "gmp-inspect cannot run here (rc %s); triage %s elsewhere" % (
            p.returncode, dumps)
    c.row(label, want, "rc %s, %d bundle(s); %s%s" % (
        rc, len(found), verdict, " [wrong: %s]" % ", ".join(problems) if problems else ""),
        not problems)


# ---- case 21: a caught failure, then a fatal one ---------------------------

THEN_FATAL_TORCH = r"""
import torch
def probe():
    try:
        torch.empty(1 << 40, dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError:
        print("caught")
def main():
    torch.empty(2 << 40, dtype=torch.uint8, device="cuda")  # <- the line
probe()
main()
"""

THEN_FATAL_DOUBLE = r"""
import ctypes
cudart = ctypes.CDLL("libcudart.so.13")
def probe():
    try:
        p = ctypes.c_void_p()
        if cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 40)): raise MemoryError("OOM")
    except MemoryError:
        print("caught")
def main():
    p, n = ctypes.c_void_p(), ctypes.c_size_t(2 << 40)
    if cudart.cudaMalloc(ctypes.byref(p), n): raise MemoryError("CUDA out of memory")  # <- the line
probe()
main()
"""


def caught_then_fatal(c):
    """A 1 TiB request caught in probe(), then a 2 TiB one in main() that
    ends the process: two bundles, each with its own outcome: the caught
    one names the other as its death (survived), the other exited 1, its
    failed call at the marked line."""
    label = "21 caught, then a fatal failure"
    want = "2 bundles: the caught one survived (names the other), the fatal one exited 1 at its line"
    code = THEN_FATAL_DOUBLE if c.doubles else THEN_FATAL_TORCH
    line = marked_line(code)
    rc, out, err, dumps = c.python("21_then_fatal", code)
    found = bundles(dumps)
    outcomes = {os.path.basename(b): (load(b, "metadata.json") or {}).get("outcome") or {}
                for b in found}
    deaths = [n for n, o in outcomes.items() if not o.get("death_bundle")]
    survived = [n for n, o in outcomes.items() if o.get("death_bundle")]
    problems = []
    if rc != 1 or "caught" not in out:
        problems.append("rc %s" % rc)
    if len(found) != 2 or len(deaths) != 1 or len(survived) != 1:
        problems.append("%d bundle(s), %d death(s)" % (len(found), len(deaths)))
    else:
        death = os.path.join(dumps, deaths[0])
        md = load(death, "metadata.json") or {}
        frames = python_frames(death, failed(md).get("stack_id"))
        if outcomes[survived[0]].get("death_bundle") != deaths[0] or \
                outcomes[deaths[0]] != {"state": "exited", "exit_status": 1}:
            problems.append("outcomes %s" % outcomes)
        if not at_line(frames, line, "main"):
            problems.append("the death failed at %s" % innermost_words(frames, "-"))
    c.row(label, want, "rc %s, %d bundle(s), %d survived%s" % (
        rc, len(found), len(survived), " [wrong: %s]" % ", ".join(problems) if problems else ""),
        not problems)
