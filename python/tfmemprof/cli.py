"""The `tfmemprof` command, as the seed names its verbs:

    tfmemprof info
    tfmemprof monitor [--interval S] [--duration S] [--threshold MB] [--device DEV] [--output FILE]
    tfmemprof track   [--interval S] [--duration S] [--threshold MB] [--device DEV] --output FILE
    tfmemprof analyze --input FILE [--detect-leaks] [--optimize] [--visualize] [--report FILE]

monitor and track read one device every interval through gpumemprof's C
collectors ("/GPU:N": that GPU's memory in use, all processes; "/CPU:0":
the host's against the memory it can have), so they need no TensorFlow
and see every process on the device; crossing --threshold (MB) upward is
one alert, on stderr and in the results.  Both run until --duration or
Ctrl-C and write the results (the seed's: peak_memory, average_memory,
duration, memory_usage, timestamps, alerts; MB and seconds) to --output;
monitor also prints each reading.  analyze reads such a results file, or
a file `gpumemprof monitor` or `track` wrote: --detect-leaks is gpumemprof's
leak rule (the one `gmp-inspect leaks` applies to a bundle), --optimize
what the readings suggest doing, --visualize the memory over time as an
SVG drawing (gmp-inspect plot), --report all of it as text in FILE."""
import argparse
import json
import os
import sys
import time

from gpumemprof import __version__, collectors
from gpumemprof.commands import _until, plot_readings, readings_series
from gpumemprof.leaks import detect_leaks
from gpumemprof.utils import format_memory

MB = float(1 << 20)


def _positive(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number" % text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be a positive number")
    return value


# -- info -------------------------------------------------------------------------------
def cmd_info(args):
    from .system_info import get_system_info
    info = get_system_info()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print("TensorFlow Memory Profiler - System Information")
    print("=" * 50)
    print("Platform: %s" % info["platform"])
    print("Python Version: %s" % info["python_version"])
    print("TensorFlow Version: %s" % (info["tensorflow_version"] or "not installed here"))
    print("CPU Count: %s" % info["cpu_count"])
    if "total_memory_gb" in info:
        print("Total System Memory: %.2f GB (%s)" % (info["total_memory_gb"],
                                                    info["memory_source"]))
        print("Available Memory: %.2f GB" % info["available_memory_gb"])
    gpu, backend = info["gpu"], info["backend"]
    print("\nGPU Information:")
    print("-" * 20)
    if gpu["available"]:
        print("GPU Available: Yes")
        print("GPU Count: %d" % gpu["count"])
        for i, d in enumerate(gpu["devices"]):
            print("GPU %d: %s, %.1f MB in use by TensorFlow (peak %.1f MB)"
                  % (i, d["name"], d["current_memory_mb"], d["peak_memory_mb"]))
    else:
        print("GPU Hardware Detected: %s" % ("Yes" if backend["hardware_gpu_detected"] else "No"))
        for d in backend["hardware_gpus"]:
            print("  %s:%d %s, %s" % (d["backend"], d["device"], d["name"],
                                      format_memory(d["total_bytes"])))
        print("GPU Available to TensorFlow Runtime: No")
        if gpu.get("error"):
            print("Error: %s" % gpu["error"])
    print("\nTensorFlow Backend Diagnostics:")
    print("-" * 30)
    for key, words in (("runtime_backend", "Runtime Backend"),
                       ("runtime_gpu_count", "Runtime GPU Count"),
                       ("is_cuda_build", "CUDA Build"), ("is_rocm_build", "ROCm Build"),
                       ("is_tensorrt_build", "TensorRT Build"),
                       ("cuda_version", "CUDA Version"), ("cudnn_version", "cuDNN Version")):
        print("%s: %s" % (words, backend[key] if backend[key] is not None else "unknown"))
    return 0


# -- monitor and track ----------------------------------------------------------------
class _Device:
    """One device as the collectors read it: a GPU ("/GPU:N") or the host."""

    def __init__(self, device):
        gpus = {}
        for name in ("nvml", "cuda", "rocm"):
            for row in collectors.read_one(name, may_load=True) or []:
                gpus.setdefault(row["device_id"], name)
        text = (device or ("/GPU:0" if 0 in gpus else "/CPU:0")).upper().lstrip("/")
        kind, _, index = text.partition(":")
        if kind == "GPU" and index.isdigit() and int(index) in gpus:
            self.label, self.collector, self.index = "/GPU:%s" % index, gpus[int(index)], int(index)
        elif kind == "CPU":
            self.label, self.collector, self.index = "/CPU:0", "host", -1
        else:
            raise SystemExit("tfmemprof: no device %s here (the collectors see %s)" % (
                device, ", ".join(["/GPU:%d" % i for i in sorted(gpus)] + ["/CPU:0"])))

    def read(self):
        """(bytes in use, total) now, or None."""
        for row in collectors.read_one(self.collector, may_load=True) or []:
            if row["device_id"] == self.index and row["used_bytes"] is not None:
                return row["used_bytes"], row["total_bytes"]
        return None


