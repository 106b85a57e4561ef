"""gpumemprof.GPUMemoryProfiler: the seed's profiler, per function and per
block of code, from the counters of whoever allocates:

    profiler = GPUMemoryProfiler()               # torch's current GPU, else the host
    result = profiler.profile_function(train_step, batch)
    with profiler.profile_context("eval"):
        evaluate()
    print(profiler.get_summary()["function_summaries"])

What a snapshot's numbers are:

  a GPU (torch)   the caching allocator's own counters: allocated_memory
                  (memory_allocated), reserved_memory (memory_reserved), the
                  peaks since the profile began, active and inactive split
                  bytes (memory_stats).  A profile resets torch's peak
                  statistics of that device when it begins, as the seed's
                  profiler does (torch keeps one peak per device), and only
                  once CUDA is initialised: the profiler never makes a
                  context of its own.
  the host        under the preload (gmp-run, `python -m gpumemprof run`,
                  LD_PRELOAD): the preload's counters of every host block the
                  process holds (allocated_memory), the calls that took and
                  gave them back, and a peak watch of its own per profile
                  (seen at every allocation of GMP_HOST_EVENT_MIN_BYTES or
                  more, and at each reading); reserved_memory is the resident
                  memory.  Without the preload there are no such counters:
                  allocated_memory is the resident memory too, a stderr line
                  says so once, and each result's `source` is "rss".
  cpu_memory      this process's resident memory (track_cpu_memory).

A peak without a counter of its own (the resident memory) is the process's
high-water mark (VmHWM) when the profile raised it, else the larger of the
readings before and after.  memory_allocated and memory_freed are, as in the
seed, how much the allocated bytes rose or fell over the call."""
import functools
import gc
import os
import sys
import threading
import time
import traceback
import weakref
from collections import defaultdict, deque
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional

from . import _recorder_lib, collectors
from ._devices import resolve, torch_backend

__all__ = ["GPUMemoryProfiler", "MemorySnapshot", "ProfileResult", "profile_function",
           "profile_context", "get_global_profiler", "set_global_profiler"]

_MAX_SNAPSHOTS = 100000


@dataclass
class MemorySnapshot:
    """Memory at one moment, in bytes (None: the source cannot tell it)."""
    timestamp: float
    allocated_memory: Optional[int]
    reserved_memory: Optional[int]
    max_memory_allocated: Optional[int]
    max_memory_reserved: Optional[int]
    active_memory: Optional[int]
    inactive_memory: Optional[int]
    cpu_memory: int
    device_id: int = 0
    operation: Optional[str] = None
    stack_trace: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def to_seed_dict(self, total: Optional[int]) -> Dict[str, Any]:
        """The seed's memory-snapshot dict: MB used of the device's total."""
        used = self.allocated_memory or 0
        return {"timestamp": self.timestamp, "memory_used_mb": used / 2**20,
                "memory_total_mb": total / 2**20 if total else None,
                "memory_percent": round(100.0 * used / total, 2) if total else None,
                "gpu_id": self.device_id}


@dataclass
class ProfileResult:
    """One profiled call or block."""
    function_name: str
    execution_time: float
    memory_before: MemorySnapshot
    memory_after: MemorySnapshot
    memory_peak: MemorySnapshot
    memory_allocated: int
    memory_freed: int
    tensors_created: int
    tensors_deleted: int
    call_count: int = 1
    source: str = ""               # "torch", "preload" or "rss": whose counters
    allocation_calls: Optional[int] = None  # under the preload: host blocks taken
    free_calls: Optional[int] = None        # ... and given back, during the call
    raised: Optional[str] = None   # the exception's type, when the call raised
    start_time: float = 0.0
    end_time: float = 0.0

    def memory_diff(self) -> int:
        return (self.memory_after.allocated_memory or 0) - (self.memory_before.allocated_memory or 0)

    def peak_memory_usage(self) -> int:
        return self.memory_peak.allocated_memory or 0

    def to_dict(self) -> Dict[str, Any]:
        out = asdict(self)
        out.update(memory_diff=self.memory_diff(), peak_memory_usage=self.peak_memory_usage())
        return out

    def function_call(self) -> Dict[str, Any]:
        """The seed's function-call dict."""
        return {"name": self.function_name, "start_time": self.start_time,
                "end_time": self.end_time, "duration": self.execution_time,
                "memory_start_mb": (self.memory_before.allocated_memory or 0) / 2**20,
                "memory_end_mb": (self.memory_after.allocated_memory or 0) / 2**20,
                "memory_peak_mb": self.peak_memory_usage() / 2**20}


