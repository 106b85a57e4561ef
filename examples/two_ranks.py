"""two_ranks.py -- a stand-in training job for the pictures of docs/user-guide.md, run
as two ranks on the CUDA test double (no GPU needed; the commands under the pictures):
each rank builds its weights, then every step makes its activations and
frees them, and keeps 24 MiB in a cache that is never emptied, until its
1 GiB device is full.  The allocations go through the CUDA runtime by
ctypes, as a framework's would, so the preload records them unchanged."""
import ctypes
import os
import time

cudart = ctypes.CDLL("libcudart.so.13")
rank = int(os.environ.get("RANK", "0"))
cudart.cudaSetDevice(rank)


def device_malloc(size):
    p = ctypes.c_void_p()
    rc = cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))
    if rc:
        raise MemoryError("cudaMalloc(%d) failed with %d" % (size, rc))
    return p


def build_model():
    return [device_malloc(96 << 20) for _ in range(3)]


def forward():
    return [device_malloc((24 + 4 * rank) << 20) for _ in range(6)]


def train():
    weights = build_model()
    cache = []
    for step in range(100):
        activations = forward()
        cache.append(device_malloc(24 << 20))
        time.sleep(0.01)
        for a in reversed(activations):
            cudart.cudaFree(a)
        time.sleep(0.005)
    return weights


train()
