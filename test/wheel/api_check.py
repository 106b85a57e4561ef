"""api_check.py GMP_INSPECT WORK -- the Python API of the installed wheel,
run by test/wheel/run.sh with the venv's python: the seed's
oom_flight_recorder (config defaults, record_event, snapshot_events, dump
with an exception named like torch's, retention, a disabled recorder) and
classify_oom_exception, each bundle checked with the installed gmp-inspect
and read back with json.  Prints one ok/FAIL line a check; exit 1 on any
FAIL.  With GMP_API_CHECK_UNDER_PRELOAD=1 (run under the preload) it checks
that the events and the bundle are the preload's instead."""
import glob
import json
import os
import subprocess
import sys
import time

from gpumemprof.oom_flight_recorder import (OOMExceptionClassification, OOMFlightRecorder,
                                            OOMFlightRecorderConfig, classify_oom_exception)

inspect_bin, work = sys.argv[1], sys.argv[2]
under_preload = os.environ.get("GMP_API_CHECK_UNDER_PRELOAD") == "1"


from checks import Checks  # noqa: E402

check = Checks("wheel api")


def bundle_files(path):
    out = {}
    for name in ("manifest.json", "metadata.json", "events.json"):
        with open(os.path.join(path, name)) as f:
            out[name] = json.load(f)
    return out


# torch's and TensorFlow's exception types, named as theirs are
OutOfMemoryError = type("OutOfMemoryError", (RuntimeError,), {"__module__": "torch.cuda"})
ResourceExhaustedError = type("ResourceExhaustedError", (Exception,),
                              {"__module__": "tensorflow.python.framework.errors_impl"})

c = OOMFlightRecorderConfig()
check("config defaults are the seed's",
      (c.enabled, c.dump_dir, c.buffer_size, c.max_dumps, c.max_total_mb) ==
      (True, "oom_dumps", 10000, 5, 256), c)

cases = [
    (OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True,
     "torch.cuda.OutOfMemoryError"),
    (ResourceExhaustedError("OOM when allocating tensor"), True, None),
    (MemoryError(), True, None),
    (RuntimeError("HIP out of memory. Tried to allocate 20.00 MiB"), True, None),
    (RuntimeError("failed to allocate 1073741824 bytes"), True, None),
    (ValueError("shapes do not match"), False, None),
    (KeyError("model.layer1.weight"), False, None),
]
for exc, want_oom, want_reason in cases:
    got = classify_oom_exception(exc)
    ok = isinstance(got, OOMExceptionClassification) and got.is_oom == want_oom and \
        (want_reason is None or got.reason == want_reason) and (got.reason is None) == (not want_oom)
    check("classify_oom_exception(%s(%r)) is_oom=%s" % (type(exc).__name__, str(exc)[:30], want_oom),
          ok, got)

from gpumemprof import ConfigurationError  # noqa: E402
for bad in ({"max_dumps": -1}, {"buffer_size": 0}, {"max_total_mb": "big"}, {"dump_dir": ""}):
    field = next(iter(bad))
    try:
        OOMFlightRecorderConfig(**bad)
        check("OOMFlightRecorderConfig(%s) is refused" % bad, False, "accepted")
    except ConfigurationError as e:
        check("OOMFlightRecorderConfig(%s): a ConfigurationError naming %s" % (bad, field),
              isinstance(e, ValueError) and ("%s=" % field) in str(e) and "GMP_" not in str(e), e)

import io  # noqa: E402
dump_dir = os.path.join(work, "api_dumps")
said, sys.stderr = sys.stderr, io.StringIO()
try:
    rec = OOMFlightRecorder(OOMFlightRecorderConfig(dump_dir=dump_dir, buffer_size=3,
                                                    max_dumps=2))
finally:
    said, sys.stderr = sys.stderr.getvalue(), said
