"""A stand-in for PyTorch in the wheel's tests, which run with no GPU and
no torch: only what gpumemprof's tracker and the seed's example call, with
torch's names and behaviour (torch.cuda.OutOfMemoryError is a RuntimeError
whose module is torch.cuda; memory_allocated/memory_reserved count bytes;
mem_get_info gives (free, total) of the device; the memory history and the
out-of-memory observer, see cuda.py).  Not PyTorch: the real one is checked
on a GPU machine (make gpu-check)."""
from . import cuda

__version__ = "0.0+standin"


class _C:
    _cuda_attach_out_of_memory_observer = staticmethod(cuda._attach_observer)


class version:
    cuda = "12.4"
    hip = None
