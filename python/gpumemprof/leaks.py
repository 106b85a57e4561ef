"""gpumemprof.leaks: the seed's leak detection on a series of readings,
by the rule `gmp-inspect leaks` applies to a bundle's sites and devices
(gmp_growth_judge, in the C library): what is held after the frees
climbs in every quarter of the window, by 1 MiB and 2% of the end at
least.

    from gpumemprof.leaks import detect_leaks
    result = detect_leaks(timestamps, used_bytes, window_s=60, limit=total)
    if result["detected"]:
        print(result["severity"], result["memory_increase_mb"], result["suggestions"])

The result is the seed's dict (detected, severity, memory_increase_mb,
time_window_seconds, suggestions), and the rule's own numbers beside it
(rises: quarters whose lowest rose, 3 for growth; points: readings in the
window, 8 needed)."""
import ctypes
from typing import Any, Dict, Optional, Sequence

from . import _recorder_lib as clib

__all__ = ["detect_leaks"]

MB = float(1 << 20)


def detect_leaks(timestamps: Sequence[float], held: Sequence[float],
                 window_s: Optional[float] = None, limit: Optional[float] = None,
                 what: str = "memory") -> Dict[str, Any]:
    """The leak-detection result of a series: timestamps (seconds,
    ascending) and what was held then (bytes); window_s: its last seconds
    only; limit: the bytes severity is a share of (a device's total, the
    process's limit); what: the words the suggestions use for it."""
    n = min(len(timestamps), len(held))
    t = (ctypes.c_double * max(n, 1))(*[float(x) for x in timestamps[:n]])
    v = (ctypes.c_double * max(n, 1))(*[float(x) for x in held[:n]])
    g = clib.Growth()
    lib = clib.library()
    rc = lib.gmp_growth_judge(t, v, n, float(window_s or 0), float(limit or 0), ctypes.byref(g))
    if rc != 0:
        raise ValueError("gpumemprof: detect_leaks: the series holds a value that is no number")
    result = {"detected": bool(g.detected),
              "severity": lib.gmp_growth_severity_name(g.severity).decode(),
              "memory_increase_mb": g.increase / MB if g.detected else 0.0,
              "time_window_seconds": g.window_s, "suggestions": [],
              "rises": int(g.rises), "points": int(g.points)}
    if g.detected:
        result["suggestions"].append(
            "%s grew by %.1f MB over %.1f s and never came back down: look for what is kept "
            "each step (tensors kept alive, a list of losses, a cache with no bound)"
            % (what, g.increase / MB, g.window_s))
        rate = g.increase / g.window_s if g.window_s > 0 else 0
        if limit and rate > 0 and limit > g.end:
            result["suggestions"].append(
                "at this rate (%.1f MB/s) the limit of %.1f MB is reached in %.0f s"
                % (rate / MB, limit / MB, (limit - g.end) / rate))
    elif g.points < 8:
        result["suggestions"].append("too few readings to tell (%d in the window, 8 needed)"
                                     % g.points)
    return result
