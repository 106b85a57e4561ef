"""seed_example.py DUMP_DIR -- the usage example of the Python flight
recorder this project generalises, as a program would write it: a recorder
configured, the memory state recorded each step of a training loop, and an
exception that is classified, dumped with the step's metadata and
re-raised.  The model is a stand-in whose activations grow each step until
the device is full (test/wheel/standin's torch: no GPU here).  Run by
test/wheel/run.sh, which expects exit 1 (the OOM goes on up) and checks the
bundle."""
import sys
import time

import torch
from gpumemprof.oom_flight_recorder import (OOMFlightRecorder, OOMFlightRecorderConfig,
                                            classify_oom_exception)

config = OOMFlightRecorderConfig(enabled=True, dump_dir=sys.argv[1], buffer_size=10000,
                                 max_dumps=10, max_total_mb=512)
recorder = OOMFlightRecorder(config)


def record_memory_state():
    if torch.cuda.is_available():
        recorder.record_event({"timestamp": time.time(),
                               "allocated": torch.cuda.memory_allocated(),
                               "reserved": torch.cuda.memory_reserved(),
                               "device_id": 0})


class LargeModel:
    """Stands in for a network: 1 GiB of weights, and a forward pass whose
    activations grow with the step (a sequence length that keeps rising)."""

    def __init__(self):
        self.weights = 1 << 30

    def cuda(self):
        torch.cuda.allocate(self.weights)
        return self

    def parameters(self):
        return [self.weights // 4]

    def __call__(self, batch, step):
        activations = batch * (step + 1) * (256 << 20)
        torch.cuda.allocate(activations)
        torch.cuda.release(activations)


batches = [8, 8, 8]
epoch = batch = model = None
try:
    model = LargeModel().cuda()
    for epoch in range(100):
        for batch in batches:
            record_memory_state()
            model(batch, epoch)
except Exception as exc:
    classification = classify_oom_exception(exc)
    if classification.is_oom:
        print("OOM Error detected: %s" % classification.reason)
        dump_path = recorder.dump(
            reason=classification.reason, exception=exc, context="training_loop",
            backend="cuda",
            metadata={"epoch": epoch, "batch_size": batch,
                      "model_params": sum(model.parameters()) if model else 0})
        if dump_path:
            print("Diagnostic dump saved to: %s" % dump_path)
    raise
finally:
    print("Currently tracking %d events" % len(recorder.snapshot_events()))
