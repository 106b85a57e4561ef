"""tfmemprof: the seed's TensorFlow profiler, on gpumemprof.

    from tfmemprof import TensorFlowProfiler
    profiler = TensorFlowProfiler()               # '/GPU:0' where TensorFlow sees one
    profiler.profile_training(model, dataset, epochs=1, steps_per_epoch=10)
    print(profiler.get_results().peak_memory_mb)

TFMemoryProfiler (profiler.py) measures with gpumemprof's profiler:
TensorFlow's allocator counters on a GPU, the preload's counters of the
process's host allocations on the CPU (else its resident memory); the
`tfmemprof` command (cli.py) reads devices through gpumemprof's C
collectors, so it needs no TensorFlow; an out-of-memory error TensorFlow
raises is caught and bundled by gpumemprof's MemoryTracker or preload."""
from gpumemprof.errors import ConfigurationError, ProfilerError, VisualizationError
from gpumemprof.utils import format_memory

from .profiler import (MemorySnapshot, ProfileResult, TensorFlowProfiler, TFMemoryProfiler,
                       get_global_profiler, profile_context, profile_function,
                       set_global_profiler)
from .system_info import get_system_info

__all__ = ["TensorFlowProfiler", "TFMemoryProfiler", "MemorySnapshot", "ProfileResult",
           "profile_function", "profile_context", "get_global_profiler", "set_global_profiler",
           "get_system_info", "format_memory", "ProfilerError", "ConfigurationError",
           "VisualizationError"]
