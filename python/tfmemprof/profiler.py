"""tfmemprof's profilers: TFMemoryProfiler (snapshots, profile_function,
profile_context, continuous profiling, get_results) and TensorFlowProfiler
(a training or inference loop, profiled step by step), as the seed names
them, on gpumemprof's profiler: one way of measuring, two frameworks.

Whose numbers: a TensorFlow GPU ("/GPU:N") is read through TensorFlow's
own allocator (tf.config.experimental.get_memory_info, whose peak a
profile starts again with reset_memory_stats); the CPU ("/CPU:0", and any
machine without a GPU TensorFlow sees) through the preload's counters of
the process's host allocations where it runs under the preload, else the
resident memory (gpumemprof.GPUMemoryProfiler says which, in `source`).
A snapshot's gpu_memory_mb is the profiled device's memory in use (on the
CPU device, the host's), whatever its name says."""
import functools
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional

from gpumemprof import collectors
from gpumemprof._devices import import_framework
from gpumemprof.errors import ConfigurationError
from gpumemprof.profiler import GPUMemoryProfiler, _HostCounters

__all__ = ["TFMemoryProfiler", "TensorFlowProfiler", "MemorySnapshot", "ProfileResult",
           "import_tensorflow", "profile_function", "profile_context", "get_global_profiler",
           "set_global_profiler"]

MB = float(1 << 20)


def import_tensorflow():
    """tensorflow, or None where it is not installed (or broken)."""
    return import_framework("tensorflow")


@dataclass
class MemorySnapshot:
    """The seed's TensorFlow snapshot, in MB (None: not known)."""
    timestamp: float
    name: str
    gpu_memory_mb: Optional[float]
    cpu_memory_mb: float
    gpu_memory_reserved_mb: Optional[float]
    gpu_utilization: Optional[float]     # percent of the device's total
    num_tensors: Optional[int]
    tensor_sizes: Dict[str, int] = field(default_factory=dict)
    operation_name: Optional[str] = None
    graph_node: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class ProfileResult:
    """What a TFMemoryProfiler saw, from its first snapshot to its last."""
    start_time: float
    end_time: float
    peak_memory_mb: float
    average_memory_mb: float
    min_memory_mb: float
    total_allocations: Optional[int]     # the preload's calls, where it counts them
    total_deallocations: Optional[int]
    snapshots: List[MemorySnapshot] = field(default_factory=list)
    function_profiles: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    tensor_lifecycle: Dict[str, Any] = field(default_factory=dict)
    memory_fragmentation: Optional[float] = None
    efficiency_score: Optional[float] = None
    source: str = ""

    @property
    def duration(self) -> float:
        return self.end_time - self.start_time

    @property
    def memory_growth_rate(self) -> float:
        """MB per second from the lowest reading to the peak."""
        return (self.peak_memory_mb - self.min_memory_mb) / self.duration if self.duration > 0 else 0.0


class _TensorFlowGPU:
    """A GPU through TensorFlow's allocator (the counters GPUMemoryProfiler reads)."""
    source = "tensorflow"

    def __init__(self, tf, index):
        self.tf, self.index = tf, index
        self.name = "GPU:%d" % index
        self.label = "/GPU:%d" % index

    def begin(self):
        try:
            self.tf.config.experimental.reset_memory_stats(self.name)
        except Exception:  # older TensorFlow: the peak is the run's
            pass
        return None

    def settle(self):
        pass

    def end(self, token):
        pass

    def read(self, token=None):
        info = self.tf.config.experimental.get_memory_info(self.name)
        current, peak = int(info.get("current", 0)), int(info.get("peak", 0))
        return current, None, peak, None, current, None, None

    def peak(self, token, before, after):
        return after[2], None

    def total(self):
        for row in collectors.read_all():
            if row["backend"] == "cuda" and row["device_id"] == self.index:
                return row["total_bytes"]
        return None

    def count_tensors(self):
        return None


def _device(tf, device):
    """("/GPU:N", counters) or ("/CPU:0", host counters)."""
    gpus = []
    try:
        gpus = tf.config.list_physical_devices("GPU")
    except Exception:
        pass
    text = (device or ("/GPU:0" if gpus else "/CPU:0")).upper().lstrip("/")
    kind, _, index = text.partition(":")
    if kind == "CPU":
        return "/CPU:0", _HostCounters()
    if kind == "GPU" and index.isdigit():
        if int(index) >= len(gpus):
            raise ConfigurationError("tfmemprof: device %r: TensorFlow sees %d GPU(s) here "
                                     "(device='/CPU:0' profiles the host)" % (device, len(gpus)))
        return "/GPU:%s" % index, _TensorFlowGPU(tf, int(index))
    raise ConfigurationError("tfmemprof: device %r: not a TensorFlow device ('/GPU:N' or "
                             "'/CPU:0')" % (device,))


