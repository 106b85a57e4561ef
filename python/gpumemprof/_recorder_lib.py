"""ctypes binding of the C recorder (include/gpumemprof.h): the functions
the Python recorder calls, and the event record.  In a process running
under the preload, the preload's own copies of these functions are used
with its recorder (one ring, one bundle per OOM); otherwise the recorder
library of the wheel (libgpumemprof.so, no hooks)."""
import ctypes

from ._native import recorder_library_path
# the header's structs, enums and flags, written from it at build time
from ._c_types import (BACKEND_CPU, BACKEND_CUDA, BACKEND_ROCM, DS_DRIVER_PROCESS,  # noqa: F401
                       DS_OTHERS, DS_USED, EV_ALLOC, EV_FREE, EV_MARK, EV_OOM, EV_PRESSURE,
                       EV_SAMPLE, SAMPLE_MAY_LOAD, SAMPLE_PROCESS_LIMIT, Classification,
                       CollectorCaps, DeviceState, Event, Growth, HostReading)


assert ctypes.sizeof(Event) == 64


def _declare(lib):
    p, c = ctypes.c_void_p, ctypes.c_char_p
    for name, restype, argtypes in (
        ("gmp_config_new", p, []),
        ("gmp_config_free", None, [p]),
        ("gmp_config_set", ctypes.c_int, [p, c, c]),
        ("gmp_recorder_create", p, [p]),
        ("gmp_recorder_destroy", None, [p]),
        ("gmp_recorder_after_fork", None, [p]),
        ("gmp_recorder_dump_dir", c, [p]),
        ("gmp_record", ctypes.c_int, [p, ctypes.POINTER(Event)]),
        ("gmp_dump_exception", c, [p, c, c, c, c, c, c, c, ctypes.c_int, c, ctypes.c_size_t]),
        ("gmp_classify_exception", Classification, [c, c, c]),
        ("gmp_api_name", c, [ctypes.c_uint]),
        ("gmp_backend_name", c, [ctypes.c_uint]),
        ("gmp_bundle_attach", ctypes.c_int, [c, c, c, ctypes.c_size_t]),
        ("gmp_collector_count", ctypes.c_int, []),
        ("gmp_collector_name", c, [ctypes.c_int]),
        ("gmp_collector_sample", ctypes.c_int, [ctypes.c_int, ctypes.c_uint,
                                                ctypes.POINTER(DeviceState), ctypes.c_size_t,
                                                ctypes.POINTER(ctypes.c_char_p)]),
        ("gmp_collector_capabilities", ctypes.c_int, [ctypes.c_int,
                                                      ctypes.POINTER(CollectorCaps)]),
        ("gmp_growth_judge", ctypes.c_int, [ctypes.POINTER(ctypes.c_double),
                                            ctypes.POINTER(ctypes.c_double), ctypes.c_size_t,
                                            ctypes.c_double, ctypes.c_double,
                                            ctypes.POINTER(Growth)]),
        ("gmp_growth_severity_name", c, [ctypes.c_int]),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


_loaded = {}


def preload_recorder():
    """(library, recorder) of the preload this process runs under, or None
    (no preload, or its recording is off)."""
    if "preload" not in _loaded:
        found = None
        try:
            process = ctypes.CDLL(None)
            get = process.gmp_preload_recorder
            get.restype, get.argtypes = ctypes.c_void_p, []
            rec = get()
            if rec:
                found = (_declare(process), rec)
        except (AttributeError, OSError):
            pass
        try:  # the report of an OOM the preload saw joins that OOM's bundle
            joined = found[0].gmp_preload_dump_exception if found else None
            joined.restype = ctypes.c_char_p
            joined.argtypes = found[0].gmp_dump_exception.argtypes
        except AttributeError:  # a preload older than this package
            pass
        _loaded["preload"] = found
    return _loaded["preload"]


class PreloadHostCounters:
    """The preload's host counters (gmp_preload_host_counts) and its peak
    watches, for a program measuring a stretch of itself."""

    def __init__(self, process):
        self._begin = process.gmp_preload_peak_watch_begin
        self._begin.restype, self._begin.argtypes = ctypes.c_int, []
        self._read = process.gmp_preload_host_counts
        self._read.restype = ctypes.c_int
        self._read.argtypes = [ctypes.c_int, ctypes.POINTER(HostReading)]
        self._end = process.gmp_preload_peak_watch_end
        self._end.restype, self._end.argtypes = None, [ctypes.c_int]

    def begin_watch(self):
        """A peak watch (its number), or -1 when none is free."""
        return self._begin()

    def read(self, watch=-1):
        """(in_use, allocations, frees, peak) now, or None when the preload
        does not record; peak is the watch's (0 without one)."""
        out = HostReading()
        if self._read(watch, ctypes.byref(out)) != 0:
            return None
        return out.in_use, out.allocations, out.frees, out.peak

    def end_watch(self, watch):
        if watch >= 0:
            self._end(watch)


def preload_host_counters():
    """PreloadHostCounters of the preload this process runs under, or None
    (no preload, one that does not record, or one older than this package)."""
    if "host_counters" not in _loaded:
        found = None
        if preload_recorder() is not None:
            try:
                found = PreloadHostCounters(ctypes.CDLL(None))
            except (AttributeError, OSError):
                pass
        _loaded["host_counters"] = found
    return _loaded["host_counters"]


def dump_function(lib):
    """gmp_dump_exception, or under the preload its gmp_preload_dump_exception
    (one OOM, one bundle: see gpumemprof.h)."""
    under = preload_recorder()
    joined = getattr(under[0], "gmp_preload_dump_exception", None) if under else None
    return joined if joined is not None and under[0] is lib else lib.gmp_dump_exception


def library():
    """The recorder functions: the preload's when it is there, else the
    wheel's recorder library."""
    if "lib" not in _loaded:
        under = preload_recorder()
        _loaded["lib"] = under[0] if under else _declare(ctypes.CDLL(recorder_library_path()))
    return _loaded["lib"]


def own_library():
    """The wheel's recorder library itself, even under the preload: for the
    tools (monitor, track), whose collectors may load the GPU libraries."""
    if "own" not in _loaded:
        _loaded["own"] = _declare(ctypes.CDLL(recorder_library_path()))
    return _loaded["own"]


def api_user():
    """gmp_api's USER: the API an event recorded by the program names."""
    lib = library()
    for i in range(256):
        name = lib.gmp_api_name(i)
        if name == b"user":
            return i
        if name in (None, b"unknown") and i > 0:
            break
    return 0
