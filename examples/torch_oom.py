"""torch_oom.py — a PyTorch program that asks the GPU for far too much.

`make demo` runs it under the preload on machines with a CUDA GPU and
PyTorch; the caching allocator fails, frees its cache, retries and fails
again, which the preload confirms as one out-of-memory episode.
"""
import torch

x = torch.ones(1 << 20, device="cuda")  # some ordinary work first
try:
    torch.empty(10**13, device="cuda")
except torch.cuda.OutOfMemoryError as exc:
    print("torch_oom:", str(exc).splitlines()[0])
    raise SystemExit(1)
