"""gpumemprof's sitecustomize, for GMP_TORCH_HISTORY=1: PyTorch's own memory
history in the bundle of a CUDA OOM, with no code change.  gmp-run and
`python -m gpumemprof run` put this directory first on PYTHONPATH when the
variable is set; Python then runs this file at start, before the program.

Once the program imports torch, and only when torch sees a CUDA device, two
things are queued for the moment the program itself initialises CUDA
(torch.cuda._lazy_call: no context is made here, a forked data loader is
not broken): PyTorch's memory history (_record_memory_history, at most
GMP_TORCH_HISTORY_ENTRIES entries, default 100000; Python frames only:
unwinding the C++ stack at every allocation is what makes PyTorch's default
dear) and an out-of-memory observer.  At a CUDA OOM the observer, which
PyTorch calls before the exception unwinds, takes PyTorch's snapshot and
hands it to the preload (gmp_preload_torch_snapshot), which adds it to
that OOM's bundle as torch_snapshot.pickle (memory_viz opens it as it is)
with torch_blocks.json, the largest live blocks and their Python frames,
which `gmp-inspect show` prints.  Without torch, without a GPU, or when torch refuses, the program
runs as it would and one line on stderr says why.  The sitecustomize this
one hides, if any, runs after it."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_state = {"looked": False, "imported": False}


def _say(message):
    sys.stderr.write("gpumemprof: GMP_TORCH_HISTORY: %s\n" % message)


def _entries():
    try:
        return max(1, int(os.environ.get("GMP_TORCH_HISTORY_ENTRIES", "100000")))
    except ValueError:
        _say("GMP_TORCH_HISTORY_ENTRIES=%r is not a number; using 100000"
             % os.environ.get("GMP_TORCH_HISTORY_ENTRIES"))
        return 100000


# What a C or C++ frame of a mixed stack (stacks="all") is filed under; a
# Python frame's file is a .py, or "<string>" for `python -c`.
_NATIVE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hpp")


def _is_python_frame(frame):
    filename = str(frame.get("filename") or "")
    return filename not in ("", "??") and not filename.endswith(_NATIVE_SUFFIXES)


def _largest_blocks(snapshot, count=10):
    """The largest active blocks, with their Python frames, innermost first."""
    blocks = []
    for seg in snapshot.get("segments", []):
        for b in seg.get("blocks", []):
            if b.get("state") != "active_allocated":
                continue
            frames = [{"filename": f.get("filename"), "line": f.get("line"), "name": f.get("name")}
                      for f in b.get("frames", []) if _is_python_frame(f)]
            blocks.append({"device": seg.get("device"), "address": b.get("address"),
                           "size": b.get("size"), "requested_size": b.get("requested_size"),
                           "python_frames": frames[:8]})
    blocks.sort(key=lambda b: b["size"] or 0, reverse=True)
    return blocks[:count]


def _observer(torch):
    # PyTorch's arguments: the device, the request, the device's total (or
    # the limit set_per_process_memory_fraction made of it), what is free
    def observe(device, request, device_total, device_free):
        try:
            import ctypes
            import json
            import pickle
            snapshot = torch.cuda.memory._snapshot()
            data = pickle.dumps(snapshot)
            summary = json.dumps({"device": device, "request": request,
                                  "device_total": device_total,
                                  "device_free": device_free,
                                  "largest_blocks": _largest_blocks(snapshot)},
                                 default=str).encode()
            try:
                hand = ctypes.CDLL(None).gmp_preload_torch_snapshot
            except AttributeError:
                _say("not under the preload (gmp-run): the snapshot has no bundle to go to")
                return
            hand.restype = ctypes.c_int
            hand.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p,
                             ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
            if hand(int(device), max(0, int(request)), max(0, int(device_free)), data, len(data),
                    summary, len(summary)) != 0:
                _say("the preload could not add PyTorch's snapshot to a bundle")
        except Exception as e:  # never the reason the program fails differently
            _say("PyTorch's snapshot could not be taken: %r" % (e,))
    return observe


def _start(torch):
    def start():
        try:
            torch.cuda.memory._record_memory_history(max_entries=_entries(), stacks="python")
            torch._C._cuda_attach_out_of_memory_observer(_observer(torch))
        except Exception as e:
            _say("torch refused to record its memory history: %r" % (e,))
    return start


def _after_torch(torch):
    _state["imported"] = True
    try:
        if not torch.cuda.is_available():
            _say("torch sees no CUDA device; nothing recorded")
            return
        torch.cuda._lazy_call(_start(torch))
    except Exception as e:
        _say("torch refused: %r; nothing recorded" % (e,))


class _TorchImport:
    """A finder that runs _after_torch once torch's package has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or _state["looked"]:
            return None
        _state["looked"] = True  # once, and not for the lookups below
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            _after_torch(module)
        loader.exec_module = exec_module
        return spec


def _at_exit():
    if not _state["imported"]:
        _say("this Python never imported torch; nothing recorded")


def _chain():
    """The sitecustomize this one hides, as Python would have run it."""
    import importlib.machinery
    import importlib.util
    path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    except Exception as e:
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n"
                         % (type(e).__name__, e))


if os.environ.get("GMP_TORCH_HISTORY") == "1":
    import atexit
    sys.meta_path.insert(0, _TorchImport())
    atexit.register(_at_exit)
_chain()
