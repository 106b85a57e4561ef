"""profiler_check.py MODE -- the seed's profiler API (GPUMemoryProfiler,
profile_function, profile_context, MemorySnapshot, ProfileResult) and its
collector contract (gpumemprof.device_collectors) on the installed wheel,
run by test/wheel/run.sh in each mode:

  preload     under LD_PRELOAD: host numbers from the preload's counters,
              exact to the block (a kept 300 MiB, a 500 MiB spike freed
              inside the call, nested blocks with peaks of their own)
  rss         without the preload: the resident memory, said on stderr
  torch       the stand-in torch on the path: cuda:0 through its allocator
  collectors  build_device_memory_collector with no torch and no GPU
  doubles     the same with the collectors' GPU doubles (two NVIDIA GPUs)

One ok/FAIL line a check; exit 1 on any FAIL."""
import json
import sys
import threading

mode = sys.argv[1]
MiB = 1 << 20


from checks import Checks  # noqa: E402

check = Checks("wheel profiler (%s)" % mode)


from gpumemprof import (ConfigurationError, GPUMemoryProfiler, MemorySnapshot,  # noqa: E402
                        ProfileResult, build_device_memory_collector, profile_context,
                        profile_function)
from gpumemprof.device_collectors import DeviceMemorySample  # noqa: E402

SEED_SNAPSHOT = {"timestamp", "allocated_memory", "reserved_memory", "max_memory_allocated",
                 "max_memory_reserved", "active_memory", "inactive_memory", "cpu_memory",
                 "device_id", "operation"}
SEED_RESULT = {"function_name", "execution_time", "memory_before", "memory_after", "memory_peak",
               "memory_allocated", "memory_freed", "tensors_created", "tensors_deleted",
               "call_count"}


def seed_shapes(result):
    d = result.to_dict()
    check("ProfileResult and MemorySnapshot have the seed's fields, and to_dict is JSON",
          isinstance(result, ProfileResult) and isinstance(result.memory_peak, MemorySnapshot) and
          SEED_RESULT <= set(d) and SEED_SNAPSHOT <= set(d["memory_before"]) and
          bool(json.dumps(d)), d)
    call = result.function_call()
    check("the seed's function-call dict",
          set(call) == {"name", "start_time", "end_time", "duration", "memory_start_mb",
                        "memory_end_mb", "memory_peak_mb"} and
          call["end_time"] >= call["start_time"], call)