class TFMemoryProfiler:
    """Snapshots, profiled functions and blocks, and results, for
    TensorFlow code."""

    def __init__(self, device: Optional[str] = None, enable_tensor_tracking: bool = True):
        tf = import_tensorflow()
        if tf is None:
            raise ConfigurationError("tfmemprof: TensorFlow is not installed here "
                                     "(pip install tensorflow, or tensorflow-cpu)")
        self.device, counters = _device(tf, device)
        self.enable_tensor_tracking = enable_tensor_tracking
        self._core = GPUMemoryProfiler(track_tensors=False, _counters=counters)
        self._counters = counters
        self.source = self._core.source
        self.snapshots: List[MemorySnapshot] = []
        self.function_profiles: Dict[str, Dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._start_calls = self._calls()

    @property
    def profiling_active(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _calls(self):
        reading = self._counters.read()
        return reading[6]  # (allocations, frees) from the preload, else None

    def _tf_snapshot(self, core, name) -> MemorySnapshot:
        total = self._counters.total()
        used = core.allocated_memory
        return MemorySnapshot(
            timestamp=core.timestamp, name=name,
            gpu_memory_mb=used / MB if used is not None else None,
            cpu_memory_mb=core.cpu_memory / MB,
            gpu_memory_reserved_mb=(core.reserved_memory / MB
                                    if core.reserved_memory is not None else None),
            gpu_utilization=round(100.0 * used / total, 2) if used is not None and total else None,
            num_tensors=None, operation_name=name)

    def capture_snapshot(self, name: str = "snapshot") -> MemorySnapshot:
        snap = self._tf_snapshot(self._core.take_snapshot(name), name)
        with self._lock:
            self.snapshots.append(snap)
        return snap

    def _record(self, name, result):
        before = self._tf_snapshot(result.memory_before, name + "_before")
        after = self._tf_snapshot(result.memory_after, name + "_after")
        with self._lock:
            self.snapshots.extend([before, after])
            p = self.function_profiles.setdefault(name, {
                "calls": 0, "total_duration": 0.0, "total_memory_used": 0.0, "peak_memory": 0.0,
                "snapshots": []})
            p["calls"] += 1
            p["total_duration"] += result.execution_time
            p["total_memory_used"] += result.memory_diff() / MB
            p["peak_memory"] = max(p["peak_memory"], result.peak_memory_usage() / MB)
            p["snapshots"].extend([before, after])

    def profile_function(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """A wrapper of func whose every call is profiled (the seed's decorator)."""
        name = getattr(func, "__name__", "function")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            state = self._core._begin(name)
            try:
                value = func(*args, **kwargs)
            except BaseException as exc:
                self._record(name, self._core._finish(state, type(exc).__name__))
                raise
            self._record(name, self._core._finish(state))
            return value
        return wrapper

    def profile_context(self, name: str = "context"):
        """with profiler.profile_context("name"): the block profiled."""
        return _TFContext(self, name)

    def start_continuous_profiling(self, interval: float = 1.0) -> None:
        if self.profiling_active:
            return
        if not interval > 0:
            raise ValueError("tfmemprof: interval=%r: a positive number of seconds" % (interval,))
        self._stop.clear()

        def loop():
            while not self._stop.is_set():
                try:
                    self.capture_snapshot("continuous")
                except Exception as exc:  # a failed reading must not end it
                    print("tfmemprof: a reading failed: %r" % exc, file=sys.stderr)
                self._stop.wait(interval)
        self._thread = threading.Thread(target=loop, daemon=True, name="tfmemprof")
        self._thread.start()

    def stop_continuous_profiling(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None

    def get_results(self) -> ProfileResult:
        with self._lock:
            snaps = list(self.snapshots)
            profiles = {k: dict(v, snapshots=list(v["snapshots"]))
                        for k, v in self.function_profiles.items()}
        peaks = [r.peak_memory_usage() / MB for r in self._core.results]
        used = [s.gpu_memory_mb for s in snaps if s.gpu_memory_mb is not None]
        now, calls = time.time(), self._calls()
        start = self._start_calls
        return ProfileResult(
            start_time=snaps[0].timestamp if snaps else now,
            end_time=snaps[-1].timestamp if snaps else now,
            peak_memory_mb=max(used + peaks) if used or peaks else 0.0,
            average_memory_mb=sum(used) / len(used) if used else 0.0,
            min_memory_mb=min(used) if used else 0.0,
            total_allocations=calls[0] - start[0] if calls and start else None,
            total_deallocations=calls[1] - start[1] if calls and start else None,
            snapshots=snaps, function_profiles=profiles, source=self.source)

    def reset(self) -> None:
        with self._lock:
            self.snapshots.clear()
            self.function_profiles.clear()
        self._core.clear_results()
        self._start_calls = self._calls()

    def __enter__(self):
        self.capture_snapshot("context_start")
        return self

    def __exit__(self, *exc_info):
        self.capture_snapshot("context_end")
        self.stop_continuous_profiling()
        return False


class _TFContext:
    def __init__(self, profiler, name):
        self.profiler, self.name, self._state = profiler, name, None

    def __enter__(self):
        self._state = self.profiler._core._begin(self.name)
        return self.profiler

    def __exit__(self, exc_type, exc, tb):
        result = self.profiler._core._finish(self._state, exc_type.__name__ if exc_type else None)
        self.profiler._record(self.name, result)
        return False


def _batches(tf, data, batch_size):
    """data in batches: a tf.data.Dataset batched (unless it is already),
    else slices of an array or tensor."""
    if hasattr(data, "batch") and hasattr(data, "element_spec"):
        spec = data.element_spec
        first = spec[0] if isinstance(spec, tuple) else spec
        shape = getattr(first, "shape", None)
        already = shape is not None and len(shape) > 0 and shape[0] is None
        yield from (data if already else data.batch(batch_size))
        return
    n = int(tf.shape(data)[0]) if not hasattr(data, "shape") else int(data.shape[0])
    for start in range(0, n, batch_size):
        yield data[start:start + batch_size]


class TensorFlowProfiler:
    """A training or inference loop profiled: the whole, each epoch, each
    step (contexts "training", "epoch_N", "step_N"; "inference",
    "inference_batch_N")."""

    def __init__(self, device: Optional[str] = None):
        self.profiler = TFMemoryProfiler(device=device)
        self.device = self.profiler.device
        set_global_profiler(self.profiler)

    def profile_training(self, model, dataset, epochs: int = 1,
                         steps_per_epoch: Optional[int] = None) -> None:
        """epochs over dataset, steps_per_epoch steps each at most: each step
        is model.train_on_batch(x, y) (a compiled Keras model), or
        model.train_step(batch) for a model that defines its own."""
        prof = self.profiler
        with prof.profile_context("training"):
            for epoch in range(epochs):
                with prof.profile_context("epoch_%d" % epoch):
                    for step, batch in enumerate(dataset):
                        if steps_per_epoch is not None and step >= steps_per_epoch:
                            break
                        with prof.profile_context("step_%d" % step):
                            if hasattr(model, "train_on_batch"):
                                if isinstance(batch, (tuple, list)):
                                    model.train_on_batch(*batch[:3])
                                else:
                                    model.train_on_batch(batch)
                            else:
                                model.train_step(batch)

    def profile_inference(self, model, data, batch_size: int = 32) -> None:
        """model(batch, training=False) over data in batches of batch_size."""
        tf = import_tensorflow()
        prof = self.profiler
        with prof.profile_context("inference"):
            for i, batch in enumerate(_batches(tf, data, batch_size)):
                with prof.profile_context("inference_batch_%d" % i):
                    model(batch, training=False)

    def profile_context(self, name: str = "context"):
        return self.profiler.profile_context(name)

    def get_results(self) -> ProfileResult:
        return self.profiler.get_results()

    def reset(self) -> None:
        self.profiler.reset()


_global = {"profiler": None}
_global_lock = threading.Lock()


def get_global_profiler() -> TFMemoryProfiler:
    with _global_lock:
        if _global["profiler"] is None:
            _global["profiler"] = TFMemoryProfiler()
        return _global["profiler"]


def set_global_profiler(profiler: TFMemoryProfiler) -> None:
    with _global_lock:
        _global["profiler"] = profiler


def profile_function(func=None, *, profiler=None, name=None):
    """@profile_function or @profile_function(profiler=..., name=...)."""
    def decorate(f):
        label = name or getattr(f, "__name__", "function")

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            prof = profiler or get_global_profiler()
            named = functools.wraps(f)(lambda: f(*args, **kwargs))
            named.__name__ = label
            return prof.profile_function(named)()
        return wrapper
    return decorate(func) if func is not None else decorate


def profile_context(name: str = "context", profiler=None):
    return (profiler or get_global_profiler()).profile_context(name)