def _status_bytes(key):
    """A Vm* line of /proc/self/status, in bytes (None when unreadable)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _resident():
    """This process's resident bytes, as the C host collector reads them."""
    rows = collectors.read_one("host") or []
    return rows[0]["process_bytes"] if rows and rows[0]["process_bytes"] is not None else (
        _status_bytes("VmRSS") or 0)


class _TorchCounters:
    """A GPU through torch's caching allocator."""
    source = "torch"

    def __init__(self, torch, index):
        self.torch, self.index = torch, index
        self.label = "%s:%d" % (torch_backend(torch), index)

    def _ready(self):
        return self.torch.cuda.is_initialized()

    def begin(self):
        if self._ready():
            self.torch.cuda.synchronize(self.index)
            self.torch.cuda.reset_peak_memory_stats(self.index)
        return None

    def settle(self):
        """The device's queued work done, so that its counters are final."""
        if self._ready():
            self.torch.cuda.synchronize(self.index)

    def end(self, token):
        pass

    def read(self, token=None):
        """(allocated, reserved, max allocated, max reserved, active, inactive, calls)."""
        cuda = self.torch.cuda
        stats = cuda.memory_stats(self.index) if self._ready() else {}
        return (int(cuda.memory_allocated(self.index)), int(cuda.memory_reserved(self.index)),
                int(cuda.max_memory_allocated(self.index)),
                int(cuda.max_memory_reserved(self.index)),
                stats.get("active_bytes.all.current"), stats.get("inactive_split_bytes.all.current"),
                None)

    def peak(self, token, before, after):
        return after[2], after[3]

    def total(self):
        if self._ready():
            return int(self.torch.cuda.mem_get_info(self.index)[1])
        for row in collectors.read_all():
            if row["backend"] == torch_backend(self.torch) and row["device_id"] == self.index:
                return row["total_bytes"]
        return None

    def count_tensors(self):
        gc.collect()
        is_tensor = self.torch.is_tensor
        return sum(1 for o in gc.get_objects() if is_tensor(o) and getattr(o, "is_cuda", False))


_said_no_preload = []


def _end_own_watch(preload, own):
    preload.end_watch(own[0])


