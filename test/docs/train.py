"""train.py — the `train.py` of the documentation's commands (README.md,
docs/): run_doc_commands.py copies it into the scratch directory where a
page's commands run.  It stands in for a training script that dies of
memory: each step's activations are kept by mistake, and the job has 1 GiB
of address space more than it started with (its own RLIMIT_AS, so the
examples end the same on any machine), so step 60 or so raises MemoryError
and the script exits 1, as a real job would.  No GPU, no framework."""
import resource
import sys


def address_space_in_use():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def train_step(step, kept):
    activations = bytearray(16 << 20)      # this step's activations, 16 MiB
    kept.append(activations)               # the mistake: nothing ever lets them go
    return len(kept)


def main():
    limit = address_space_in_use() + (1 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    kept = []
    for step in range(1000):
        train_step(step, kept)
    print("train.py: the limit never bit", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
