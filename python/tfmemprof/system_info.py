"""tfmemprof.get_system_info(): the seed's TensorFlow system information.
The machine and its GPUs come from gpumemprof's C collectors (so a GPU is
seen whether TensorFlow can use it or not); TensorFlow's own view (its
version, the GPUs its runtime sees, how it was built) where TensorFlow is
installed (imported, never installed)."""
import os
import platform

from gpumemprof import collectors

from .profiler import import_tensorflow

GB = float(1 << 30)
MB = float(1 << 20)


def _call(fn, default):
    try:
        return fn()
    except Exception:  # a broken install says nothing about the machine
        return default


def get_system_info() -> dict:
    """Get TensorFlow system information."""
    info = {"platform": platform.platform(), "python_version": platform.python_version(),
            "cpu_count": os.cpu_count()}
    host = (_call(lambda: collectors.read_one("host"), None) or [None])[0]
    if host and host["total_bytes"]:
        info["total_memory_gb"] = host["total_bytes"] / GB
        info["available_memory_gb"] = (host["free_bytes"] or 0) / GB
        info["memory_source"] = host["source"]
    readings = _call(lambda: collectors.read_all(may_load=True), [])
    seen = {}
    for r in readings:  # a GPU two collectors read (CUDA and NVML) once
        if r["device_id"] >= 0:
            seen.setdefault((r["backend"], r["device_id"]), r)
    tf = import_tensorflow()
    info["tensorflow_version"] = getattr(tf, "__version__", None) if tf else None
    runtime = _call(lambda: tf.config.list_physical_devices("GPU"), []) if tf else []
    build = _call(lambda: dict(tf.sysconfig.get_build_info()), {}) if tf else {}
    devices = []
    for i, _ in enumerate(runtime):
        mem = _call(lambda: tf.config.experimental.get_memory_info("GPU:%d" % i), {})
        row = seen.get(("cuda", i)) or seen.get(("rocm", i)) or {}
        devices.append({"name": row.get("name") or "GPU:%d" % i,
                        "current_memory_mb": mem.get("current", 0) / MB,
                        "peak_memory_mb": mem.get("peak", 0) / MB,
                        "total_memory_mb": (row.get("total_bytes") or 0) / MB})
    info["gpu"] = {"available": bool(runtime), "count": len(runtime),
                   "total_memory": sum(d["total_memory_mb"] for d in devices),
                   "devices": devices}
    if tf is None:
        info["gpu"]["error"] = "TensorFlow is not installed here"
    rocm = bool(build.get("is_rocm_build"))
    info["backend"] = {
        "hardware_gpu_detected": bool(seen),
        "hardware_gpus": [{"backend": b, "device": d, "name": r["name"],
                           "total_bytes": r["total_bytes"]} for (b, d), r in sorted(seen.items())],
        "runtime_backend": ("rocm" if rocm else "cuda") if runtime else "cpu",
        "runtime_gpu_count": len(runtime),
        "is_cuda_build": bool(build.get("is_cuda_build")),
        "is_rocm_build": rocm,
        "is_tensorrt_build": bool(build.get("is_tensorrt_build")),
        "cuda_version": build.get("cuda_version"),
        "cudnn_version": build.get("cudnn_version"),
        "is_apple_silicon": False,      # this package is for Linux
        "tensorflow_metal_installed": False,
    }
    return info