class _HostCounters:
    """The host: the preload's counters where it records, else the
    resident memory."""
    label = "cpu"
    index = -1

    def __init__(self):
        self.preload = _recorder_lib.preload_host_counters()
        if self.preload is not None and self.preload.read() is None:
            self.preload = None
        self.source = "preload" if self.preload is not None else "rss"
        if self.preload is None and not _said_no_preload:
            _said_no_preload.append(True)
            print("gpumemprof: the profiler runs without the preload here, so its host numbers "
                  "are this process's resident memory, not its allocations (run the program "
                  "under `python -m gpumemprof run` or gmp-run for those)", file=sys.stderr)
        self._own = [self.begin()]  # the profiler's own watch: max_memory_allocated
        if self.preload is not None:  # given back with the profiler: the preload has 32
            weakref.finalize(self, _end_own_watch, self.preload, self._own)

    @property
    def watch(self):
        return self._own[0]

    def restart(self):
        """The profiler's own peak starts again (clear_results)."""
        self.end(self._own[0])
        self._own[0] = self.begin()

    def begin(self):
        return self.preload.begin_watch() if self.preload is not None else -1

    def settle(self):
        pass

    def end(self, token):
        if self.preload is not None:
            self.preload.end_watch(token)

    def read(self, token=None):
        rss = _resident()
        hwm = _status_bytes("VmHWM")
        if self.preload is None:
            return rss, rss, hwm, hwm, rss, None, None
        counts = self.preload.read(self.watch)
        if counts is None:  # the preload stopped recording (exiting)
            return rss, rss, hwm, hwm, rss, None, None
        in_use, allocs, frees, since_start = counts
        return in_use, rss, since_start or None, hwm, in_use, None, (allocs, frees)

    def peak(self, token, before, after):
        """(peak allocated, peak reserved) over the profile."""
        hwm = after[3]
        rss_peak = (hwm if hwm is not None and before[3] is not None and hwm > before[3]
                    else max(before[1], after[1]))
        if self.preload is None or token is None or token < 0:
            return (rss_peak if self.preload is None else max(before[0], after[0])), rss_peak
        counts = self.preload.read(token)
        return (counts[3] if counts else max(before[0], after[0])), rss_peak

    def total(self):
        rows = collectors.read_one("host", process_limit=True) or []
        return rows[0]["total_bytes"] if rows else None

    def count_tensors(self):
        return None


