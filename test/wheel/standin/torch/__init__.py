"""A stand-in for PyTorch in the wheel's tests, which run with no GPU and
no torch: only what gpumemprof's tracker and the seed's example call, with
torch's names and behaviour (torch.cuda.OutOfMemoryError is a RuntimeError
whose module is torch.cuda; memory_allocated/memory_reserved count bytes;
mem_get_info gives (free, total) of the device).  Not PyTorch: the real one
is checked on a GPU machine (make gpu-check)."""
from . import cuda  # noqa: F401

__version__ = "0.0+standin"


class version:
    cuda = "12.4"
    hip = None
