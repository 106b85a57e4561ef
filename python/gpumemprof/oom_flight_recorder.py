"""gpumemprof.oom_flight_recorder: the Python OOM flight recorder's API,
on the C recorder.

    config = OOMFlightRecorderConfig(dump_dir="./oom_diagnostics", max_dumps=10)
    recorder = OOMFlightRecorder(config)
    recorder.record_event({"timestamp": time.time(), "event_type": "allocation",
                           "memory_allocated": n, "device_id": 0})
    try:
        ...
    except Exception as exc:
        if classify_oom_exception(exc).is_oom:
            path = recorder.dump(exception=exc, context="training", backend="cuda")
        raise

The events go into the C recorder's ring and the bundle is written by it,
in the format the preload writes (gmp-inspect reads both); retention keeps
max_dumps bundles and max_total_mb.  snapshot_events() gives back the
dicts as they were recorded, and the bundle holds them too, every key
kept, in recorded_events.json.  Under the preload (LD_PRELOAD, gmp-run,
python -m gpumemprof run) the events go into the preload's own ring and
the bundle is the preload's, with its events; its configuration (GMP_*)
then decides where bundles go, and the dump of an OOM the preload saw
fail becomes that failure's one bundle (gmp_preload_dump_exception).
classify_oom_exception asks the C classifier, so Python and the preload
agree on what an OOM is."""
import collections
import ctypes
import functools
import json
import os
import sys
import tempfile
import threading
import time
import traceback
import weakref
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from . import _recorder_lib as clib
from .errors import ConfigurationError

__all__ = ["OOMFlightRecorderConfig", "OOMExceptionClassification", "OOMFlightRecorder",
           "classify_oom_exception"]


# each number's range: the C recorder's (GMP_BUFFER_SIZE, GMP_MAX_DUMPS, GMP_MAX_TOTAL_MB)
_RANGES = {"buffer_size": (1, 1 << 24), "max_dumps": (1, 1000000), "max_total_mb": (1, 1 << 40)}


@dataclass
class OOMFlightRecorderConfig:
    """Runtime configuration of the recorder (the seed's fields and defaults).
    A value out of range is a ConfigurationError (a ValueError) naming the
    field, when the config is made and again when a recorder takes it."""
    enabled: bool = True
    dump_dir: str = "oom_dumps"
    buffer_size: int = 10000
    max_dumps: int = 5
    max_total_mb: int = 256

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        for name, (low, high) in _RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigurationError(
                    "gpumemprof: OOMFlightRecorderConfig(%s=%r): a whole number from %d to %d"
                    % (name, value, low, high))
        if not isinstance(self.dump_dir, (str, os.PathLike)) or not os.fspath(self.dump_dir):
            raise ConfigurationError("gpumemprof: OOMFlightRecorderConfig(dump_dir=%r): a "
                                     "directory's path" % (self.dump_dir,))


@dataclass(frozen=True)
class OOMExceptionClassification:
    """is_oom, and the reason (e.g. "torch.cuda.OutOfMemoryError"; None when not an OOM)."""
    is_oom: bool
    reason: Optional[str] = None


def _text(value):
    return None if value is None else str(value).encode("utf-8", "replace")


def classify_oom_exception(exc: BaseException) -> OOMExceptionClassification:
    """Whether exc is an out-of-memory error, by the C classifier's rules:
    its type (torch's OutOfMemoryError, TensorFlow's ResourceExhaustedError,
    MemoryError and numpy's, CuPy's, ...), a base class of it, or its
    message ("CUDA out of memory", "failed to allocate", ...)."""
    lib = clib.library()
    message = _text(exc)
    for cls in type(exc).__mro__:
        if cls in (BaseException, Exception, object):
            break
        c = lib.gmp_classify_exception(_text(cls.__name__), _text(cls.__module__), message)
        if c.is_oom:
            return OOMExceptionClassification(True, c.reason.decode("utf-8", "replace"))
    c = lib.gmp_classify_exception(None, None, message)
    if c.is_oom:
        return OOMExceptionClassification(True, c.reason.decode("utf-8", "replace"))
    return OOMExceptionClassification(False, None)


_EVENT_TYPES = {
    "allocation": clib.EV_ALLOC, "alloc": clib.EV_ALLOC, "malloc": clib.EV_ALLOC,
    "free": clib.EV_FREE, "deallocation": clib.EV_FREE, "release": clib.EV_FREE,
    "oom": clib.EV_OOM, "sample": clib.EV_SAMPLE, "snapshot": clib.EV_SAMPLE,
    "peak": clib.EV_SAMPLE, "pressure": clib.EV_PRESSURE, "warning": clib.EV_PRESSURE,
    "critical": clib.EV_PRESSURE, "mark": clib.EV_MARK,
}
_BACKENDS = {"cpu": clib.BACKEND_CPU, "host": clib.BACKEND_CPU, "cuda": clib.BACKEND_CUDA,
             "rocm": clib.BACKEND_ROCM, "hip": clib.BACKEND_ROCM}
