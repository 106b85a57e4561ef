"""get_system_info(): the seed's system and backend diagnostics.  The
devices come from the C collectors (NVML, the CUDA driver, ROCm: the same
readings `gmp-inspect info` prints), so a machine with a GPU and no torch
still says so; torch's own view is added where torch is already importable
(it is imported, never installed): cuda_available and cuda_version,
rocm_available and rocm_version (torch.version.hip), mps_built and
mps_available.  detected_backend: rocm for a ROCm build of torch that sees
a device (it calls them cuda too), else cuda, rocm, mps, the first usable
here, else cpu."""
import importlib.util
import os
import platform
import sys

from . import collectors


def _torch():
    if "torch" in sys.modules:
        return sys.modules["torch"]
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        import torch  # noqa: F401 -- a real dependency only where it is installed
        return torch
    except Exception:  # a broken install says nothing about the machine
        return None


def _call(fn, default):
    try:
        return fn()
    except Exception:
        return default


def get_system_info() -> dict:
    """Get comprehensive system information."""
    info = {
        "platform": platform.platform(),
        "system": platform.system(),
        "machine": platform.machine(),
        "python_version": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }
    readings = _call(lambda: collectors.read_all(may_load=True), [])
    gpus = [r for r in readings if r.get("backend") in ("cuda", "rocm") and r["device_id"] >= 0]
    info["devices"] = gpus
    seen = {r["backend"] for r in gpus}
    torch = _torch()
    info["torch_available"] = torch is not None
    info["torch_version"] = getattr(torch, "__version__", None) if torch else None
    version = getattr(torch, "version", None)
    hip = getattr(version, "hip", None) if torch else None
    cuda_usable = bool(torch and _call(torch.cuda.is_available, False))
    info["cuda_available"] = bool(cuda_usable and not hip) or (not torch and "cuda" in seen)
    info["cuda_version"] = getattr(version, "cuda", None) if torch else None
    # one device a line per collector that reads it (cuda and nvml both): counted once
    info["cuda_device_count"] = (_call(torch.cuda.device_count, 0) if cuda_usable else
                                 len({r["device_id"] for r in gpus if r["backend"] == "cuda"}))
    info["rocm_available"] = bool(cuda_usable and hip) or (not torch and "rocm" in seen)
    info["rocm_version"] = hip
    mps = getattr(getattr(torch, "backends", None), "mps", None) if torch else None
    info["mps_built"] = bool(mps and _call(mps.is_built, False))
    info["mps_available"] = bool(mps and _call(mps.is_available, False))
    info["detected_backend"] = ("rocm" if cuda_usable and hip else
                                "cuda" if info["cuda_available"] else
                                "rocm" if info["rocm_available"] else
                                "mps" if info["mps_available"] else "cpu")
    return info
