"""tf_check.py DUMPS -- tfmemprof on real TensorFlow (tensorflow-cpu from
PyPI, in a venv of its own with the wheel), run by test/wheel/run.sh under
the preload: TensorFlowProfiler's training and inference loops profiled
step by step, TFMemoryProfiler's decorator and context measuring what a
call keeps (the preload's counters: exact to the MB), get_results and
reset, tfmemprof's get_system_info, a GPU asked for where TensorFlow sees
none, and a real ResourceExhaustedError caught and bundled by gpumemprof's
MemoryTracker.  One ok/FAIL line a check; exit 1 on any FAIL."""
import glob
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from gpumemprof import ConfigurationError, MemoryTracker  # noqa: E402
from tfmemprof import (TensorFlowProfiler, TFMemoryProfiler, get_system_info,  # noqa: E402
                       profile_context, profile_function)

dumps = sys.argv[1]


from checks import Checks  # noqa: E402

check = Checks("wheel tfmemprof")


profiler = TensorFlowProfiler()
check("TensorFlowProfiler() on a machine with no GPU: /CPU:0, the preload's counters",
      profiler.device == "/CPU:0" and profiler.profiler.source == "preload",
      (profiler.device, profiler.profiler.source))

model = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(256, activation="relu"),
                             tf.keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
x = np.random.rand(512, 32).astype("float32")
y = np.random.rand(512, 1).astype("float32")
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)
profiler.profile_training(model, dataset, epochs=2, steps_per_epoch=3)
profiler.profile_inference(model, x[:256], batch_size=64)
results = profiler.get_results()
names = results.function_profiles
want = {"training", "epoch_0", "epoch_1", "step_0", "step_1", "step_2", "inference",
        "inference_batch_0", "inference_batch_3"}
check("training and inference profiled: the loop, each epoch, each step, each batch",
      want <= set(names) and "step_3" not in names and "inference_batch_4" not in names and
      names["step_0"]["calls"] == 2 and names["training"]["calls"] == 1, sorted(names))
calls = sum(p["calls"] for p in names.values())
check("get_results: a peak, snapshots before and after each, the preload's allocation counts",
      results.peak_memory_mb > 0 and len(results.snapshots) == 2 * calls and
      results.total_allocations > 0 and results.total_deallocations > 0 and
      results.duration >= 0 and results.min_memory_mb <= results.average_memory_mb <=
      results.peak_memory_mb, (results.peak_memory_mb, len(results.snapshots), calls))

tfp = TFMemoryProfiler()
kept = []


@tfp.profile_function
def load_embeddings():
    kept.append(np.ones(64 << 20, dtype=np.uint8))
    return "loaded"


value = load_embeddings()
used = tfp.function_profiles["load_embeddings"]["total_memory_used"]
check("TFMemoryProfiler.profile_function: the call's value, and the 64 MB it kept",
      value == "loaded" and 64 <= used <= 66, used)
with tfp.profile_context("scratch"):
    scratch = tf.ones((4 << 20,), dtype=tf.float32)  # 16 MB, freed at the block's end
    del scratch
peak = tfp.function_profiles["scratch"]["peak_memory"]
check("profile_context: a block's peak is the profiler's, its growth what it kept",
      peak >= tfp.function_profiles["load_embeddings"]["peak_memory"] and
      tfp.function_profiles["scratch"]["calls"] == 1, tfp.function_profiles["scratch"])


@profile_function(profiler=tfp, name="named_step")
def step():
    return 7


with profile_context("global_block", profiler=tfp):
    pass
check("the module-level decorator and context, named",
      step() == 7 and {"named_step", "global_block"} <= set(tfp.function_profiles),
      sorted(tfp.function_profiles))
tfp.reset()
check("reset forgets snapshots and profiles",
      not tfp.snapshots and not tfp.function_profiles and tfp.get_results().snapshots == [])

info = get_system_info()
check("get_system_info: TensorFlow's version, no GPU, the CPU backend",
      info["tensorflow_version"] == tf.__version__ and info["gpu"]["available"] is False and
      info["backend"]["runtime_backend"] == "cpu" and info["backend"]["is_cuda_build"] is False,
      info)
check.refused("/GPU:0 where TensorFlow sees none: a ConfigurationError that says so",
              lambda: TFMemoryProfiler(device="/GPU:0"), ConfigurationError,
              "TensorFlow sees 0 GPU(s)")

# TensorFlow's own out-of-memory error, caught: its one bundle
tracker = MemoryTracker(device="cpu", oom_dump_dir=dumps)
try:
    with tracker.capture_oom(context="embedding_table"):
        tf.zeros((1 << 38,), dtype=tf.float32)  # 1 TiB
    check("a 1 TiB tensor fails", False)
except tf.errors.ResourceExhaustedError:
    found = glob.glob(os.path.join(dumps, "oom_dump_*"))
    meta = json.load(open(os.path.join(found[0], "metadata.json"))) if len(found) == 1 else {}
    check("TensorFlow's ResourceExhaustedError: one bundle, its reason, the context",
          len(found) == 1 and meta.get("reason") == "tensorflow.ResourceExhaustedError" and
          meta.get("context") == "embedding_table" and
          "OOM when allocating tensor" in meta.get("exception_message", ""), (found, meta))
check.exit()
