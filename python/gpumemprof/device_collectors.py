"""gpumemprof.device_collectors: the seed's collector contract on the C
collectors and torch's allocator.

    collector = build_device_memory_collector()      # torch's GPU, else a GPU
    if collector.is_available():                     # the C collectors see, else
        print(collector.name(), collector.sample())  # the host
        print(collector.capabilities())

build_device_memory_collector(device) gives:

  TorchDeviceCollector   "cuda:N" (or None) where torch sees a GPU: torch's
                         allocated and reserved bytes, active and inactive
                         split bytes, and the device's free and total
                         (mem_get_info once CUDA is initialised; else the
                         total the C collectors read, free unknown)
  NativeDeviceCollector  a GPU the C collectors see without torch (NVML
                         first, then the CUDA driver, then ROCm), or the host
                         ("cpu"): used, free and total of the device (the
                         host against the nearest limit this process runs
                         under), and this process's bytes there where the
                         collector can tell them (allocated_bytes)

A number the source cannot tell is None, never a guess."""
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

from . import collectors
from ._devices import import_torch, resolve, torch_backend
from .errors import ConfigurationError

__all__ = ["DeviceMemoryCollector", "DeviceMemorySample", "TorchDeviceCollector",
           "NativeDeviceCollector", "build_device_memory_collector"]


@dataclass(frozen=True)
class DeviceMemorySample:
    """One reading of one device, in bytes."""
    allocated_bytes: Optional[int]
    reserved_bytes: Optional[int]
    used_bytes: Optional[int]
    free_bytes: Optional[int]
    total_bytes: Optional[int]
    active_bytes: Optional[int]
    inactive_bytes: Optional[int]
    device_id: int
    backend: str = "unknown"
    timestamp: float = 0.0
    source: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class DeviceMemoryCollector:
    """The contract: name(), is_available(), sample(), capabilities()."""
    telemetry_collector = "gpumemprof"

    def name(self) -> str:
        raise NotImplementedError

    def is_available(self) -> bool:
        raise NotImplementedError

    def sample(self) -> DeviceMemorySample:
        raise NotImplementedError

    def capabilities(self) -> Dict[str, Any]:
        raise NotImplementedError


class TorchDeviceCollector(DeviceMemoryCollector):
    """A CUDA or ROCm device through torch's caching allocator."""
    telemetry_collector = "gpumemprof.tracker"

    def __init__(self, torch, index: int):
        self.torch, self.index = torch, index

    def name(self) -> str:
        return torch_backend(self.torch)

    def is_available(self) -> bool:
        try:
            return bool(self.torch.cuda.is_available())
        except Exception:
            return False

    def sample(self) -> DeviceMemorySample:
        cuda = self.torch.cuda
        ready = cuda.is_initialized()
        stats = cuda.memory_stats(self.index) if ready else {}
        free = total = None
        if ready:
            free, total = (int(x) for x in cuda.mem_get_info(self.index))
        else:
            for row in collectors.read_all():
                if row["backend"] == self.name() and row["device_id"] == self.index:
                    total = row["total_bytes"]
                    break
        return DeviceMemorySample(
            allocated_bytes=int(cuda.memory_allocated(self.index)),
            reserved_bytes=int(cuda.memory_reserved(self.index)),
            used_bytes=total - free if free is not None and total is not None else None,
            free_bytes=free, total_bytes=total,
            active_bytes=stats.get("active_bytes.all.current"),
            inactive_bytes=stats.get("inactive_split_bytes.all.current"),
            device_id=self.index, backend=self.name(), timestamp=time.time(),
            source="torch.cuda")

    def capabilities(self) -> Dict[str, Any]:
        return {"backend": self.name(), "supports_device_total": True,
                "supports_device_free": True,
                "sampling_source": "torch.cuda.memory_allocated/memory_reserved/mem_get_info",
                "telemetry_collector": self.telemetry_collector}


class NativeDeviceCollector(DeviceMemoryCollector):
    """One device of one of the C toolkit's collectors (cuda, nvml, rocm,
    host): the readings `gmp-inspect info` and the preload's bundles use."""

    def __init__(self, collector: str, device_id: int):
        if collector not in collectors.names():
            raise ConfigurationError("gpumemprof: no collector %r (%s)"
                                     % (collector, ", ".join(collectors.names())))
        self.collector, self.device_id = collector, device_id
        self.telemetry_collector = "gpumemprof.collectors." + collector

    def name(self) -> str:
        return collectors.capabilities(self.collector)["backend"]

    def _row(self):
        rows = collectors.read_one(self.collector, may_load=True,
                                   process_limit=self.device_id < 0) or []
        return next((r for r in rows if r["device_id"] == self.device_id), None)

    def is_available(self) -> bool:
        return self._row() is not None

    def sample(self) -> DeviceMemorySample:
        row = self._row()
        if row is None:
            raise ConfigurationError("gpumemprof: the %s collector cannot read device %d here"
                                     % (self.collector, self.device_id))
        return DeviceMemorySample(
            allocated_bytes=row["process_bytes"], reserved_bytes=None,
            used_bytes=row["used_bytes"], free_bytes=row["free_bytes"],
            total_bytes=row["total_bytes"], active_bytes=None, inactive_bytes=None,
            device_id=self.device_id, backend=row["backend"], timestamp=row["timestamp"],
            source=row["source"])

    def capabilities(self) -> Dict[str, Any]:
        caps = dict(collectors.capabilities(self.collector))
        caps["telemetry_collector"] = self.telemetry_collector
        return caps


def _native_gpu(backend=None, index=None):
    """The first GPU (or GPU index of backend) a C collector reads here."""
    for name in ("nvml", "cuda", "rocm"):
        for row in collectors.read_one(name, may_load=True) or []:
            if (backend is None or row["backend"] == backend) and (
                    index is None or row["device_id"] == index):
                return NativeDeviceCollector(name, row["device_id"])
    return None


def build_device_memory_collector(device=None) -> DeviceMemoryCollector:
    """The collector for device: see the module's text."""
    if import_torch() is None and device is not None and str(device).lower() not in (
            "cpu", "host"):
        kind, _, index = str("cuda:%d" % device if isinstance(device, int) else device
                             ).lower().partition(":")
        backend = {"cuda": "cuda", "rocm": "rocm", "hip": "rocm"}.get(kind)
        found = _native_gpu(backend, int(index) if index.isdigit() else None) if backend else None
        if found is None:
            raise ConfigurationError(
                "gpumemprof: build_device_memory_collector(device=%r): torch is not installed "
                "here, and no collector reads such a device (device='cpu' reads the host)"
                % (device,))
        return found
    if device is None and import_torch() is None:
        return _native_gpu() or NativeDeviceCollector("host", -1)
    found, index = resolve(device, "build_device_memory_collector")
    if found == "host":
        return (_native_gpu() if device is None else None) or NativeDeviceCollector("host", -1)
    return TorchDeviceCollector(found, index)