_U64 = (1 << 64) - 1


def _count(event, *keys):
    """The first of keys that holds a number, as an unsigned 64-bit count."""
    for key in keys:
        value = event.get(key)
        if isinstance(value, bool) or value is None:
            continue
        try:
            n = int(value)
        except (TypeError, ValueError, OverflowError):
            continue
        return min(max(n, 0), _U64)
    return None


def _device(event):
    """device_id (or device): a GPU's index, or -1 for the host."""
    for key in ("device_id", "device"):
        value = event.get(key)
        if isinstance(value, bool) or value is None:
            continue
        try:
            return min(max(int(value), -1), 32767)
        except (TypeError, ValueError, OverflowError):
            continue
    return None


def _to_record(event: Dict[str, Any], api_user: int) -> clib.Event:
    """A payload as the C record.  Understood: event_type, memory_allocated/
    allocated/in_use, size, device_id, backend, timestamp; a sample also
    carries the device's free and total (device_free/free, device_total/
    total), a warning or critical one the total and usage_percent, as the
    preload's own sample and pressure events do.  An event without a known
    type but with a reading is a sample, else a mark."""
    in_use = _count(event, "memory_allocated", "allocated", "in_use")
    kind = _EVENT_TYPES.get(str(event.get("event_type", "")).lower())
    if kind is None:
        kind = clib.EV_SAMPLE if in_use is not None else clib.EV_MARK
    device = _device(event)
    backend = _BACKENDS.get(str(event.get("backend", "")).lower())
    if backend is None:
        backend = clib.BACKEND_CUDA if device is not None and device >= 0 else clib.BACKEND_CPU
    stamp = event.get("timestamp")
    try:
        time_ns = int(float(stamp) * 1e9) if stamp is not None else 0
    except (TypeError, ValueError, OverflowError):
        time_ns = 0
    address = _count(event, "address", "ptr") or 0
    size = _count(event, "size", "bytes") or 0
    total = _count(event, "device_total", "total", "total_bytes")
    result = 0
    if kind == clib.EV_SAMPLE:
        address = _count(event, "device_free", "free", "free_bytes") or 0
        size = total or 0
    elif kind == clib.EV_PRESSURE:
        size = total or 0
        in_use = _count(event, "device_used", "used", "used_bytes", "memory_allocated")
        result = min(_count(event, "usage_percent") or 0, 100)
    return clib.Event(
        time_ns=min(max(time_ns, 0), _U64) or time.time_ns(),
        address=address, size=size, in_use=in_use or 0, result=result,
        device=device if device is not None else -1,
        api=api_user, type=kind, backend=backend)


def _after_fork(recorder_ref):
    recorder = recorder_ref()
    if recorder is not None and recorder._rec:
        clib.library().gmp_recorder_after_fork(recorder._rec)


