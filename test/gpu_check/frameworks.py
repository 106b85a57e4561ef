"""frameworks.py — cases 1 to 17 of the real-GPU check (gpu_check.py runs
them): PyTorch's allocators and backends, CuPy, JAX, nvcc's static cudart,
another process's memory, the leak check, a SIGKILLed holder under
gmp-run, the preload's cost, the Python package on the real torch and
torch's own memory_viz reading our snapshot.  Each prints its row through
Check.row.  Only the standard library."""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

from harness import (GIB, MIB, ROOT, bundles, device0, failed, live_from_events, load, near,
                     only_metadata, printed, through_cupti, tried_to_allocate)

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
