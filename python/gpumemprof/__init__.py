"""gpumemprof: records the memory a process allocates -- on NVIDIA and AMD
GPUs and on the host -- and writes a diagnostic bundle when the process
runs out of memory.  The recording is done by a native preload with no code
change:

    gmp-run python train.py                   # or: python -m gpumemprof run train.py
    LD_PRELOAD=$(python -m gpumemprof --preload-path) python train.py
    gmp-inspect show oom_dumps/oom_dump_...

This package carries the preload, the tools and the recorder library of the
C toolkit (see _native), and the Python API on that recorder: MemoryTracker
(tracker.py), the OOM flight recorder (oom_flight_recorder.py), the
profiler (profiler.py), the collectors' readings (collectors.py) and the
seed's collector contract on them (device_collectors.py), the seed's
get_system_info (system_info.py) and its exception classes (errors.py)."""
from ._native import native_path, preload_path, recorder_library_path
from .errors import ConfigurationError, ProfilerError, VisualizationError
from .oom_flight_recorder import (OOMExceptionClassification, OOMFlightRecorder,
                                  OOMFlightRecorderConfig, classify_oom_exception)
from .tracker import MemoryTracker
from .profiler import (GPUMemoryProfiler, MemorySnapshot, ProfileResult, profile_context,
                       profile_function)
from .device_collectors import (DeviceMemoryCollector, DeviceMemorySample,
                                build_device_memory_collector)
from .system_info import get_system_info
from .utils import format_memory

try:
    from ._version import __version__
except ImportError:  # a source checkout: the wheel build writes _version.py
    __version__ = "0+unknown"

__all__ = ["__version__", "native_path", "preload_path", "recorder_library_path",
           "MemoryTracker", "OOMFlightRecorder", "OOMFlightRecorderConfig",
           "OOMExceptionClassification", "classify_oom_exception", "format_memory",
           "get_system_info", "ProfilerError", "ConfigurationError", "VisualizationError",
           "GPUMemoryProfiler", "MemorySnapshot", "ProfileResult", "profile_function",
           "profile_context", "DeviceMemoryCollector", "DeviceMemorySample",
           "build_device_memory_collector"]
