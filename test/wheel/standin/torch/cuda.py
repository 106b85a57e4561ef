"""torch.cuda as the stand-in gives it: one device of TOTAL bytes, of which
OTHER are held by another process; allocate()/release() move the counts as
the caching allocator would (reserved grows in 2 MiB steps and is kept)."""
TOTAL = 8 << 30
OTHER = 1 << 30
_state = {"allocated": 0, "reserved": 0}


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


def mem_get_info(device=None):
    return TOTAL - OTHER - _state["reserved"], TOTAL


def allocate(nbytes):
    """What a tensor of nbytes does to the counts, or torch's OOM."""
    need = _state["allocated"] + nbytes
    if need > _state["reserved"]:
        grow = -(-(need - _state["reserved"]) // (2 << 20)) * (2 << 20)
        if _state["reserved"] + grow > TOTAL - OTHER:
            free = TOTAL - OTHER - _state["reserved"]
            raise OutOfMemoryError(
                "CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 has a total capacity "
                "of %.2f GiB of which %.2f GiB is free." % (nbytes / 2**30, TOTAL / 2**30,
                                                          free / 2**30))
        _state["reserved"] += grow
    _state["allocated"] = need


def release(nbytes):
    _state["allocated"] = max(0, _state["allocated"] - nbytes)
