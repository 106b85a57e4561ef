"""A stand-in for PyTorch in the wheel's tests, which run with no GPU and
no torch: only what gpumemprof's tracker, profiler and the seed's example
call, with torch's names and behaviour (torch.empty(n, device="cuda") of
uint8 holds n bytes of the device until it is freed; the peak statistics
reset_peak_memory_stats starts again; torch.cuda.OutOfMemoryError is a RuntimeError
whose module is torch.cuda; memory_allocated/memory_reserved count bytes;
mem_get_info gives (free, total) of the device; the memory history and the
out-of-memory observer, see cuda.py).  Not PyTorch: the real one is checked
on a GPU machine (make gpu-check)."""
from . import cuda

__version__ = "0.0+standin"


class _C:
    _cuda_attach_out_of_memory_observer = staticmethod(cuda._attach_observer)


class Tensor:
    """A tensor of uint8 holds its bytes of the device until it is freed."""

    def __init__(self, nbytes, is_cuda):
        self.nbytes, self.is_cuda = nbytes, is_cuda
        if is_cuda:
            cuda.allocate(nbytes)

    def __del__(self):
        if self.is_cuda:
            cuda.release(self.nbytes)


def empty(n, dtype=None, device=None):
    return Tensor(int(n), str(device or "cpu").startswith("cuda"))


def is_tensor(obj):
    return isinstance(obj, Tensor)


class version:
    cuda = "12.4"
    hip = None
