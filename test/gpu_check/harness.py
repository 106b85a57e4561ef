"""harness.py — what the real-GPU check's cases share (gpu_check.py runs
them): where things are and how a case's process is run (Check), reading a
bundle as any user would (json alone), and the C programs some cases run,
built here against CUDA or taken prebuilt against the test doubles.
Only the standard library."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

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
