"""gpumemprof.collectors: one reading of every memory collector the C
toolkit has (cuda, nvml, rocm, host), as plain dicts, for the tracker and
the `monitor` and `track` commands.

    for row in read_all(may_load=True):
        print(row["collector"], row["backend"], row["device_id"], row["used_percent"])

A row is one device as one collector saw it; the host is device -1, its
total the memory cgroup's limit when one binds, else the machine's.  A
number the collector could not tell is None (the CUDA collector, outside
a context of its own, knows a device's total but not what is free).
may_load lets the collectors load the GPU libraries they need (a tool
does; inside a program they only use what the program loaded)."""
import time
from typing import Any, Dict, List, Optional

from . import _recorder_lib as clib

__all__ = ["read_all", "read_one", "availability", "capabilities", "names", "FIELDS"]

# the columns of a reading, in the order monitor's CSV writes them
FIELDS = ("timestamp", "collector", "backend", "device_id", "name", "used_bytes", "free_bytes",
          "total_bytes", "used_percent", "process_bytes", "other_processes_bytes",
          "other_process_count", "source")

_UNKNOWN = (1 << 64) - 1
_MAX_DEVICES = 16


def _known(value):
    return None if value == _UNKNOWN else int(value)


def _row(lib, collector: str, d: "clib.DeviceState", now: float) -> Dict[str, Any]:
    total, free = _known(d.total), _known(d.free_bytes)
    if d.known & clib.DS_USED:
        used = _known(d.used_bytes)
    else:
        used = total - free if total is not None and free is not None and free <= total else None
    process = None
    if d.known & clib.DS_DRIVER_PROCESS:
        process = _known(d.driver_process_bytes)
    others = count = None
    if d.known & clib.DS_OTHERS:
        others, count = _known(d.other_processes_bytes), int(d.other_process_count)
    percent = round(100.0 * used / total, 2) if used is not None and total else None
    backend = lib.gmp_backend_name(d.backend)
    return {
        "timestamp": d.sampled_ns / 1e9 if d.sampled_ns else now,
        "collector": collector,
        "backend": backend.decode() if backend else "unknown",
        "device_id": int(d.device),
        "name": d.name.decode("utf-8", "replace"),
        "used_bytes": used,
        "free_bytes": free,
        "total_bytes": total,
        "used_percent": percent,
        "process_bytes": process,
        "other_processes_bytes": others,
        "other_process_count": count,
        "source": d.source.decode("utf-8", "replace") if d.source else None,
    }


def _each(lib, may_load, only=None, process_limit=False):
    """(name, rows or None, why not) for every collector (or collector only)."""
    flags = (clib.SAMPLE_MAY_LOAD if may_load else 0) | (
        clib.SAMPLE_PROCESS_LIMIT if process_limit else 0)
    buf = (clib.DeviceState * _MAX_DEVICES)()
    for i in range(lib.gmp_collector_count()) if only is None else (only,):
        name = lib.gmp_collector_name(i).decode()
        why = clib.ctypes.c_char_p()
        now = time.time()
        n = lib.gmp_collector_sample(i, flags, buf, _MAX_DEVICES, clib.ctypes.byref(why))
        if n < 0:
            yield name, None, (why.value or b"").decode("utf-8", "replace")
        else:
            yield name, [_row(lib, name, buf[k], now) for k in range(n)], None


def _lib(may_load):
    # a tool's loading must not change what the preload's copy may do
    return clib.own_library() if may_load else clib.library()


def read_all(may_load: bool = False) -> List[Dict[str, Any]]:
    """One reading of every device of every collector that can sample here."""
    lib = _lib(may_load)
    return [row for _, rows, _ in _each(lib, may_load) if rows for row in rows]


def _index(lib, collector):
    for i in range(lib.gmp_collector_count()):
        if lib.gmp_collector_name(i).decode() == collector:
            return i
    return None


def read_one(collector: str, may_load: bool = False,
             process_limit: bool = False) -> Optional[List[Dict[str, Any]]]:
    """The devices of one collector ("host", "nvml", ...); None when it
    cannot sample here.  process_limit: the host against the nearest limit
    this process runs under (RLIMIT_AS, its cgroup, the machine)."""
    lib = _lib(may_load)
    i = _index(lib, collector)
    return None if i is None else next(_each(lib, may_load, only=i,
                                             process_limit=process_limit))[1]


def names() -> List[str]:
    """The collectors, in the order the C toolkit lists them."""
    lib = clib.library()
    return [lib.gmp_collector_name(i).decode() for i in range(lib.gmp_collector_count())]


def capabilities(collector: str) -> Optional[Dict[str, Any]]:
    """What a collector can tell (whether or not it can sample here):
    backend, supports_device_total, supports_device_free,
    supports_process_usage, sampling_source; None for no such collector."""
    lib = clib.library()
    i = _index(lib, collector)
    caps = clib.CollectorCaps()
    if i is None or lib.gmp_collector_capabilities(i, clib.ctypes.byref(caps)) != 0:
        return None
    backend = lib.gmp_backend_name(caps.backend)
    return {"backend": backend.decode() if backend else "unknown",
            "supports_device_total": bool(caps.supports_device_total),
            "supports_device_free": bool(caps.supports_device_free),
            "supports_process_usage": bool(caps.supports_process_usage),
            "sampling_source": (caps.sampling_source or b"").decode() or None}


def availability(may_load: bool = False) -> List[Dict[str, Optional[str]]]:
    """Each collector: {"collector", "available", "why_not"}."""
    return [{"collector": name, "available": rows is not None, "why_not": why}
            for name, rows, why in _each(_lib(may_load), may_load)]
