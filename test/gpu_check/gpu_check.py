#!/usr/bin/env python3
"""gpu_check.py — the real-GPU check: `make gpu-check` runs it.

Runs each case in its own process under the preload on a machine with an
NVIDIA GPU (PyTorch, CuPy, JAX, nvcc there; no network), compares what the
bundles say with what should happen, prints one table (case, expected, seen,
pass/fail) and writes it as Markdown and JSON, with every bundle made, under
$OUT (or --out).  Exits 1 when a case fails, 0 otherwise.

Without a GPU it says so in one line and exits 0.  With --doubles DIR it
runs the cases that are C programs, and cases 18 and 19 with a ctypes
program in place of PyTorch, against the test doubles in DIR (the
libcudart/libcuda stand-ins of test/doubles): `make test` does, so that the
checks themselves are exercised where no GPU is.

Only the standard library: the GPU machine has python3 and nothing to
install from.  Bundles are read with json, as any user would read them.
"""
import argparse
import ctypes
import glob
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1 << 20
GIB = 1 << 30
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")


class Check:
    """What the cases share: where things are, how a case is run."""

    def __init__(self, build, out, doubles):
        self.build = os.path.abspath(build)
        self.out = os.path.abspath(out)
        self.doubles = os.path.abspath(doubles) if doubles else None
        self.preload = os.path.join(self.build, "libgpumemprof_preload.so")
        self.gmp_run = os.path.join(self.build, "gmp-run")
        self.bin = os.path.join(self.out, "bin")
        self.rows = []
        self.step_ratio = None  # case 2's, for case 13
        os.makedirs(self.bin, exist_ok=True)

    def env(self, dump_dir, extra=None, preload=True):
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("GMP_") and k != "GMP_FAKE_DEVICE_BYTES":
                del e[k]
        e.pop("LD_PRELOAD", None)
        if preload:
            e["LD_PRELOAD"] = self.preload
        e["GMP_DUMP_DIR"] = dump_dir
        if self.doubles:
            e["LD_LIBRARY_PATH"] = self.doubles
        e.update(extra or {})
        return e

    def case_dir(self, name):
        d = os.path.join(self.out, "cases", name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return d

    def run(self, name, argv, extra=None, timeout=240, preload=True):
        """Runs argv under the preload; returns (rc, stdout, stderr, dump dir)."""
        d = self.case_dir(name)
        dumps = os.path.join(d, "dumps")
        try:
            p = subprocess.run(argv, env=self.env(dumps, extra, preload), capture_output=True,
                               text=True, timeout=timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as t:
            rc, out, err = "timeout", t.stdout or "", t.stderr or ""
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
            err = err.decode(errors="replace") if isinstance(err, bytes) else err
        with open(os.path.join(d, "stdout.txt"), "w") as f:
            f.write(out)
        with open(os.path.join(d, "stderr.txt"), "w") as f:
            f.write(err)
        return rc, out, err, dumps

    def python(self, name, code, extra=None, timeout=240, preload=True):
        return self.run(name, [sys.executable, "-c", code], extra, timeout, preload)

    def row(self, case, expected, seen, ok):
        status = "pass" if ok is True else "fail" if ok is False else ok
        self.rows.append({"case": case, "expected": expected, "seen": seen, "status": status})
        print("%-6s %-44s %s" % (status, case, seen), flush=True)


# ---- reading bundles ------------------------------------------------------

def bundles(dumps, prefix="oom_dump_"):
    return sorted(glob.glob(os.path.join(dumps, prefix + "*")))


def load(bundle, name):
    try:
        with open(os.path.join(bundle, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def only_metadata(dumps):
    """(metadata of the one bundle, None) or (None, what was found instead)."""
    found = bundles(dumps)
    if len(found) != 1:
        return None, "%d bundles" % len(found)
    md = load(found[0], "metadata.json")
    return (md, None) if isinstance(md, dict) else (None, "metadata.json unreadable")


def failed(md):
    fr = md.get("failed_request") if md else None
    return fr if isinstance(fr, dict) else {}


def device0(md):
    for s in (md or {}).get("device_state") or []:
        if isinstance(s, dict) and s.get("backend") == "cuda" and s.get("device") == 0:
            return s
    return {}


def near(a, b, rel):
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and b and \
        abs(a - b) <= rel * abs(b)


def tried_to_allocate(err):
    """Bytes in PyTorch's "Tried to allocate 1.50 GiB", with the message's rounding."""
    m = re.search(r"Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB|TiB)", err)
    if not m:
        return None, None
    unit = {"B": 1, "KiB": 1 << 10, "MiB": MIB, "GiB": GIB, "TiB": 1 << 40}[m.group(2)]
    return float(m.group(1)) * unit, 0.005 * unit


def live_from_events(bundle):
    """Device addresses allocated and not freed, by the bundle's events."""
    live = {}
    for ev in load(bundle, "events.json") or []:
        if not isinstance(ev, dict) or ev.get("device_id", -1) < 0:
            continue
        if ev.get("event_type") == "alloc":
            live[ev.get("address")] = ev.get("size")
        elif ev.get("event_type") == "free":
            live.pop(ev.get("address"), None)
    return live


def through_cupti(dumps):
    """Events of the one bundle that CUPTI recorded (flag 1), of all."""
    found = bundles(dumps)
    events = [e for e in (load(found[0], "events.json") or []) if isinstance(e, dict)] \
        if len(found) == 1 else []
    return sum(e.get("flags") == 1 for e in events), len(events)


def printed(out, word):
    """{address: size} of the lines "WORD ADDRESS SIZE" a program printed."""
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^%s (0x[0-9a-f]+) (\d+)$" % word, out, re.M)}


# ---- the programs --------------------------------------------------------

def build_programs(c):
    """C programs, as argv lists: prebuilt against the doubles, else built
    here against CUDA.  NVIDIA's static cudart needs a real driver (it asks
    the double for entry points it lacks): with the doubles, the program
    that allocates 256 MiB until OOM is gpu_oom's until-oom."""
    progs = {}
    if c.doubles:
        for name, path, args in (("held", "test/gpu/held", []),
                                 ("static_cudart", "test/gpu/gpu_oom_cuda", ["until-oom"]),
                                 ("pairs", "bench/device_pairs", [])):
            p = os.path.join(c.build, path)
            if os.access(p, os.X_OK):
                progs[name] = [p] + args
        return progs
    lib = os.path.join(CUDA_HOME, "lib64")
    for name, src in (("held", "test/gpu/held.c"), ("pairs", "bench/device_pairs.c")):
        dst = os.path.join(c.bin, name)
        cmd = [os.environ.get("CC", "cc"), "-O2", "-o", dst, os.path.join(ROOT, src),
               "-L" + lib, "-Wl,-rpath," + lib, "-lcudart", "-ldl"]
        if subprocess.run(cmd, capture_output=True).returncode == 0:
            progs[name] = [dst]
    nvcc = os.path.join(CUDA_HOME, "bin", "nvcc")
    dst = os.path.join(c.bin, "static_cudart")
    if os.access(nvcc, os.X_OK) and subprocess.run(
            [nvcc, "-o", dst, os.path.join(ROOT, "test/gpu/static_cudart.cu")],
            capture_output=True).returncode == 0:
        progs["static_cudart"] = [dst]
    return progs


# ---- the cases ------------------------------------------------------------

# CHECK_REQUEST: the request as a fraction of the device (default 2: far
# beyond it); CHECK_BEYOND_FREE: so many bytes more than is free instead, so
# that expandable segments map until the memory runs out (a fraction of the
# total may fit: an H100 has 99.4% of it free)
TORCH_OOM = r"""
import json, os, torch
free, total = torch.cuda.mem_get_info()
beyond = os.environ.get("CHECK_BEYOND_FREE")
n = free + int(beyond) if beyond else int(float(os.environ.get("CHECK_REQUEST", "2")) * total)
n = n // (2 << 20) * (2 << 20)
print(json.dumps({"free": free, "total": total, "request": n}), flush=True)
torch.empty(n, dtype=torch.uint8, device="cuda")
"""


def torch_oom(c, case, label, extra=None, api=None, exact=True):
    rc, out, err, dumps = c.python(case, TORCH_OOM, extra)
    try:
        before = json.loads(out.splitlines()[0])
    except (IndexError, ValueError):
        return c.row(label, "one bundle", "no start line (rc %s): %s" % (rc, err[-300:]), False)
    md, why = only_metadata(dumps)
    if not md:
        return c.row(label, "one bundle", why, False)
    fr, ds = failed(md), device0(md)
    seen = "api %s size %s; free %s/%s (torch %d/%d); exception %r" % (
        fr.get("api"), fr.get("size"), ds.get("free"), ds.get("total"), before["free"],
        before["total"], (md.get("exception_message") or "")[:60])
    problems = []
    if api and fr.get("api") not in api:
        problems.append("api")
    if exact:
        want, slack = tried_to_allocate(err)
        if fr.get("size") != before["request"]:
            problems.append("size")
        if want is None or abs(want - before["request"]) > slack:
            problems.append("torch's message")
    if "out of memory" not in (md.get("exception_message") or "").lower():
        problems.append("exception")
    if (extra or {}).get("GMP_CUDA_MODE") == "cupti":
        cupti, total = through_cupti(dumps)
        seen += "; %d of %d events through CUPTI" % (cupti, total)
        if not cupti:
            problems.append("not through CUPTI")
    if ds.get("total") != before["total"] or (exact and not near(ds.get("free"), before["free"],
                                                                   0.01)):
        problems.append("device_state")
    c.row(label, "one bundle, the request's size, torch's message, free/total within 1%"
          if exact else "one bundle, torch's message",
          seen + ("" if not problems else " [wrong: %s]" % ", ".join(problems)), not problems)


TRAIN = r"""
import os, time, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                        torch.nn.Linear(4096, 4096)).cuda()
opt = torch.optim.SGD(m.parameters(), lr=1e-3)
x = torch.randn(256, 4096, device="cuda")
times = []
for step in range(int(os.environ.get("CHECK_STEPS", "300"))):
    torch.cuda.synchronize(); t = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = m(x).square().mean(); loss.backward(); opt.step()
    torch.cuda.synchronize(); times.append(time.perf_counter() - t)
print(sorted(times[50:])[len(times[50:]) // 2])
"""


def torch_fits(c):
    label = "2 training loop that fits"
    ratios, bundles_seen, lines = [], 0, ""
    # one run's median step differs from the next by up to 6% on an H100
    # (bare against bare); the median of 9 pairs' ratios steadies that
    for i in range(9):
        runs = {}
        for preload in ((False, True) if i % 2 == 0 else (True, False)):
            rc, out, err, dumps = c.python("2_train_%d_%d" % (i, preload), TRAIN,
                                           {"CHECK_STEPS": "800"}, preload=preload)
            try:
                runs[preload] = float(out.split()[-1])
            except (IndexError, ValueError):
                return c.row(label, "runs", "rc %s: %s" % (rc, err[-300:]), False)
            if preload:
                bundles_seen += len(bundles(dumps))
                lines += "".join(l for l in err.splitlines(True) if "gpumemprof" in l)
        ratios.append(runs[True] / runs[False])
    c.step_ratio = statistics.median(ratios)
    c.row(label, "no bundle, no stderr line, step time <= 1.01x",
          "%d bundles, %d lines, step %.3fx (%s)" % (bundles_seen, lines.count("\n"),
                                                      c.step_ratio,
                                                      " ".join("%.3f" % r for r in ratios)),
          bundles_seen == 0 and not lines and c.step_ratio <= 1.01)


RECOVER = r"""
import torch
free, total = torch.cuda.mem_get_info()
step = 256 << 20
held = [torch.empty(step, dtype=torch.uint8, device="cuda") for _ in range(int(free * 0.8) // step)]
del held                      # in the caching allocator's cache now
torch.empty(int(free * 0.5) // (2 << 20) * (2 << 20), dtype=torch.uint8, device="cuda")
print("ok", torch.cuda.memory_reserved())
"""


def torch_recovers(c):
    rc, out, err, dumps = c.python("3_recover", RECOVER)
    n = len(bundles(dumps))
    c.row("3 caching-allocator retry that recovers", "exit 0, no bundle",
          "exit %s, %d bundles" % (rc, n), rc == 0 and out.startswith("ok") and n == 0)


HOLDER = r"""
import os, sys, time, torch
x = torch.empty(8 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("ready", os.getpid(), flush=True)
time.sleep(600)
"""


def gpu_used_mib():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                              "-i", "0"], capture_output=True, text=True, timeout=30).stdout
        return int(out.split()[0])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


def other_process(c):
    label = "6 another process holds memory"
    before = gpu_used_mib()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True,
                              env=c.env("/nonexistent", preload=False))
    try:
        line = holder.stdout.readline()
        time.sleep(1)
        after = gpu_used_mib()
        if not line.startswith("ready") or before is None or after is None:
            return c.row(label, "holder's bytes", "holder did not start or no nvidia-smi", False)
        held = (after - before) * MIB
        rc, out, err, dumps = c.python("6_other", TORCH_OOM)
        md, why = only_metadata(dumps)
        ds = device0(md)
        c.row(label, "other_processes_bytes within 1%% of the holder's %d MiB" % (held // MIB),
              why or "other_processes_bytes %s (%s)" % (ds.get("other_processes_bytes"),
                                                        ds.get("other_processes_source")),
              md is not None and near(ds.get("other_processes_bytes"), held, 0.01))
    finally:
        holder.kill()
        holder.wait()


def static_cudart(c, progs, label, extra=None):
    if "static_cudart" not in progs:
        return c.row(label, "one bundle of 256 MiB", "no nvcc here", "skip")
    rc, out, err, dumps = c.run(label.split()[0] + "_static", progs["static_cudart"], extra)
    md, why = only_metadata(dumps)
    fr = failed(md)
    seen = "exit %s, %s" % (rc, why or "api %s size %s" % (fr.get("api"), fr.get("size")))
    ok = rc == 3 and md is not None and fr.get("size") == 256 * MIB
    if (extra or {}).get("GMP_CUDA_MODE") == "cupti":
        cupti, total = through_cupti(dumps)
        seen += ", %d of %d events through CUPTI" % (cupti, total)
        ok = ok and cupti > 0
    c.row(label, "exit 3, one bundle, failed request 256 MiB" +
          (", recorded through CUPTI" if extra else ""), seen, ok)


def one_bundle_case(c, case, label, code, extra=None, want=None):
    rc, out, err, dumps = c.python(case, code, extra)
    if "No module named" in err:
        return c.row(label, "one bundle", "not importable here", "skip")
    md, why = only_metadata(dumps)
    fr = failed(md)
    seen = why or "reason %s, api %s size %s" % (md.get("reason"), fr.get("api"), fr.get("size"))
    c.row(label, "one bundle" + (", " + want[0] if want else ""), seen,
          md is not None and (not want or want[1](md)))


CUPY_OOM = r"""
import cupy
free, total = cupy.cuda.runtime.memGetInfo()
cupy.empty(2 * total, dtype=cupy.uint8)
"""

JAX_OOM = r"""
import jax, jax.numpy as jnp
total = (jax.devices()[0].memory_stats() or {}).get("bytes_limit") or (200 << 30)
jnp.ones((4 * total,), dtype=jnp.uint8).block_until_ready()
"""


def leak_check(c, progs):
    label = "11 leak check lists the two left"
    if "held" not in progs:
        return c.row(label, "two leaks", "program not built", False)
    rc, out, err, dumps = c.run("11_leak", progs["held"] + ["leak"], {"GMP_LEAK_CHECK": "1"})
    left = printed(out, "left")
    reports = bundles(dumps, "leak_report_")
    leaks = load(reports[0], "leaks.json") if len(reports) == 1 else None
    listed = {a.get("address"): a.get("size") for a in (leaks or {}).get("allocations", [])
              if isinstance(a, dict)}
    c.row(label, "exactly the two allocations left",
          "%d reports, listed %s, left %s" % (len(reports), sorted(listed), sorted(left)),
          rc == 0 and len(left) == 2 and listed == left)


def killed_under_gmp_run(c, progs):
    label = "12 gmp-run, SIGKILLed holder"
    if "held" not in progs:
        return c.row(label, "one bundle", "program not built", False)
    d = c.case_dir("12_killed")
    dumps = os.path.join(d, "dumps")
    env = c.env(dumps, preload=False)
    env["GMP_PRELOAD_LIBRARY"] = c.preload
    run = subprocess.Popen([c.gmp_run, "--dump-dir", dumps, "--"] + progs["held"] + ["wait"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out = ""
    for line in run.stdout:
        out += line
        if line.startswith("ready"):
            break
    try:
        os.kill(int(out.split("ready")[1].split()[0]), signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        run.kill()
    rest, err = run.communicate(timeout=120)
    with open(os.path.join(d, "stderr.txt"), "w") as f:
        f.write(err)
    found = bundles(dumps)
    live = live_from_events(found[0]) if len(found) == 1 else {}
    held = printed(out, "alloc")
    md = load(found[0], "metadata.json") if len(found) == 1 else {}
    c.row(label, "one bundle, reason SIGKILL, its three live allocations",
          "%d bundles, reason %s, live %s of %s" % (len(found), (md or {}).get("reason"),
                                                   len(set(live) & set(held)), len(held)),
          len(found) == 1 and (md or {}).get("reason") == "SIGKILL" and len(held) == 3 and
          all(live.get(a) == s for a, s in held.items()))


def pinned(argv):
    """argv on one CPU where taskset is there: a process that moves between
    a VM's CPUs mid-run times what the other guests do."""
    cpu = (os.cpu_count() or 1) - 1
    return (["taskset", "-c", str(cpu)] + argv) if shutil.which("taskset") else argv


def pair_rounds(c, name, argv, rounds, extra=None):
    """Rounds of bare, preloaded, bare again runs of a pairs program: each
    preloaded run against the mean of the two bare ones it sits between (a
    drift of the GPU's clocks cancels), and the second bare run against the
    first (the noise such a ratio has with no preload at all).  (ratios,
    controls, ns added, last bare ns) or a string saying what went wrong."""
    ratios, controls, added = [], [], []
    for i in range(rounds):
        t = []
        for n, preload in enumerate((False, True, False)):
            rc, out, err, dumps = c.run("%s_%d_%d" % (name, i, n), pinned(argv),
                                        dict({"GMP_STACKS": "0", "GMP_WATCHDOG": "0"},
                                             **(extra or {})), preload=preload)
            try:
                t.append(float(out.split()[-1]))
            except (IndexError, ValueError):
                return "rc %s: %s" % (rc, err[-200:])
        bare = (t[0] + t[2]) / 2
        ratios.append(t[1] / bare)
        controls.append(t[2] / t[0])
        added.append(t[1] - bare)
    return ratios, controls, added, bare


def spread(values, fmt="%.3f"):
    return (fmt + "x (" + fmt + "-" + fmt + ")") % (
        statistics.median(values), min(values), max(values))


def overhead(c, progs):
    """The preload's cost on a real driver's cudaMalloc/cudaFree pair and on a
    training step (case 2's), both <= 1.01x.  A driver's pair varies from one
    process to the next by far more than the preload adds, so the bare
    against bare ratio is printed beside it; and where the build has the
    pairs program of the bench with its cudart double, the preload's own
    work a pair is timed on this CPU against that double (nanoseconds, not
    the driver's microseconds) and put against the driver's bare pair."""
    label = "13 cudaMalloc/cudaFree pair"
    want = "<= 1.01x"
    if "pairs" not in progs:
        return c.row(label, want, "program not built", False)
    got = pair_rounds(c, "13_pairs", progs["pairs"] + ["10500"], 15)
    if isinstance(got, str):
        return c.row(label, want, got, False)
    ratios, controls, added, bare = got
    r = statistics.median(ratios)
    seen = "%s, %+.0f ns a pair (%.0f ns bare); bare against bare %s; 15 rounds" % (
        spread(ratios), statistics.median(added), bare, spread(controls))
    ok = r <= 1.01
    double = os.path.join(c.build, "bench", "device_pairs")
    doubles = os.path.join(c.build, "test", "doubles")
    if not c.doubles and os.access(double, os.X_OK) and os.path.isdir(doubles):
        own = pair_rounds(c, "13_own", [double, "2100000"], 11, {"LD_LIBRARY_PATH": doubles})
        if not isinstance(own, str):
            # what the preload adds is its own work: at most 1% of the
            # driver's pair, and no more seen on the driver than bare
            # against bare varies
            work = statistics.median(own[2])
            seen += "; the preload's own work %+.0f ns a pair (%s against the double), " \
                "%.4fx of the driver's pair" % (work, spread(own[0]), 1 + work / bare)
            ok = 1 + work / bare <= 1.01 and r <= max(1.01, max(controls))
    # a double allocates in nanoseconds, the driver in microseconds: a ratio
    # against the double alone is no measure of what a real program pays
    c.row(label, want, seen, "skip" if c.doubles else ok)
    if c.step_ratio is not None:
        c.row("13 forward/backward step", want, "%.3fx (case 2)" % c.step_ratio,
              c.step_ratio <= 1.01)


TRACKER = r"""
import json, os, torch
from gpumemprof import MemoryTracker
t = MemoryTracker(device="cuda:0", sampling_interval=10, oom_dump_dir=os.environ["GMP_DUMP_DIR"])
x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
r = t.sample()[0]
print(json.dumps({"reading": r, "allocated": torch.cuda.memory_allocated(0),
                  "reserved": torch.cuda.memory_reserved(0),
                  "total": torch.cuda.mem_get_info(0)[1]}), flush=True)
try:
    with t.capture_oom(context="gpu_check"):
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
except torch.cuda.OutOfMemoryError:
    print("re-raised")
"""


def python_package(c):
    """The Python package as the wheel lays it out (its _native/ beside it),
    without building a wheel: on PYTHONPATH for a case."""
    pkg = os.path.join(c.out, "python", "gpumemprof")
    shutil.rmtree(os.path.dirname(pkg), ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "python", "gpumemprof"), pkg)
    os.makedirs(os.path.join(pkg, "_native"))
    for name in ("libgpumemprof.so", "libgpumemprof_preload.so", "gmp-run"):
        os.symlink(os.path.join(c.build, name), os.path.join(pkg, "_native", name))
    return os.path.dirname(pkg)


def tracker_with_torch(c):
    """gpumemprof.MemoryTracker on the real torch (no preload): its reading
    is torch's own counts, and capture_oom writes one bundle for torch's OOM
    (the wheel's tests use a stand-in torch)."""
    label = "14 MemoryTracker on PyTorch"
    want = "torch's allocated/reserved/total; one bundle, torch.cuda.OutOfMemoryError"
    rc, out, err, dumps = c.python("14_tracker", TRACKER, {"PYTHONPATH": python_package(c)},
                                   preload=False)
    try:
        seen = json.loads(out.splitlines()[0])
    except (IndexError, ValueError):
        return c.row(label, want, "no reading (rc %s): %s" % (rc, err[-300:]), False)
    r, (md, why) = seen["reading"], only_metadata(dumps)
    problems = [k for k, ok in (
        ("allocated", r.get("memory_allocated") == seen["allocated"]),
        ("reserved", r.get("memory_reserved") == seen["reserved"]),
        ("total", r.get("device_total") == seen["total"]),
        ("re-raised", "re-raised" in out),
        ("bundle", md is not None),
        ("reason", (md or {}).get("reason") == "torch.cuda.OutOfMemoryError"),
        ("context", (md or {}).get("context") == "gpu_check")) if not ok]
    c.row(label, want, "allocated %s reserved %s; %s; reason %s" % (
        r.get("memory_allocated"), r.get("memory_reserved"), why or "one bundle",
        (md or {}).get("reason")) + (" [wrong: %s]" % ", ".join(problems) if problems else ""),
        not problems)


PROFILER = r"""
import json, torch
from gpumemprof import GPUMemoryProfiler, build_device_memory_collector
torch.zeros(1, device="cuda")  # CUDA initialised by the program, as a training script does
p = GPUMemoryProfiler()
kept = []
r1 = p.profile_function(lambda: kept.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda")))
def spike():
    t = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    del t
r2 = p.profile_function(spike)
c = build_device_memory_collector()
s = c.sample()
print(json.dumps({"device": p.device, "source": p.source, "kept": r1.memory_allocated,
                  "tensors": r1.tensors_created, "spike_rise": r2.peak_memory_usage() -
                  r2.memory_before.allocated_memory, "spike_kept": r2.memory_allocated,
                  "collector": c.name(), "total": s.total_bytes,
                  "torch_total": torch.cuda.mem_get_info(0)[1],
                  "allocated": s.allocated_bytes,
                  "torch_allocated": torch.cuda.memory_allocated(0)}))
"""


def profiler_with_torch(c):
    """gpumemprof.GPUMemoryProfiler and the device collectors on the real
    torch: a kept 1 GiB tensor is 1 GiB allocated and one tensor; a 2 GiB
    one freed inside the call is a 2 GiB peak (torch's peak statistics);
    the collector's sample is torch's (the wheel's tests use a stand-in)."""
    label = "17 GPUMemoryProfiler on PyTorch"
    want = "kept 1 GiB, 1 tensor; spike peak +2 GiB, 0 kept; collector = torch"
    rc, out, err, _ = c.python("17_profiler", PROFILER, {"PYTHONPATH": python_package(c)},
                               preload=False)
    try:
        seen = json.loads(out.splitlines()[-1])
    except (IndexError, ValueError):
        return c.row(label, want, "no result (rc %s): %s" % (rc, err[-300:]), False)
    problems = [k for k, ok in (
        ("device", seen["device"] == "cuda:0" and seen["source"] == "torch"),
        ("kept", seen["kept"] == GIB and seen["tensors"] == 1),
        ("spike", seen["spike_rise"] == 2 * GIB and seen["spike_kept"] == 0),
        ("collector", seen["collector"] == "cuda" and seen["total"] == seen["torch_total"] and
         seen["allocated"] == seen["torch_allocated"])) if not ok]
    c.row(label, want, "kept %s in %s tensor(s); spike +%s; collector %s" % (
        seen["kept"], seen["tensors"], seen["spike_rise"], seen["collector"]) +
        (" [wrong: %s]" % ", ".join(problems) if problems else ""), not problems)


MEMORY_VIZ = r"""
import json, pickle, sys
from torch.cuda import _memory_viz as viz
snap = pickle.load(open(sys.argv[1], "rb"))
stats = viz.segsum(snap)
trace = viz.trace(snap)
html = viz.trace_plot(snap) + viz.segment_plot(snap)
live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
mine = [b for b in live if any(f["filename"] == "<string>" and f["name"] == sys.argv[2]
                               for f in b.get("frames", []))]
print(json.dumps({"stats": stats.splitlines()[-12:-9], "trace_lines": len(trace.splitlines()),
                  "html_bytes": len(html), "live_bytes": sum(b["size"] for b in live),
                  "line_bytes": sum(b["size"] for b in mine)}))
"""


def memory_viz(c):
    """Our torch-snapshot read by PyTorch's own torch.cuda._memory_viz:
    stats, trace and both plots, and the live blocks carry the program's
    line.  The snapshot is GMP_CHECK_SNAPSHOT's when set (made on another
    machine), else `gmp-inspect export` of case 19's bundle, made here
    where the build's gmp-inspect runs: then nearly all of the live bytes
    must name case 19's function."""
    label = "15 our torch-snapshot in torch's memory_viz"
    want = "segsum, trace and both plots; case 19's live bytes at its line"
    path = os.path.join(c.bin, "snapshot.pickle")  # not in the case's folder: run() clears it
    given = os.environ.get("GMP_CHECK_SNAPSHOT")
    if given:
        if not os.path.isfile(given):
            return c.row(label, want, "GMP_CHECK_SNAPSHOT=%s is no file" % given, False)
        shutil.copyfile(given, path)
    else:
        found = bundles(os.path.join(c.out, "cases", "19_leak", "dumps"))
        if not found:
            return c.row(label, want, "no bundle of case 19 to export", "skip")
        try:
            p = subprocess.run([os.path.join(c.build, "gmp-inspect"), "export", found[0],
                                "--format", "torch-snapshot", "-o", path],
                               capture_output=True, text=True, timeout=60)
        except OSError as e:
            p = subprocess.CompletedProcess([], 127, "", str(e))
        if p.returncode != 0:
            return c.row(label, want, "gmp-inspect cannot run here (rc %s: %s); make a snapshot "
                         "where it does and pass it as GMP_CHECK_SNAPSHOT" % (
                             p.returncode, p.stderr.strip()[-200:]), "skip")
    code = "import sys; sys.argv = ['viz', %r, 'step']\n" % path + MEMORY_VIZ
    rc, out, err, _ = c.python("15_memory_viz", code, preload=False)
    try:
        seen = json.loads(out.splitlines()[-1])
    except (IndexError, ValueError):
        return c.row(label, want, "rc %s: %s" % (rc, err[-300:]), False)
    ok = rc == 0 and seen["trace_lines"] > 0
    line = ""
    if not given:
        ok = ok and seen["line_bytes"] >= 0.9 * seen["live_bytes"] > 0
        line = "; %s of %s live bytes at step's line" % (seen["line_bytes"], seen["live_bytes"])
    c.row(label, want, "%s; %d trace lines; %d bytes of HTML%s" % (
        " ".join(seen["stats"]), seen["trace_lines"], seen["html_bytes"], line), ok)


HISTORY_OOM = r"""
import torch
def build():
    return [torch.empty(256 << 20, dtype=torch.uint8, device="cuda") for _ in range(4)]
held = build()
free, total = torch.cuda.mem_get_info()
torch.empty(2 * total // (2 << 20) * (2 << 20), dtype=torch.uint8, device="cuda")
"""


def torch_history(c):
    """GMP_TORCH_HISTORY=1 on the real torch: the OOM's one bundle holds
    PyTorch's snapshot and its largest blocks with their Python frames; and
    what the history costs a training step."""
    label = "16 GMP_TORCH_HISTORY=1 (PyTorch's snapshot)"
    want = "one bundle with torch_snapshot.pickle; blocks named by build()"
    site = {"GMP_TORCH_HISTORY": "1",
            "PYTHONPATH": os.path.join(ROOT, "python", "gpumemprof", "_site")}
    rc, out, err, dumps = c.python("16_history", HISTORY_OOM, site)
    found = bundles(dumps)
    seen, ok = "%d bundles, rc %s" % (len(found), rc), False
    if len(found) == 1:
        names = os.listdir(found[0])
        blocks = load(found[0], "torch_blocks.json") if "torch_blocks.json" in names else {}
        top = ((blocks or {}).get("largest_blocks") or [{}])[0]
        frames = [f.get("name") for f in top.get("python_frames", [])]
        seen += "; snapshot %s; largest block %s from %s" % (
            "torch_snapshot.pickle" in names, top.get("size"), frames[:2])
        ok = "torch_snapshot.pickle" in names and "build" in frames
    c.row(label, want, seen + ("" if ok else "; " + err[-200:]), ok)
    ratios = []
    for i in range(3):
        t = {}
        for history in ((False, True) if i % 2 == 0 else (True, False)):
            rc, out, err, _ = c.python("16_cost_%d_%d" % (i, history), TRAIN,
                                       site if history else None)
            try:
                t[history] = float(out.split()[-1])
            except (IndexError, ValueError):
                return c.row("16 history's cost", "a ratio", "rc %s: %s" % (rc, err[-200:]),
                             False)
        ratios.append(t[True] / t[False])
    c.row("16 history's cost on a training step", "measured (stated in docs/performance.md)",
          "%.3fx (%s)" % (statistics.median(ratios), " ".join("%.3f" % r for r in ratios)),
          "pass")


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


def marked_line(code):
    """The line number ("<string>" as python -c names it) of the mark."""
    return next(i for i, line in enumerate(code.split("\n"), 1) if "# <- the line" in line)


def python_frames(bundle, stack_id):
    """The Python frames of stack_id in the bundle's stacks.json, innermost first."""
    for s in load(bundle, "stacks.json") or []:
        if isinstance(s, dict) and s.get("id") == stack_id:
            return [f for f in s.get("python") or [] if isinstance(f, dict)]
    return []


def innermost_words(frames, none="none"):
    """The innermost frame as "function:line", or `none` where there is none."""
    return "%s:%s" % (frames[0].get("function"), frames[0].get("line")) if frames else none


def at_line(frames, line, function):
    return bool(frames) and frames[0].get("line") == line and frames[0].get("function") == function


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
