"""gpumemprof.MemoryTracker: the seed's tracker, on the C recorder.

    tracker = MemoryTracker(device="cuda:0", oom_dump_dir="./oom_dumps")
    tracker.start_tracking()
    with tracker.capture_oom(context="train_loop", metadata={"batch_size": 32}):
        train()                      # an OOM here leaves a bundle, then re-raises
    tracker.stop_tracking()

A thread reads memory every sampling_interval seconds and records each
reading as a sample event in an OOMFlightRecorder (so a bundle holds the
last buffer_size of them).  What it reads:

  a CUDA/ROCm device   torch.cuda.memory_allocated and memory_reserved, and
                       the device's free and total (torch.cuda.mem_get_info)
                       once the program has initialised CUDA: the tracker
                       never makes a context itself
  the host             this process's resident bytes, and the nearest limit
                       it runs under and what counts against it: RLIMIT_AS
                       (its address space), its memory cgroup (the group's
                       usage), else the machine's memory, whichever it is
                       nearest to running out of
  "all", "gpus"        every device every collector sees on the machine (or
                       every GPU), loading the GPU libraries to ask
                       (`gpumemprof track`)

device=None takes the current CUDA device when torch is importable and sees
one, else the host.  Usage is a device's used bytes against its total (all
processes: that is what runs out), else what torch reserved.  Crossing the
warning or critical threshold (percent; set_threshold) records a warning or
critical event, once per crossing, and calls the alert callbacks; with
dump_on_critical the critical one also writes a memory-pressure bundle;
with enable_watchdog each crossing also gives back what the process can
without changing its results (gc.collect, torch.cuda.empty_cache).
handle_exception and capture_oom write an OOM bundle for an exception the
C classifier calls an OOM and for nothing else."""
import sys
import threading
import time
from collections import deque
from typing import Any, Callable, Dict, List, Optional

from . import collectors
from ._devices import resolve, torch_backend
from .oom_flight_recorder import OOMFlightRecorder, OOMFlightRecorderConfig, classify_oom_exception
from .utils import format_memory

__all__ = ["MemoryTracker"]


class _TorchDevice:
    """One CUDA (or ROCm) device, read through torch."""

    def __init__(self, torch, index):
        self.torch, self.index = torch, index
        self.backend = torch_backend(torch)
        self.label = "%s:%d" % (self.backend, index)

    def read(self):
        cuda = self.torch.cuda
        r = {"backend": self.backend, "device_id": self.index,
             "memory_allocated": int(cuda.memory_allocated(self.index)),
             "memory_reserved": int(cuda.memory_reserved(self.index))}
        if cuda.is_initialized():  # mem_get_info would make a context otherwise
            free, total = cuda.mem_get_info(self.index)
            r.update(device_free=int(free), device_total=int(total),
                     device_used=int(total) - int(free))
        return [r]


def _from_collector(row):
    """A collector's row as a tracker reading: this process's bytes, and
    the device's (or host's) used, free and total."""
    return {"backend": row["backend"], "device_id": row["device_id"],
            "memory_allocated": row["process_bytes"], "memory_reserved": None,
            "device_used": row["used_bytes"], "device_free": row["free_bytes"],
            "device_total": row["total_bytes"], "limit": row["source"]}


class _Host:
    label = "host"

    def read(self):
        return [_from_collector(row) for row in
                collectors.read_one("host", process_limit=True) or []]


class _Machine:
    """Every device on the machine (label "all"), or every GPU ("gpus"); a
    device two collectors see (CUDA and NVML) once, from the first that
    knows its usage."""

    def __init__(self, label):
        self.label = label

    def read(self):
        seen, out = set(), []
        for row in collectors.read_all(may_load=True):
            key = (row["backend"], row["device_id"])
            if key in seen or row["used_percent"] is None or (
                    self.label == "gpus" and row["device_id"] < 0):
                continue
            seen.add(key)
            out.append(dict(_from_collector(row), name=row["name"]))
        return out


def _resolve(device):
    found, index = resolve(device, "MemoryTracker", extra=("all", "gpus"))
    if found == "host":
        return _Host()
    if found in ("all", "gpus"):
        return _Machine(found)
    return _TorchDevice(found, index)


# what a host reading's total is, in the words of a warning
_LIMIT_WORDS = {"RLIMIT_AS": "its address space against RLIMIT_AS",
                "cgroup": "its memory cgroup's use against the cgroup's limit",
                "meminfo": "the machine's use against its memory"}


def _percent(r):
    total = r.get("device_total")
    used = r.get("device_used")
    if used is None:
        used = r.get("memory_reserved")
    return round(100.0 * used / total, 2) if used is not None and total else None


