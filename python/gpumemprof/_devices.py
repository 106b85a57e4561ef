"""Which device a profiler, tracker or collector of the Python API means,
decided once for all of them: "cpu"/"host" is the host; "cuda", "cuda:N",
"rocm:N", "hip:N", an int or a torch.device is a GPU read through torch
(ROCm builds of torch call their devices cuda too); None is torch's current
GPU when torch is importable and sees one, else the host.  A GPU asked for
where torch is missing or sees none is a ConfigurationError that says
which, and what to ask for instead."""
import importlib
import sys

from .errors import ConfigurationError


def import_framework(name):
    """The framework module name (torch, tensorflow), or None: not
    installed, or broken (the host is still read).  Imported where it is
    installed, never installed."""
    if name in sys.modules:
        return sys.modules[name]
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def import_torch():
    return import_framework("torch")


def _text(device):
    if isinstance(device, int) and not isinstance(device, bool):
        return "cuda:%d" % device
    text = str(device).lower()
    kind, index = getattr(device, "type", None), getattr(device, "index", None)
    if kind is not None:  # a torch.device
        text = kind if index is None else "%s:%d" % (kind, index)
    return text


def resolve(device, who, extra=()):
    """(torch, index) for a GPU, ("host", None) for the host, or (text,
    None) for one of `extra` ("all", "gpus"); else ConfigurationError."""
    if device is None:
        torch = import_torch()
        if torch is not None and _call(torch.cuda.is_available):
            return torch, int(torch.cuda.current_device())
        return "host", None
    text = _text(device)
    if text in ("cpu", "host"):
        return "host", None
    if text in extra:
        return text, None
    kind, _, index = text.partition(":")
    if kind in ("cuda", "rocm", "hip"):
        torch = import_torch()
        if torch is None:
            raise ConfigurationError(
                "gpumemprof: %s(device=%r): torch is not installed here, and a device is "
                "read through it (device='cpu' reads the host)" % (who, device))
        if not _call(torch.cuda.is_available):
            raise ConfigurationError("gpumemprof: %s(device=%r): torch sees no CUDA or ROCm "
                                     "device here (device='cpu' reads the host)" % (who, device))
        try:
            number = int(index) if index else int(torch.cuda.current_device())
        except ValueError:
            number = -1
        count = _call(torch.cuda.device_count) or 0
        if not 0 <= number < count:
            raise ConfigurationError("gpumemprof: %s(device=%r): torch sees %d device(s) here"
                                     % (who, device, count))
        return torch, number
    if kind == "mps":
        raise ConfigurationError("gpumemprof: %s(device=%r): MPS is Apple's, and this "
                                 "package is for Linux (device='cpu' reads the host)"
                                 % (who, device))
    raise ConfigurationError("gpumemprof: %s(device=%r): not a device this reads ('cuda:N', "
                             "'cpu'%s or None)" % (who, device,
                                                   "".join(", %r" % e for e in extra)))


def _call(fn):
    try:
        return fn()
    except Exception:  # a broken torch says nothing about the machine
        return None


def torch_backend(torch):
    """"rocm" for a ROCm build of torch, else "cuda"."""
    return "rocm" if getattr(getattr(torch, "version", None), "hip", None) else "cuda"
