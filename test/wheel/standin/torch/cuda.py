"""torch.cuda as the stand-in gives it: one device of TOTAL bytes, of which
OTHER are held by another process; allocate()/release() move the counts as
the caching allocator would (reserved grows in 2 MiB steps and is kept).
The memory history API gpumemprof's GMP_TORCH_HISTORY uses, as PyTorch
documents it: _lazy_call runs a callable at CUDA's initialisation (here
already done), memory._record_memory_history starts the history,
memory._snapshot returns segments with blocks and their frames, and the
out-of-memory observers (torch._C._cuda_attach_out_of_memory_observer) are
called with (device, request, device_total, device_free) before the
OutOfMemoryError is raised.  As PyTorch 2.11 on an H100 does, a block's
frames are innermost first, and with stacks="all" (the default) C++ frames
("??" or a .cpp, line 0) come among the Python ones."""
import sys

TOTAL = 8 << 30
OTHER = 1 << 30
_state = {"allocated": 0, "reserved": 0, "history": None, "stacks": None, "blocks": [],
          "peak_allocated": 0, "peak_reserved": 0}
_observers = []


class OutOfMemoryError(RuntimeError):
    pass


def is_available():
    return True


def is_initialized():
    return True


def current_device():
    return 0


def device_count():
    return 1


def memory_allocated(device=None):
    return _state["allocated"]


def memory_reserved(device=None):
    return _state["reserved"]


def max_memory_allocated(device=None):
    return _state["peak_allocated"]


def max_memory_reserved(device=None):
    return _state["peak_reserved"]


def reset_peak_memory_stats(device=None):
    _state["peak_allocated"], _state["peak_reserved"] = _state["allocated"], _state["reserved"]


def memory_stats(device=None):
    """The keys the profiler reads, as the caching allocator names them
    (inactive split bytes: reserved blocks split and not in use)."""
    return {"allocated_bytes.all.current": _state["allocated"],
            "allocated_bytes.all.peak": _state["peak_allocated"],
            "reserved_bytes.all.current": _state["reserved"],
            "reserved_bytes.all.peak": _state["peak_reserved"],
            "active_bytes.all.current": _state["allocated"],
            "inactive_split_bytes.all.current": _state["reserved"] - _state["allocated"]}


def synchronize(device=None):
    pass


def empty_cache():
    """The caching allocator gives back the segments no tensor uses."""
    _state["reserved"] = -(-_state["allocated"] // (2 << 20)) * (2 << 20)


def mem_get_info(device=None):
    return TOTAL - OTHER - _state["reserved"], TOTAL


def _lazy_call(fn):
    fn()


class memory:
    @staticmethod
    def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=100000):
        _state["history"] = max_entries
        _state["stacks"] = stacks

    @staticmethod
    def _snapshot():
        blocks = [{"address": 0x7f0000000000 + i * size, "size": size, "requested_size": size,
                   "state": "active_allocated", "frames": frames}
                  for i, (size, frames) in enumerate(_state["blocks"])]
        return {"segments": [{"device": 0, "address": 0x7f0000000000,
                              "total_size": sum(b["size"] for b in blocks), "stream": 0,
                              "blocks": blocks}],
                "device_traces": [[]]}


def _attach_observer(fn):
    _observers.append(fn)


def allocate(nbytes):
    """What a tensor of nbytes does to the counts, or torch's OOM."""
    need = _state["allocated"] + nbytes
    if need > _state["reserved"]:
        grow = -(-(need - _state["reserved"]) // (2 << 20)) * (2 << 20)
        if _state["reserved"] + grow > TOTAL - OTHER:
            free = TOTAL - OTHER - _state["reserved"]
            for observe in list(_observers):
                observe(0, nbytes, TOTAL, free)
            raise OutOfMemoryError(
                "CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 has a total capacity "
                "of %.2f GiB of which %.2f GiB is free." % (nbytes / 2**30, TOTAL / 2**30,
                                                          free / 2**30))
        _state["reserved"] += grow
    _state["allocated"] = need
    _state["peak_allocated"] = max(_state["peak_allocated"], need)
    _state["peak_reserved"] = max(_state["peak_reserved"], _state["reserved"])
    if _state["history"]:  # the caller's Python frames, innermost first
        f, frames = sys._getframe(1), []
        native = _state["stacks"] == "all"
        if native:
            frames += [{"name": "c10::cuda::CUDACachingAllocator::malloc",
                        "filename": "CUDACachingAllocator.cpp", "line": 0},
                       {"name": "at::detail::empty_generic", "filename": "??", "line": 0}]
        while f is not None and len(frames) < 16:
            frames.append({"filename": f.f_code.co_filename, "line": f.f_lineno,
                           "name": f.f_code.co_name})
            if native:
                frames.append({"name": "_PyEval_EvalFrameDefault", "filename": "??", "line": 0})
            f = f.f_back
        _state["blocks"].append((nbytes, frames))


def release(nbytes):
    _state["allocated"] = max(0, _state["allocated"] - nbytes)