if under_preload:
    run_dir = os.path.abspath(os.environ["GMP_DUMP_DIR"])
    check("under the preload: dump_dir is the run's, and a line says the program's is not used",
          rec.dump_dir == run_dir and run_dir in said and repr(dump_dir) in said, (rec.dump_dir, said))
else:
    check("without the preload: dump_dir is the config's, nothing said",
          rec.dump_dir == dump_dir and said == "", (rec.dump_dir, said))
check("under the preload: uses_preload is %s" % under_preload, rec.uses_preload == under_preload,
      rec.uses_preload)
t0 = time.time()
events = [{"timestamp": t0 + i, "event_type": "allocation", "memory_allocated": (i + 1) << 30,
           "device_id": 0, "note": "step %d" % i} for i in range(4)]
for e in events:
    rec.record_event(e)
snap = rec.snapshot_events()
check("snapshot_events: the last buffer_size events, oldest first, as recorded",
      snap == events[1:], snap)

# a forked child's events go to a ring of its own, and its exit leaves the parent's
child = os.fork()
if child == 0:
    rec.record_event({"event_type": "allocation", "memory_allocated": 12345, "device_id": 0})
    sys.exit(0)
os.waitpid(child, 0)

try:
    raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB "
                           "total capacity)")
except OutOfMemoryError as exc:
    path = rec.dump(exception=exc, context="model_loading",
                    metadata={"batch_size": 32, "model_name": "resnet50"})
if not under_preload:
    check("dump returns the bundle's path, under dump_dir",
          bool(path) and os.path.dirname(path) == dump_dir, path)
else:
    check("dump returns the bundle's path", bool(path) and os.path.isdir(path), path)
if path:
    v = subprocess.run([inspect_bin, "validate", path], capture_output=True, text=True)
    check("the bundle validates", v.returncode == 0, v.stdout + v.stderr)
    b = bundle_files(path)
    meta = b["metadata.json"]
    check("metadata: the exception's type, module and message, context, custom metadata",
          meta.get("exception_type") == "OutOfMemoryError" and
          meta.get("exception_module") == "torch.cuda" and
          meta.get("exception_message", "").startswith("CUDA out of memory. Tried") and
          meta.get("context") == "model_loading" and
          meta.get("custom_metadata") == {"batch_size": 32, "model_name": "resnet50"} and
          meta.get("reason") == "torch.cuda.OutOfMemoryError" and meta.get("backend") == "cuda",
          meta)
    evs = b["events.json"]
    evs = evs.get("events", evs) if isinstance(evs, dict) else evs
    in_use = [e.get("bytes_in_use") for e in evs if e.get("api") == "user"]
    check("events.json holds the recorded events' readings, in order, not a forked child's",
          in_use[-3:] == [(i + 1) << 30 for i in range(1, 4)] and 12345 not in in_use, in_use)
    with open(os.path.join(path, "environment.json")) as f:
        system = json.load(f).get("system", {})
    import platform
    check("environment.json's system: this Python's version, and the seed's torch and CUDA keys",
          system.get("python_version") == platform.python_version() and
          {"torch_version", "cuda_available", "cuda_version"} <= set(system) and
          system.get("cuda_available") is False, system)
    tb = os.path.join(path, "python_traceback.txt")
    check("python_traceback.txt holds the exception's traceback",
          os.path.exists(tb) and "OutOfMemoryError" in open(tb).read())
if not under_preload:
    for _ in range(3):
        rec.dump(reason="manual", context="retention")
    kept = glob.glob(os.path.join(dump_dir, "oom_dump_*"))
    check("retention keeps max_dumps bundles", len(kept) == 2, kept)

    off_dir = os.path.join(work, "off_dumps")
    off = OOMFlightRecorder(OOMFlightRecorderConfig(enabled=False, dump_dir=off_dir))
    off.record_event({"event_type": "allocation"})
    check("disabled: dump returns None, writes nothing, keeps no events",
          off.dump(reason="manual") is None and not os.path.exists(off_dir) and
          off.snapshot_events() == [])
check.exit()
