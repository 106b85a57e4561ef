"""tracker_check.py GMP_INSPECT WORK STANDIN -- gpumemprof.MemoryTracker of
the installed wheel, run by test/wheel/run.sh under `ulimit -v` so that a
real allocation fails: first with no torch (the host is tracked), then with
the stand-in torch on the path (test/wheel/standin: a CUDA device through
torch.cuda's memory_allocated/memory_reserved/mem_get_info).  Every bundle
is checked with the installed gmp-inspect and read back with json.  One
ok/FAIL line a check; exit 1 on any FAIL."""
import glob
import json
import os
import subprocess
import sys
import time

inspect_bin, work, standin = sys.argv[1], sys.argv[2], sys.argv[3]


from checks import Checks  # noqa: E402

check = Checks("wheel tracker")


def bundles(d):
    return sorted(glob.glob(os.path.join(d, "oom_dump_*")))


def load(bundle, name):
    with open(os.path.join(bundle, name)) as f:
        return json.load(f)


def inspect(*args):
    r = subprocess.run([inspect_bin] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    return r.returncode, r.stdout


def valid(bundle):
    rc, out = inspect("validate", bundle)
    return rc == 0, out


from gpumemprof import MemoryTracker  # noqa: E402

# 1. no torch: the host; a real MemoryError (ulimit -v) inside capture_oom
check("no torch importable here", "torch" not in sys.modules and
      not any(os.path.isdir(os.path.join(p, "torch")) for p in sys.path if p))
d1 = os.path.join(work, "host")
tracker = MemoryTracker(sampling_interval=0.02, oom_dump_dir=d1)
check("device None without torch tracks the host", tracker.device == "host", tracker.device)
try:
    MemoryTracker(device="cuda:0")
    check("cuda:0 without torch is refused", False, "no error")
except Exception as e:
    from gpumemprof import ConfigurationError
    check("cuda:0 without torch: a ConfigurationError that says torch is not installed",
          isinstance(e, ConfigurationError) and "torch is not installed" in str(e), repr(e))
tracker.start_tracking()
time.sleep(0.2)


def load_everything():
    return bytearray(3 << 30)  # beyond the test's ulimit -v


reraised = False
try:
    with tracker.capture_oom(context="train_loop", metadata={"batch_size": 32}):
        load_everything()
except MemoryError:
    reraised = True
tracker.stop_tracking()
check("capture_oom re-raises the MemoryError", reraised)
found = bundles(d1)
check("one bundle for the OOM", len(found) == 1, found)
if len(found) == 1:
    b = found[0]
    ok, out = valid(b)
    check("the bundle validates", ok, out)
    md, man = load(b, "metadata.json"), load(b, "manifest.json")
    check("metadata: the MemoryError, the context, the caller's and the tracker's metadata",
          md.get("exception_type") == "MemoryError" and md.get("context") == "train_loop" and
          md.get("custom_metadata", {}).get("batch_size") == 32 and
          md.get("custom_metadata", {}).get("tracker_stats", {}).get("samples", 0) >= 3, md)
    check("the path handle_exception returned is the bundle",
          os.path.realpath(tracker.last_oom_dump_path or "") == os.path.realpath(b),
          tracker.last_oom_dump_path)
    events = load(b, "events.json")
    samples = [e for e in events if e.get("event_type") == "sample"]
    rss = [e["bytes_in_use"] for e in samples]
    check("the host's readings are sample events (device -1, this process's bytes, the total)",
          len(samples) >= 3 and all(e["backend"] == "cpu" and e["device_id"] == -1 and
                                    e["total"] > 0 for e in samples) and min(rss) > 1 << 20,
          samples[:2])
    rc, out = inspect("show", b)
    check("show names the MemoryError and the frame that allocated",
          rc == 0 and "MemoryError" in out and "in load_everything" in out, out[:600])
    check("the tracker's recorder is the bundle's format (manifest backend cpu)",
          man.get("backend") == "cpu", man)
check("a non-OOM exception writes nothing",
      tracker.handle_exception(ValueError("bad shape")) is None and len(bundles(d1)) == 1)

# 2. thresholds: one warning/critical event a crossing, a pressure bundle at critical
d2 = os.path.join(work, "pressure")
alerts = []
tracker = MemoryTracker(device="cpu", sampling_interval=0.02, oom_dump_dir=d2,
                        dump_on_critical=True)
tracker.set_threshold("memory_warning_percent", 0.001)
tracker.set_threshold("memory_critical_percent", 0.002)
tracker.add_alert_callback(alerts.append)
for _ in range(5):
    tracker.sample()
critical = tracker.get_events("critical")
check("critical crossed once over five readings above it: one event, one callback",
      len(critical) == 1 and len(alerts) == 1 and alerts[0]["event_type"] == "critical",
      (critical, alerts))
found = bundles(d2)
check("one memory-pressure bundle at critical", len(found) == 1, found)
if len(found) == 1:
    ok, out = valid(found[0])
    rc, tri = inspect("triage", found[0], "--format", "json")
    check("it validates and triage calls it a memory-pressure warning, not an OOM",
          ok and rc == 0 and json.loads(tri).get("pressure_warnings") == 1, out + tri)
    pressure = [e for e in load(found[0], "events.json") if e["event_type"] == "pressure"]
    check("the crossing is a pressure event in the bundle", len(pressure) == 1, pressure)
# the limit the process runs under (this test's ulimit -v) is what the
# percentage is of: 1.2 GiB mapped of a 1.9 GiB RLIMIT_AS is past 50%.  The
# reading is against the nearest limit, so 500 MiB are mapped first: a
# quarter of RLIMIT_AS is nearer than a busy machine's share of its memory
# (under a quarter; the address space of Python alone may not be)
floor = bytearray(500 << 20)
limited = MemoryTracker(device="cpu", oom_dump_dir=os.path.join(work, "limited"))
limited.set_threshold("memory_warning_percent", 50)
limited.set_threshold("memory_critical_percent", 99)
first = limited.sample()[0]
block = bytearray(1200 << 20)
second = limited.sample()[0]
warned = limited.get_events("warning")
check("under RLIMIT_AS the host reading is the address space against that limit",
      first.get("limit") == "RLIMIT_AS" and first["device_total"] == 2000000 * 1024 and
      first["usage_percent"] < 50, first)
check("1.2 GiB more mapped crosses 50% of it: one warning that names RLIMIT_AS",
      second["usage_percent"] > 60 and len(warned) == 1 and "RLIMIT_AS" in warned[0]["context"],
      (second, warned))
del block, floor
disabled = MemoryTracker(device="cpu", enable_oom_flight_recorder=False,
                         oom_dump_dir=os.path.join(work, "never"))
check("a tracker without the flight recorder writes nothing",
      disabled.handle_exception(MemoryError()) is None and
      not os.path.exists(os.path.join(work, "never")))

# 3. torch importable (the stand-in): the CUDA device through torch.cuda
sys.path.insert(0, standin)
import torch  # noqa: E402

d3 = os.path.join(work, "torch")
tracker = MemoryTracker(sampling_interval=10, oom_dump_dir=d3)
check("device None with torch seeing a GPU tracks cuda:0", tracker.device == "cuda:0",
      tracker.device)
torch.cuda.allocate(300 << 20)
reading = tracker.sample()[0]
check("a reading holds torch's memory_allocated and memory_reserved and the device's usage",
      reading["memory_allocated"] == 300 << 20 and reading["memory_reserved"] == 300 << 20 and
      reading["device_total"] == torch.cuda.TOTAL and
      reading["device_used"] == torch.cuda.OTHER + (300 << 20), reading)
try:
    with tracker.capture_oom(context="model_initialization", metadata={"model": "7B"}):
        torch.cuda.allocate(16 << 30)
except torch.cuda.OutOfMemoryError:
    pass
found = bundles(d3)
check("torch's OutOfMemoryError: one bundle", len(found) == 1, found)
if len(found) == 1:
    ok, out = valid(found[0])
    md, man = load(found[0], "metadata.json"), load(found[0], "manifest.json")
    check("it validates, names torch's exception and the cuda backend",
          ok and md.get("reason") == "torch.cuda.OutOfMemoryError" and
          md.get("exception_module") == "torch.cuda" and man.get("backend") == "cuda" and
          "Tried to allocate 16.00 GiB" in md.get("exception_message", ""), (out, md, man))
    events = load(found[0], "events.json")
    samples = [e for e in events if e["event_type"] == "sample"]
    check("torch's allocated bytes reach the bundle's events (cuda:0)",
          any(e["backend"] == "cuda" and e["device_id"] == 0 and e["bytes_in_use"] == 300 << 20
              for e in samples), samples)
# the watchdog: at a crossing, the cached blocks no tensor uses go back
torch.cuda.release(torch.cuda.memory_allocated())
torch.cuda.allocate(300 << 20)
torch.cuda.release(300 << 20)  # 300 MiB still reserved by the cache
watched = MemoryTracker(device="cuda:0", sampling_interval=10, enable_watchdog=True,
                        oom_dump_dir=os.path.join(work, "watchdog"))
watched.set_threshold("memory_warning_percent", 1)
watched.sample()
marks = [e["context"] for e in watched.get_events("mark") if "watchdog" in e.get("context", "")]
check("enable_watchdog: a crossing gives torch's cached blocks back, and says so",
      len(marks) == 1 and "300.0 MiB of reserved given back" in marks[0] and
      torch.cuda.memory_reserved() == 0, (marks, torch.cuda.memory_reserved()))
check.refused("an unknown device is refused with a line naming it",
              lambda: MemoryTracker(device="mps"), ValueError, "mps")
check.exit()