def _sample_until(args, verbose):
    device = _Device(args.device)
    results = {"device": device.label, "threshold_mb": args.threshold, "memory_usage": [],
               "timestamps": [], "alerts": [], "events": [], "total_memory": None}
    above = [False]

    def tick():
        reading = device.read()
        if reading is None:
            return
        used, total = reading
        now = time.time()
        results["memory_usage"].append(used / MB)
        results["timestamps"].append(now)
        results["total_memory"] = total / MB if total else None
        results["events"].append({"timestamp": now, "event_type": "sample",
                                  "memory_mb": used / MB})
        if verbose:
            print("%s  %s  %.1f MB in use%s" % (
                time.strftime("%H:%M:%S", time.localtime(now)), device.label, used / MB,
                " of %.1f MB" % (total / MB) if total else ""), flush=True)
        crossed = args.threshold is not None and used / MB > args.threshold
        if crossed and not above[0]:
            message = "%s at %.1f MB, above the threshold of %g MB" % (
                device.label, used / MB, args.threshold)
            alert = {"timestamp": now, "memory_mb": used / MB, "threshold_mb": args.threshold,
                     "message": message}
            results["alerts"].append(alert)
            results["events"].append(dict(alert, event_type="alert"))
            print("tfmemprof: alert: %s" % message, file=sys.stderr, flush=True)
        above[0] = crossed

    print("tfmemprof: reading %s every %g s%s%s" % (
        device.label, args.interval,
        " for %g s" % args.duration if args.duration else " until Ctrl-C",
        "; alert above %g MB" % args.threshold if args.threshold is not None else ""),
        file=sys.stderr)
    _until(args.duration, args.interval, tick)
    usage = results["memory_usage"]
    results["peak_memory"] = max(usage) if usage else 0.0
    results["average_memory"] = sum(usage) / len(usage) if usage else 0.0
    stamps = results["timestamps"]
    results["duration"] = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    return results


def _finish(results, output, events):
    if not events:
        results.pop("events")
    if output:
        with open(output, "w") as f:
            json.dump(results, f, indent=2)
    print("Peak Memory: %.1f MB\nAverage Memory: %.1f MB\nDuration: %.1f seconds\n"
          "Samples Collected: %d\nAlerts Triggered: %d%s" % (
              results["peak_memory"], results["average_memory"], results["duration"],
              len(results["memory_usage"]), len(results["alerts"]),
              "\nResults saved to %s" % output if output else ""))
    return 0


def cmd_monitor(args):
    return _finish(_sample_until(args, verbose=True), args.output, events=False)


def cmd_track(args):
    return _finish(_sample_until(args, verbose=False), args.output, events=True)


# -- analyze ----------------------------------------------------------------------------
def _recommendations(name, peak, average, total, leak):
    out = []
    if total and peak >= 0.9 * total:
        out.append("%s peaked at %.0f%% of its %.0f MB: a larger batch or model will not fit; "
                   "lower the batch size, or turn on memory growth (tf.config.experimental."
                   "set_memory_growth) so that TensorFlow takes only what it uses"
                   % (name, 100.0 * peak / total, total / MB))
    if leak["detected"]:
        out.append("%s grew and never came back down (%.1f MB over %.1f s): free what each "
                   "step keeps, or bound the cache that keeps it"
                   % (name, leak["memory_increase_mb"], leak["time_window_seconds"]))
    if average > 0 and peak > 2 * average:
        out.append("%s's peak is %.1fx its average: the spikes, not the steady use, decide "
                   "what fits; look at the step that makes them" % (name, peak / average))
    return out


