# pylarge.py — the large-allocation python3 workload of `make bench`:
# 5,000 blocks of 2 MiB, eight alive at a time; under the preload each is
# a host allocation over GMP_HOST_EVENT_MIN_BYTES, so an event with a stack.
blocks = [None] * 8
for i in range(5000):
    blocks[i % 8] = bytes(2 << 20)
assert len(blocks[0]) == 2 << 20
