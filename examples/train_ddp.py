"""train_ddp.py -- a distributed job that runs out of host memory, for
docs/distributed.md and test_distributed: three ranks of gloo (on the CPU)
exchange a few all_reduce, then rank 1 (ONE=1, the default) or every rank
(ONE=0) allocates 256 MiB blocks under a 6 GiB address-space limit
(RLIMIT_AS) until torch's CPU allocator refuses.  Rank 1 raises its error
1.5 s later; the others are still handling theirs, or waiting, when the
launcher stops them.

    torchrun --nproc-per-node 3 examples/train_ddp.py
    accelerate launch --multi_gpu --num_processes 3 examples/train_ddp.py
    python examples/train_ddp.py spawn      # torch.multiprocessing.spawn
"""
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record  # torchrun's error file gets the rank's traceback
def main(rank=None, world=None):
    if rank is None:
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29533", rank=rank,
                                world_size=world)
    rank = dist.get_rank()
    t = torch.ones(1 << 16)
    for _ in range(10):
        dist.all_reduce(t)
    if os.environ.get("ONE", "1") == "0" or rank == 1:
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        hold = []
        try:
            while True:
                hold.append(torch.empty(256 << 20, dtype=torch.uint8))
        except RuntimeError:
            time.sleep(1.5 if rank == 1 else 60)
            raise
    time.sleep(60)


if __name__ == "__main__":
    if sys.argv[1:] == ["spawn"]:
        import torch.multiprocessing as mp
        mp.spawn(main, args=(3,), nprocs=3)
    else:
        main()