def cmd_analyze(args):
    if not os.path.isfile(args.input):
        print("tfmemprof analyze: %s: no such file" % args.input, file=sys.stderr)
        return 1
    try:
        series = [s for s in readings_series(args.input) if s[1]]
    except (OSError, ValueError, UnicodeDecodeError) as e:
        print("tfmemprof analyze: %s: not a file monitor or track wrote: %s" % (args.input, e),
              file=sys.stderr)
        return 1
    if not series:
        print("tfmemprof analyze: %s holds no readings" % args.input, file=sys.stderr)
        return 1
    lines = ["Analysis of %s" % args.input]
    report = {"input": args.input, "devices": []}
    for name, ts, vs, total in series:
        peak, average = max(vs), sum(vs) / len(vs)
        entry = {"device": name, "samples": len(vs), "duration": ts[-1] - ts[0],
                 "peak_memory_mb": peak / MB, "average_memory_mb": average / MB,
                 "min_memory_mb": min(vs) / MB, "total_memory_mb": total / MB if total else None}
        lines += ["", "%s:" % name,
                  "  Peak Memory: %s" % format_memory(peak),
                  "  Average Memory: %s" % format_memory(average),
                  "  Duration: %.2f seconds, %d samples" % (entry["duration"], len(vs))]
        leak = detect_leaks(ts, vs, limit=total, what=name)
        if args.detect_leaks:
            entry["leak_detection"] = leak
            lines.append("  Memory leak analysis: %s" % (
                "growth that stayed, severity %s: +%.1f MB over %.1f s"
                % (leak["severity"], leak["memory_increase_mb"], leak["time_window_seconds"])
                if leak["detected"] else "no growth that stayed"))
            lines += ["    - %s" % s for s in leak["suggestions"]]
        if args.optimize:
            recs = _recommendations(name, peak, average, total, leak)
            entry["recommendations"] = recs
            lines.append("  Recommendations:" if recs else "  Recommendations: none; the "
                         "readings show no peak near the limit, no growth and no spikes")
            lines += ["    %d. %s" % (i, r) for i, r in enumerate(recs, 1)]
        report["devices"].append(entry)
    if args.visualize:
        svg = os.path.abspath(args.plot or "memory_timeline.svg")
        rc, said = plot_readings(series, svg, "memory over time: " + os.path.basename(args.input))
        if rc:
            print("tfmemprof analyze: the drawing failed: %s" % said.strip(), file=sys.stderr)
            return 1
        lines += ["", "Timeline drawn: %s" % svg]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n" + json.dumps(report, indent=2) + "\n")
        print("Report saved to %s" % args.report)
    return 0


def parser():
    p = argparse.ArgumentParser(prog="tfmemprof", description="TensorFlow memory profiler: "
                                "the devices' memory through gpumemprof's collectors, and "
                                "analysis of what was read.")
    p.add_argument("--version", action="version", version="tfmemprof " + __version__)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser("info", help="system, TensorFlow and GPU information")
    info.add_argument("--json", action="store_true", help="one JSON document")
    info.set_defaults(func=cmd_info)
    for verb, text in (("monitor", "read a device's memory each interval, printing each"),
                       ("track", "read a device's memory in the background, into --output")):
        v = sub.add_parser(verb, help=text, description=text.capitalize() + ".")
        v.add_argument("--interval", type=_positive, default=1.0,
                       help="sampling interval in seconds (default: 1.0)")
        v.add_argument("--duration", type=_positive,
                       help="seconds to run (default: until Ctrl-C)")
        v.add_argument("--threshold", type=_positive, metavar="MB",
                       help="memory alert threshold in MB")
        v.add_argument("--device", help="'/GPU:N' or '/CPU:0' (default: /GPU:0 where the "
                                        "collectors see a GPU, else /CPU:0)")
        v.add_argument("--output", required=verb == "track", metavar="FILE",
                       help="the results, as JSON")
        v.set_defaults(func=cmd_monitor if verb == "monitor" else cmd_track)
    a = sub.add_parser("analyze", help="analyze what monitor or track wrote",
                       description="Analyze what monitor or track wrote (or gpumemprof "
                                   "monitor/track).")
    a.add_argument("--input", required=True, metavar="FILE", help="the results file")
    a.add_argument("--detect-leaks", action="store_true",
                   help="growth that is never given back (gpumemprof's leak rule)")
    a.add_argument("--optimize", action="store_true", help="what the readings suggest doing")
    a.add_argument("--visualize", action="store_true",
                   help="draw the memory over time (memory_timeline.svg, or --plot)")
    a.add_argument("--plot", metavar="FILE.svg", help="where --visualize draws")
    a.add_argument("--report", metavar="FILE", help="write the analysis there too")
    a.set_defaults(func=cmd_analyze)
    return p


def main(argv=None):
    p = parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if not getattr(args, "func", None):
        p.print_help(sys.stderr)
        return 2
    return args.func(args)