def host_profile(exact):
    """exact: the preload's counters (to the block); else resident memory."""
    profiler = GPUMemoryProfiler(device="cpu", collect_stack_traces=True)
    check("device 'cpu' is the host, its source %s" % ("preload" if exact else "rss"),
          profiler.device == "cpu" and profiler.source == ("preload" if exact else "rss"),
          (profiler.device, profiler.source))
    kept = []

    def load_weights():
        kept.append(bytearray(300 * MiB))
        return "loaded"

    result = profiler.profile_function(load_weights)
    slack = 2 * MiB if exact else 40 * MiB
    check("a kept 300 MiB: memory_allocated is 300 MiB",
          300 * MiB <= result.memory_allocated <= 300 * MiB + slack and result.memory_freed == 0,
          result.to_dict())
    seed_shapes(result)
    if exact:
        check("the preload counted the calls that took and gave back host blocks",
              result.allocation_calls >= 1 and result.free_calls is not None, result.to_dict())
    check("the snapshot's stack names the line that profiled",
          "profiler_check.py" in (result.memory_before.stack_trace or ""),
          result.memory_before.stack_trace)

    def spike():
        scratch = bytearray(500 * MiB)
        return len(scratch)

    result = profiler.profile_function(spike)
    rise = result.peak_memory_usage() - result.memory_before.allocated_memory
    check("a 500 MiB spike freed inside the call: the peak is 500 MiB above the start, "
          "nothing kept", 500 * MiB - (0 if exact else 10 * MiB) <= rise <= 500 * MiB + slack and
          result.memory_allocated < (MiB if exact else 40 * MiB), (rise, result.to_dict()))

    # nested blocks: each its own peak; the inner never resets the outer
    with profiler.profile_context("outer"):
        a = bytearray(200 * MiB)
        del a
        with profiler.profile_context("inner") as same:
            b = bytearray(50 * MiB)
            del b
    inner, outer = profiler.results[-2], profiler.results[-1]
    inner_rise = inner.peak_memory_usage() - inner.memory_before.allocated_memory
    outer_rise = outer.peak_memory_usage() - outer.memory_before.allocated_memory
    if exact:
        check("nested blocks: outer's peak 200 MiB up, inner's 50 MiB (its own watch)",
              same is profiler and inner.function_name == "inner" and
              outer.function_name == "outer" and 200 * MiB <= outer_rise <= 202 * MiB and
              50 * MiB <= inner_rise <= 52 * MiB, (outer_rise, inner_rise))

    # an exception goes on up; its result is still recorded
    def fails():
        bytearray(10 * MiB)
        raise ValueError("bad batch")
    try:
        profiler.profile_function(fails)
        check("an exception in the profiled call goes on up", False)
    except ValueError:
        last = profiler.results[-1]
        check("an exception goes on up, and its result is recorded with its type",
              last.function_name == "fails" and last.raised == "ValueError", last.to_dict())

    # concurrent profiles in threads do not disturb each other
    rises = {}
    both_held = threading.Barrier(2, timeout=30)

    def hold(n):
        block = bytearray(n * MiB)
        both_held.wait()
        return len(block)

    def worker(n):
        p = profiler.profile_function(lambda: hold(n))
        rises[n] = p.peak_memory_usage() - p.memory_before.allocated_memory
    threads = [threading.Thread(target=worker, args=(n,)) for n in (64, 128)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    if exact:
        # each profile reads the whole process, so both blocks are held at
        # once (the barrier): a block the other thread freed between this
        # profile's start and its own allocation took this one's rise with
        # it (CI, 2 cores: {64: 9304})
        check("two threads' profiles each see their own block (to the MiB)",
              rises.get(64, 0) >= 63 * MiB and rises.get(128, 0) >= 127 * MiB, rises)

    profiler.start_monitoring(0.01)
    bytearray(20 * MiB)
    import time
    time.sleep(0.15)
    profiler.stop_monitoring()
    summary = profiler.get_summary()
    check("monitoring collects snapshots; get_summary aggregates per name",
          summary["snapshots_collected"] >= 5 and not summary["monitoring_active"] and
          summary["function_summaries"]["load_weights"]["call_count"] == 1 and
          summary["total_function_calls"] == len(profiler.results) and
          summary["peak_memory_usage"] >= 500 * MiB, summary)
    profiler.clear_results()
    summary = profiler.get_summary()
    check("clear_results forgets results and snapshots",
          not profiler.results and summary["snapshots_collected"] == 0 and
          "No profiling results" in summary["message"], summary)

    # the module-level decorator and context: the call runs once
    calls = []

    @profile_function
    def step(x):
        calls.append(x)
        return x * 2

    @profile_function(name="named_step")
    def other():
        return bytearray(MiB)

    value = step(21)
    other()
    with profile_context("block"):
        bytearray(MiB)
    from gpumemprof.profiler import get_global_profiler
    names = [r.function_name for r in get_global_profiler().results]
    check("@profile_function returns the function's value and runs it once; names kept",
          value == 42 and calls == [21] and names == ["step", "named_step", "block"], names)


def torch_profile():
    import torch
    profiler = GPUMemoryProfiler()
    check("device None with torch seeing a GPU is cuda:0 through torch",
          profiler.device == "cuda:0" and profiler.source == "torch", profiler.device)
    kept = []
    result = profiler.profile_function(lambda: kept.append(torch.empty(1 << 30, device="cuda")))
    check("a kept 1 GiB tensor: memory_allocated 1 GiB, one tensor created",
          result.memory_allocated == 1 << 30 and result.tensors_created == 1 and
          result.memory_after.reserved_memory >= 1 << 30, result.to_dict())

    def spike():
        t = torch.empty(2 << 30, device="cuda")
        del t
    result = profiler.profile_function(spike)
    check("a 2 GiB tensor freed inside: the peak is torch's, 3 GiB (the kept one with it)",
          result.peak_memory_usage() == 3 << 30 and result.memory_allocated == 0 and
          result.memory_peak.inactive_memory is not None, result.to_dict())
    kept.clear()
    result = profiler.profile_function(lambda: None)
    check("the next call's peak starts again (torch's peak statistics reset)",
          result.peak_memory_usage() == 0, result.to_dict())
    collector = build_device_memory_collector()
    sample = collector.sample()
    caps = collector.capabilities()
    check("build_device_memory_collector: torch's cuda:0, its sample and capabilities",
          collector.name() == "cuda" and collector.is_available() and
          isinstance(sample, DeviceMemorySample) and sample.total_bytes == torch.cuda.TOTAL and
          sample.device_id == 0 and caps["backend"] == "cuda" and
          {"supports_device_total", "supports_device_free", "sampling_source",
           "telemetry_collector"} <= set(caps), (sample, caps))


def collectors_only(gpus):
    collector = build_device_memory_collector()
    sample = collector.sample()
    caps = collector.capabilities()
    keys = {"backend", "supports_device_total", "supports_device_free", "sampling_source",
            "telemetry_collector"}
    if gpus:
        check("no torch, two GPUs the collectors see: the first, from NVML",
              collector.name() == "cuda" and sample.device_id == 0 and
              sample.total_bytes == 1 << 30 and caps["sampling_source"] == "nvml" and
              keys <= set(caps), (sample, caps))
        second = build_device_memory_collector("cuda:1")
        check("cuda:1 without torch: the collectors' second GPU",
              second.sample().device_id == 1, second.sample())
    else:
        check("no torch, no GPU: the host, against the nearest limit",
              collector.name() == "cpu" and collector.is_available() and
              sample.device_id == -1 and sample.total_bytes > 0 and
              sample.source in ("meminfo", "cgroup", "RLIMIT_AS") and keys <= set(caps),
              (sample, caps))
        check.refused("cuda:0 with no torch and no GPU: a ConfigurationError that says why",
                      lambda: build_device_memory_collector("cuda:0"), ConfigurationError,
                      "torch is not installed")
        check.refused("GPUMemoryProfiler('cuda:0') with no torch: a ConfigurationError",
                      lambda: GPUMemoryProfiler(device="cuda:0"), ConfigurationError,
                      "torch is not installed")


if mode == "preload":
    host_profile(exact=True)
elif mode == "rss":
    host_profile(exact=False)
elif mode == "torch":
    torch_profile()
elif mode in ("collectors", "doubles"):
    collectors_only(mode == "doubles")
check.exit()