class OOMFlightRecorder:
    """Bounded recorder that writes a diagnostic bundle on OOM."""

    def __init__(self, config: Optional[OOMFlightRecorderConfig] = None):
        self.config = config or OOMFlightRecorderConfig()
        self.config.validate()
        self._events = collections.deque(maxlen=max(1, int(self.config.buffer_size)))
        self._lock = threading.Lock()
        self._rec = None
        if not self.config.enabled:
            return
        lib = clib.library()
        under = clib.preload_recorder()
        self.uses_preload = under is not None
        if under:
            self._rec = under[1]
            self._say_where(lib)
        else:
            self._rec = self._create(lib)
            if self._rec:  # the ring file goes with the recorder, or at exit
                weakref.finalize(self, lib.gmp_recorder_destroy, self._rec)
                # a forked child records into a ring of its own, and its exit
                # removes that one, not the parent's
                os.register_at_fork(after_in_child=functools.partial(_after_fork,
                                                                     weakref.ref(self)))
        self._api_user = clib.api_user()

    uses_preload = False

    @property
    def dump_dir(self) -> Optional[str]:
        """Where this recorder's bundles go (under the preload, its directory)."""
        if not self._rec:
            return None
        return clib.library().gmp_recorder_dump_dir(self._rec).decode("utf-8", "surrogateescape")

    def _say_where(self, lib):
        """Under the preload one OOM is one bundle, in the directory the run
        was given (GMP_DUMP_DIR: gmp-run --dump-dir, or yours): a dump_dir
        that differs is said once, not dropped silently."""
        asked = os.path.realpath(os.fspath(self.config.dump_dir))
        actual = self.dump_dir
        if actual and os.path.realpath(actual) != asked:
            print("gpumemprof: under the preload, bundles go to %s (the run's GMP_DUMP_DIR), "
                  "not to dump_dir=%r" % (actual, os.fspath(self.config.dump_dir)),
                  file=sys.stderr)

    def _create(self, lib):
        cfg = lib.gmp_config_new()
        if not cfg:
            raise MemoryError("gpumemprof: no memory for the recorder's configuration")
        try:
            c = self.config
            # the C ring keeps at least 16 events; the deque keeps exactly buffer_size
            for name, value in (("GMP_DUMP_DIR", os.path.abspath(os.fspath(c.dump_dir))),
                                ("GMP_BUFFER_SIZE", min(max(int(c.buffer_size), 16), 1 << 24)),
                                ("GMP_MAX_DUMPS", int(c.max_dumps)),
                                ("GMP_MAX_TOTAL_MB", int(c.max_total_mb))):
                if lib.gmp_config_set(cfg, name.encode(), str(value).encode()) != 0:
                    raise ConfigurationError("gpumemprof: %s=%r is refused (see the line above)"
                                             % (name, value))
            return lib.gmp_recorder_create(cfg)
        finally:
            lib.gmp_config_free(cfg)

    def record_event(self, event: Dict[str, Any]) -> None:
        """Append one event payload to the ring buffer."""
        if not self.config.enabled:
            return
        with self._lock:
            self._events.append(dict(event))
        if self._rec:
            record = _to_record(event, self._api_user)
            clib.library().gmp_record(self._rec, ctypes.byref(record))

    def snapshot_events(self) -> List[Dict[str, Any]]:
        """The buffered events, oldest first, as they were recorded."""
        with self._lock:
            return [dict(e) for e in self._events]

    def dump(self, reason: Optional[str] = None, exception: Optional[BaseException] = None,
             context: Optional[str] = None, backend: Optional[str] = None,
             metadata: Optional[Dict[str, Any]] = None) -> Optional[str]:
        """Write a bundle and apply retention; its path, or None when the
        recorder is disabled or the bundle could not be written (one line on
        stderr says why)."""
        if not self.config.enabled or not self._rec:
            return None
        if reason is None:
            reason = (classify_oom_exception(exception).reason if exception is not None
                      else None) or "manual"
        exc_type = exc_module = exc_message = tb_text = None
        if exception is not None:
            exc_type, exc_module = type(exception).__name__, type(exception).__module__
            exc_message = str(exception)
            if exception.__traceback__ is not None:
                tb_text = "".join(traceback.format_exception(
                    type(exception), exception, exception.__traceback__))
        return self._write(reason, exc_type, exc_module, exc_message, tb_text, context, backend,
                           metadata)

    def _write(self, reason, exc_type, exc_module, exc_message, tb_text, context, backend,
               metadata):
        """The bundle, through the C recorder; its path or None."""
        if not self.config.enabled or not self._rec:
            return None
        if backend is None:  # the seed's callers name it; else what the reason says
            low = reason.lower()
            backend = ("cuda" if "cuda" in low else
                       "rocm" if "hip" in low or "rocm" in low else "cpu")
        metadata_json = None
        if metadata is not None:
            metadata_json = json.dumps(dict(metadata), default=str).encode("utf-8")
        with tempfile.TemporaryFile() as tb:
            fd = -1
            if tb_text:
                tb.write(tb_text.encode("utf-8", "replace"))
                tb.flush()
                fd = tb.fileno()
            out = ctypes.create_string_buffer(4096)
            path = clib.dump_function(clib.library())(
                self._rec, _text(reason), _text(exc_type), _text(exc_module), _text(exc_message),
                _text(context), _text(backend), metadata_json, fd, out, len(out))
        if not path:
            return None
        self._attach_recorded(path)
        return path.decode("utf-8", "surrogateescape")

    # recorded_events.json: the payloads as the program recorded them, every
    # key kept (the C events hold the ones they understand); the newest that
    # fit in 8 MiB
    RECORDED_MAX = 8 << 20

    def _attach_recorded(self, bundle: bytes):
        events = self.snapshot_events()
        try:
            text = json.dumps(events, default=str)
            while len(text) > self.RECORDED_MAX and len(events) > 1:
                events = events[len(events) // 2:]
                text = json.dumps(events, default=str)
        except (TypeError, ValueError) as e:  # a payload json cannot write (a cycle)
            print("gpumemprof: recorded_events.json left out: %s" % e, file=sys.stderr)
            return
        data = text.encode("utf-8", "replace")
        if clib.library().gmp_bundle_attach(bundle, b"recorded_events.json", data, len(data)):
            print("gpumemprof: could not add recorded_events.json to %s"
                  % bundle.decode("utf-8", "replace"), file=sys.stderr)