class GPUMemoryProfiler:
    """Profiles functions and blocks of code: memory before, after and at
    the peak, per call, and aggregated per name (get_summary)."""

    def __init__(self, device=None, track_tensors: bool = True, track_cpu_memory: bool = True,
                 collect_stack_traces: bool = False, _counters=None):
        if _counters is None:  # tfmemprof brings TensorFlow's
            found, index = resolve(device, "GPUMemoryProfiler")
            _counters = _HostCounters() if found == "host" else _TorchCounters(found, index)
        self._counters = _counters
        self.device = self._counters.label
        self.device_id = self._counters.index
        self.source = self._counters.source
        self.track_tensors = track_tensors
        self.track_cpu_memory = track_cpu_memory
        self.collect_stack_traces = collect_stack_traces
        self.results: List[ProfileResult] = []
        self.snapshots = deque(maxlen=_MAX_SNAPSHOTS)
        self.function_stats: Dict[str, List[ProfileResult]] = defaultdict(list)
        self._lock = threading.Lock()
        self._monitor_stop = threading.Event()
        self._monitor_thread = None
        self._monitor_interval = 0.1
        self._baseline = self._snapshot("baseline")

    # -- readings ---------------------------------------------------------------------
    def _snapshot(self, operation=None, reading=None, stack=False):
        r = reading if reading is not None else self._counters.read()
        trace = None
        if stack and self.collect_stack_traces:
            frames = [f for f in traceback.extract_stack()
                      if os.path.dirname(os.path.abspath(f.filename)) != os.path.dirname(__file__)]
            trace = "".join(traceback.format_list(frames[-5:]))
        return MemorySnapshot(
            timestamp=time.time(), allocated_memory=r[0], reserved_memory=r[1],
            max_memory_allocated=r[2], max_memory_reserved=r[3], active_memory=r[4],
            inactive_memory=r[5], cpu_memory=_resident() if self.track_cpu_memory else 0,
            device_id=self.device_id, operation=operation, stack_trace=trace)

    def take_snapshot(self, operation: Optional[str] = None) -> MemorySnapshot:
        """A snapshot now, kept in self.snapshots."""
        snap = self._snapshot(operation)
        self.snapshots.append(snap)
        return snap

    # -- profiling --------------------------------------------------------------------
    def _begin(self, name):
        """The readings a profile starts from."""
        token = self._counters.begin()
        state = {"name": name, "token": token,
                 "tensors": self._counters.count_tensors() if self.track_tensors else None,
                 "reading": self._counters.read()}
        state["before"] = self._snapshot("before_" + name, state["reading"], stack=True)
        state["start"], state["t0"] = time.time(), time.perf_counter()
        return state

    def _finish(self, state, raised=None):
        """The profile's ProfileResult, recorded."""
        elapsed = time.perf_counter() - state["t0"]
        name, token, before_reading = state["name"], state["token"], state["reading"]
        try:
            self._counters.settle()
            after_reading = self._counters.read()
            after = self._snapshot("after_" + name, after_reading)
            peak_allocated, peak_reserved = self._counters.peak(token, before_reading,
                                                                after_reading)
        finally:
            self._counters.end(token)
        peak = MemorySnapshot(
            timestamp=after.timestamp, allocated_memory=peak_allocated,
            reserved_memory=peak_reserved, max_memory_allocated=after.max_memory_allocated,
            max_memory_reserved=after.max_memory_reserved, active_memory=after.active_memory,
            inactive_memory=after.inactive_memory, cpu_memory=after.cpu_memory,
            device_id=self.device_id, operation="peak_" + name)
        before = state["before"]
        tensors_before = state["tensors"]
        tensors_after = self._counters.count_tensors() if tensors_before is not None else None
        diff = (after.allocated_memory or 0) - (before.allocated_memory or 0)
        calls = (before_reading[6], after_reading[6])
        result = ProfileResult(
            function_name=name, execution_time=elapsed, memory_before=before,
            memory_after=after, memory_peak=peak, memory_allocated=max(0, diff),
            memory_freed=max(0, -diff),
            tensors_created=max(0, (tensors_after or 0) - (tensors_before or 0)),
            tensors_deleted=max(0, (tensors_before or 0) - (tensors_after or 0)),
            source=self.source,
            allocation_calls=calls[1][0] - calls[0][0] if all(calls) else None,
            free_calls=calls[1][1] - calls[0][1] if all(calls) else None,
            raised=raised, start_time=state["start"], end_time=state["start"] + elapsed)
        with self._lock:
            self.results.append(result)
            self.function_stats[name].append(result)
        return result

    def _measure(self, name, run):
        """(run()'s value, its ProfileResult); an exception goes on up."""
        state = self._begin(name)
        try:
            value = run()
        except BaseException as exc:
            self._finish(state, type(exc).__name__)
            raise
        return value, self._finish(state)

    def profile_function(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> ProfileResult:
        """Call func(*args, **kwargs) once and return its ProfileResult (an
        exception it raises goes on up, its result still recorded)."""
        name = getattr(func, "__name__", None) or repr(func)
        return self._measure(name, lambda: func(*args, **kwargs))[1]

    def profile_context(self, name: str = "context"):
        """with profiler.profile_context("name"): the block's ProfileResult
        is recorded when it ends (and is the manager's .result)."""
        return _ProfileContext(self, name)

    # -- monitoring -------------------------------------------------------------------
    def start_monitoring(self, interval: Optional[float] = None) -> None:
        """A snapshot every interval seconds (default 0.1) into self.snapshots."""
        if self._monitor_thread is not None and self._monitor_thread.is_alive():
            return
        if interval is not None:
            if not interval > 0:
                raise ValueError("gpumemprof: start_monitoring(interval=%r): a positive number "
                                 "of seconds" % (interval,))
            self._monitor_interval = float(interval)
        self._monitor_stop.clear()
        self._monitor_thread = threading.Thread(target=self._monitor, daemon=True,
                                                name="gpumemprof-profiler")
        self._monitor_thread.start()

    def _monitor(self):
        while not self._monitor_stop.is_set():
            try:
                self.take_snapshot("monitor")
            except Exception as exc:  # a failed reading must not end monitoring
                print("gpumemprof: a profiler reading failed: %r" % exc, file=sys.stderr)
            self._monitor_stop.wait(self._monitor_interval)

    def stop_monitoring(self) -> None:
        self._monitor_stop.set()
        if self._monitor_thread is not None:
            self._monitor_thread.join(timeout=max(5.0, 2 * self._monitor_interval))
            self._monitor_thread = None

    @property
    def is_monitoring(self) -> bool:
        return self._monitor_thread is not None and self._monitor_thread.is_alive()

    # -- results ----------------------------------------------------------------------
    def get_summary(self) -> Dict[str, Any]:
        """Aggregated results: totals, the peak, and per function name."""
        with self._lock:
            results = list(self.results)
            per_name = {k: list(v) for k, v in self.function_stats.items()}
        current = self._snapshot("current")
        summary = {"device": self.device, "source": self.source,
                   "monitoring_active": self.is_monitoring,
                   "snapshots_collected": len(self.snapshots),
                   "current_memory_usage": current.allocated_memory,
                   "baseline_memory_usage": self._baseline.allocated_memory,
                   "memory_change_from_baseline": (current.allocated_memory or 0) -
                   (self._baseline.allocated_memory or 0)}
        if not results:
            summary["message"] = "No profiling results available"
            return summary
        allocated = sum(r.memory_allocated for r in results)
        freed = sum(r.memory_freed for r in results)
        summary.update(
            total_functions_profiled=len(per_name), total_function_calls=len(results),
            total_execution_time=sum(r.execution_time for r in results),
            total_memory_allocated=allocated, total_memory_freed=freed,
            net_memory_change=allocated - freed,
            peak_memory_usage=max(r.peak_memory_usage() for r in results),
            function_summaries={name: {
                "call_count": len(rs),
                "total_time": sum(r.execution_time for r in rs),
                "avg_time": sum(r.execution_time for r in rs) / len(rs),
                "total_memory_allocated": sum(r.memory_allocated for r in rs),
                "avg_memory_allocated": sum(r.memory_allocated for r in rs) / len(rs),
                "peak_memory": max(r.peak_memory_usage() for r in rs),
            } for name, rs in per_name.items()})
        return summary

    def clear_results(self) -> None:
        """Forget results and snapshots; the baseline and the peaks start again."""
        with self._lock:
            self.results.clear()
            self.function_stats.clear()
        self.snapshots.clear()
        if isinstance(self._counters, _HostCounters):
            self._counters.restart()
        else:
            self._counters.begin()
        self._baseline = self._snapshot("new_baseline")

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop_monitoring()
        return False


class _ProfileContext:
    """profile_context's manager; a class, not a generator, so that an
    exception's traceback ends in the program's frame, not in ours."""

    def __init__(self, profiler, name):
        self.profiler, self.name, self.result, self._state = profiler, name, None, None

    def __enter__(self):
        self._state = self.profiler._begin(self.name)
        return self.profiler

    def __exit__(self, exc_type, exc, tb):
        self.result = self.profiler._finish(self._state, exc_type.__name__ if exc_type else None)
        return False


# -- the module-level seed API: one profiler shared by the decorator and the context ----
_global = {"profiler": None}
_global_lock = threading.Lock()


def get_global_profiler(device=None) -> GPUMemoryProfiler:
    with _global_lock:
        if _global["profiler"] is None:
            _global["profiler"] = GPUMemoryProfiler(device=device)
        return _global["profiler"]


def set_global_profiler(profiler: GPUMemoryProfiler) -> None:
    with _global_lock:
        _global["profiler"] = profiler


def profile_function(func=None, *, name=None, device=None, profiler=None):
    """@profile_function or @profile_function(name=..., profiler=...): each
    call runs once and is profiled by that profiler (or the global one)."""
    def decorate(f):
        label = name or getattr(f, "__name__", "function")

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            prof = profiler or get_global_profiler(device)
            return prof._measure(label, lambda: f(*args, **kwargs))[0]
        return wrapper
    return decorate(func) if func is not None else decorate


def profile_context(name: str = "context", device=None, profiler=None):
    """with profile_context("name"): the block profiled by that profiler (or
    the global one); the manager's value is the profiler."""
    return (profiler or get_global_profiler(device)).profile_context(name)