class MemoryTracker:
    """Samples memory in a thread into an OOM flight recorder, warns at
    thresholds, and writes a bundle for an OOM the program catches."""

    def __init__(self, device=None, sampling_interval: float = 0.1, max_events: int = 10000,
                 enable_alerts: bool = True, enable_oom_flight_recorder: bool = True,
                 oom_dump_dir: str = "oom_dumps", oom_buffer_size: Optional[int] = None,
                 oom_max_dumps: int = 5, oom_max_total_mb: int = 256,
                 dump_on_critical: bool = False, enable_watchdog: bool = False):
        if not sampling_interval or sampling_interval <= 0:
            raise ValueError("gpumemprof: sampling_interval must be a positive number of seconds")
        self._source = _resolve(device)
        self.device = self._source.label
        self.sampling_interval = float(sampling_interval)
        self.enable_alerts = enable_alerts
        self.dump_on_critical = dump_on_critical
        self.enable_watchdog = enable_watchdog
        self.thresholds = {"memory_warning_percent": 80.0, "memory_critical_percent": 95.0}
        self.events = deque(maxlen=max(1, int(max_events)))
        self.last_oom_dump_path = None
        self.last_pressure_dump_path = None
        buffer_size = oom_buffer_size if oom_buffer_size and oom_buffer_size > 0 else max_events
        self._recorder = OOMFlightRecorder(OOMFlightRecorderConfig(
            enabled=enable_oom_flight_recorder, dump_dir=oom_dump_dir, buffer_size=buffer_size,
            max_dumps=oom_max_dumps, max_total_mb=oom_max_total_mb))
        self._callbacks: List[Callable[[Dict[str, Any]], None]] = []
        self._level: Dict[Any, int] = {}  # 0 below warning, 1 warning, 2 critical
        self._last: List[Dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self.stats = {"samples": 0, "peak_memory": 0, "peak_usage_percent": None,
                      "alert_count": 0, "tracking_start_time": None}

    @property
    def oom_buffer_size(self) -> int:
        return self._recorder.config.buffer_size

    @property
    def is_tracking(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def set_threshold(self, name: str, value: float) -> None:
        """memory_warning_percent or memory_critical_percent."""
        if name not in self.thresholds:
            raise KeyError("gpumemprof: no threshold %r (%s)" % (name, ", ".join(self.thresholds)))
        self.thresholds[name] = float(value)

    def add_alert_callback(self, callback: Callable[[Dict[str, Any]], None]) -> None:
        """callback(event) for each warning and critical event."""
        self._callbacks.append(callback)

    def start_tracking(self) -> None:
        if self.is_tracking:
            return
        self._stop.clear()
        self.stats["tracking_start_time"] = time.time()
        self._add({"event_type": "mark", "context": "tracking started"})
        self._thread = threading.Thread(target=self._loop, name="gpumemprof-tracker", daemon=True)
        self._thread.start()

    def stop_tracking(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=max(5.0, 2 * self.sampling_interval))
        self._thread = None
        try:
            self.sample()  # the last reading, in this thread
        except Exception as exc:  # stopping must not raise from a reading
            self._add({"event_type": "mark", "context": "sampling failed: %s" % exc})
        self._add({"event_type": "mark", "context": "tracking stopped"})

    def _loop(self):
        while True:
            try:
                self.sample()
            except Exception as exc:  # a reading that fails must not end tracking
                self._add({"event_type": "mark", "context": "sampling failed: %s" % exc})
            if self._stop.wait(self.sampling_interval):
                return

    def devices(self) -> List[Dict[str, Any]]:
        """A reading of each device tracked, recording nothing."""
        return self._source.read()

    def sample(self) -> List[Dict[str, Any]]:
        """Read now: one sample event per device, recorded; alerts checked."""
        if self.stats["tracking_start_time"] is None:
            self.stats["tracking_start_time"] = time.time()
        readings = self._source.read()
        now = time.time()
        for r in readings:
            r["timestamp"], r["event_type"] = now, "sample"
            r["usage_percent"] = _percent(r)
            self._add(r)
            with self._lock:
                self.stats["samples"] += 1
                self.stats["peak_memory"] = max(self.stats["peak_memory"],
                                                r.get("memory_allocated") or 0)
                if r["usage_percent"] is not None:
                    peak = self.stats["peak_usage_percent"]
                    self.stats["peak_usage_percent"] = max(peak or 0.0, r["usage_percent"])
            if self.enable_alerts:
                self._check(r)
        self._last = readings
        return readings

    def _check(self, r):
        pct = r["usage_percent"]
        if pct is None:
            return
        key = (r["backend"], r["device_id"])
        level = (2 if pct >= self.thresholds["memory_critical_percent"] else
                 1 if pct >= self.thresholds["memory_warning_percent"] else 0)
        before = self._level.get(key, 0)
        self._level[key] = level
        if level <= before:  # once per crossing upward; falling back re-arms it
            return
        kind = "critical" if level == 2 else "warning"
        where = ("host memory (%s)" % _LIMIT_WORDS.get(r.get("limit"), r.get("limit"))
                 if r["device_id"] < 0 else "%s:%d" % (r["backend"], r["device_id"]))
        threshold = self.thresholds["memory_%s_percent" % kind]
        message = "%s at %.1f%% of %s (%s threshold %g%%)" % (
            where, pct, format_memory(r.get("device_total")), kind, threshold)
        event = dict(r, event_type=kind, context=message)
        self._add(event)
        with self._lock:
            self.stats["alert_count"] += 1
        print("gpumemprof: %s: %s" % (kind, message), file=sys.stderr)
        if kind == "critical" and self.dump_on_critical:
            # a bundle written before any failure: gmp-inspect calls it a warning
            self.last_pressure_dump_path = self._recorder._write(
                "memory_pressure", "memory_pressure", None, message, None, "tracker",
                r["backend"], {"tracker_stats": self.get_statistics(), "reading": r})
        if self.enable_watchdog:
            self._clean_up(r)
        for callback in list(self._callbacks):
            try:
                callback(event)
            except Exception as exc:
                print("gpumemprof: an alert callback failed: %r" % exc, file=sys.stderr)

    def _clean_up(self, r):
        """The watchdog, at a warning or critical crossing: what this process
        can give back without changing what it computes, given back: Python's
        unreachable cycles (gc.collect) and, for a device read through torch,
        the caching allocator's unused blocks (torch.cuda.empty_cache).  One
        "cleanup" mark event says what it freed."""
        import gc
        before = self._source.read()
        collected = gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(self._source, _TorchDevice):
            try:
                torch.cuda.empty_cache()
            except Exception as exc:  # cleanup must never fail the program
                print("gpumemprof: watchdog: empty_cache failed: %r" % exc, file=sys.stderr)
        after = self._source.read()
        freed = {}
        for b, a in zip(before, after):
            for key in ("memory_reserved", "memory_allocated"):
                if b.get(key) is not None and a.get(key) is not None:
                    freed[key] = freed.get(key, 0) + max(0, b[key] - a[key])
        message = "watchdog: %d unreachable objects collected%s" % (
            collected, "".join(", %s of %s given back" % (format_memory(v), k.split("_")[1])
                               for k, v in freed.items() if v))
        self._add({"event_type": "mark", "context": message, "backend": r["backend"],
                   "device_id": r["device_id"]})
        with self._lock:
            self.stats["cleanups"] = self.stats.get("cleanups", 0) + 1
        print("gpumemprof: %s" % message, file=sys.stderr)

    def _add(self, event):
        event.setdefault("timestamp", time.time())
        self.events.append(event)
        self._recorder.record_event(event)

    def get_events(self, event_type: Optional[str] = None) -> List[Dict[str, Any]]:
        """The tracker's events, oldest first (of one type, when given)."""
        return [dict(e) for e in list(self.events)
                if event_type is None or e.get("event_type") == event_type]

    def get_statistics(self) -> Dict[str, Any]:
        with self._lock:
            out = dict(self.stats)
        out.update(device=self.device, sampling_interval_s=self.sampling_interval,
                   thresholds=dict(self.thresholds))
        return out

    def handle_exception(self, exc: BaseException, context: Optional[str] = None,
                         metadata: Optional[Dict[str, Any]] = None) -> Optional[str]:
        """A bundle for an OOM exception (its path), None for any other
        exception or when the flight recorder is off."""
        verdict = classify_oom_exception(exc)
        if not verdict.is_oom or not self._recorder.config.enabled:
            return None
        try:
            readings = self._source.read()
        except Exception:
            readings = self._last
        backend = readings[0]["backend"] if readings else None
        for r in readings:
            self._add(dict(r, event_type="oom", context=verdict.reason))
        details = {"tracker_stats": self.get_statistics(), "readings_at_failure": readings}
        details.update(metadata or {})
        self.last_oom_dump_path = self._recorder.dump(
            reason=verdict.reason, exception=exc, context=context, backend=backend,
            metadata=details)
        return self.last_oom_dump_path

    def capture_oom(self, context: str = "runtime", metadata: Optional[Dict[str, Any]] = None):
        """A context manager: an OOM raised inside writes a bundle and goes
        on up; any other exception only goes on up."""
        return _CaptureOOM(self, context, metadata)

    def __enter__(self):
        self.start_tracking()
        return self

    def __exit__(self, *exc_info):
        self.stop_tracking()
        return False


class _CaptureOOM:
    """capture_oom's manager; a class, not a generator, so that the
    exception's traceback ends in the program's frame, not in ours."""

    def __init__(self, tracker, context, metadata):
        self.tracker, self.context, self.metadata = tracker, context, metadata

    def __enter__(self):
        return self.tracker

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and isinstance(exc, Exception):
            self.tracker.handle_exception(exc, context=self.context, metadata=self.metadata)
        return False
