"""The seed's command verbs on the toolkit, for `gpumemprof VERB`:

    info      [--json]                         gmp-inspect info: what the collectors see,
                                               and this Python's view (get_system_info)
    monitor   [--duration S] [--interval S] [--output FILE] [--format text|csv|json]
              every collector's reading of every device, every interval
    track     [--duration S] [--interval S] [--output FILE] [--format csv|json]
              [--warning-threshold PCT] [--critical-threshold PCT] [--dump-dir DIR]
              [--devices all|gpus|host] [--watchdog]
              the same devices through a MemoryTracker: warnings and critical
              crossings on stderr and as events, a memory-pressure bundle in
              DIR at critical, the events in FILE at the end
    analyze   PATH [--format txt|json] [--output FILE] [--visualization] [--plot-dir DIR]
              a bundle (gmp-inspect show), a directory of bundles (triage,
              then the newest shown), or a monitor/track file (per device:
              samples, peak, last); with --visualization or --plot-dir, each
              bundle's memory over time as DIR/<bundle>.svg (gmp-inspect plot)

monitor and track run until --duration or until interrupted (Ctrl-C,
SIGTERM); what they wrote is then complete (a JSON array is closed)."""
import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from . import collectors
from ._native import native_path
from .utils import format_memory

FORMATS_BY_EXTENSION = {".json": "json", ".csv": "csv"}
_MB = float(1 << 20)


def _where(row):
    return "host" if row["device_id"] < 0 else "%s:%d" % (row["backend"], row["device_id"])


class _RowWriter:
    """Rows out as text lines, CSV or one JSON array, flushed as they come."""

    def __init__(self, stream, fmt, fields):
        self.stream, self.fmt, self.fields, self.count = stream, fmt, fields, 0
        if fmt == "csv":
            self.csv = csv.DictWriter(stream, fieldnames=fields, extrasaction="ignore")
            self.csv.writeheader()
        elif fmt == "json":
            stream.write("[")

    def write(self, row):
        if self.fmt == "csv":
            self.csv.writerow({k: "" if row.get(k) is None else row.get(k) for k in self.fields})
        elif self.fmt == "json":
            self.stream.write((",\n " if self.count else "\n ") + json.dumps(row))
        else:
            pct = "" if row.get("used_percent") is None else " (%.1f%%)" % row["used_percent"]
            self.stream.write("%s  %-5s %-8s %-24s used %s of %s%s\n" % (
                time.strftime("%H:%M:%S", time.localtime(row["timestamp"])), row["collector"],
                _where(row), (row.get("name") or "")[:24], format_memory(row.get("used_bytes")),
                format_memory(row.get("total_bytes")), pct))
        self.count += 1
        self.stream.flush()

    def close(self):
        if self.fmt == "json":
            self.stream.write("\n]\n" if self.count else "]\n")
        self.stream.flush()


def _output(path, fmt, default):
    """(stream, format): FILE's format from --format, else its extension."""
    if fmt is None:
        fmt = FORMATS_BY_EXTENSION.get(os.path.splitext(path)[1].lower(), "csv") if path else default
    stream = open(path, "w", newline="" if fmt == "csv" else None) if path else sys.stdout
    return stream, fmt


def _until(duration, interval, tick):
    """tick() every interval seconds until duration (None: until SIGINT or
    SIGTERM, which end the loop quietly)."""
    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        end = None if duration is None else time.monotonic() + duration
        while not stop["now"]:
            tick()
            left = interval if end is None else min(interval, end - time.monotonic())
            if left <= 0:
                break
            deadline = time.monotonic() + left
            while not stop["now"] and time.monotonic() < deadline:
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _parse_number(text, what):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not %s" % (text, what))


def _positive(text):
    value = _parse_number(text, "a number of seconds")
    if not value > 0:
        raise argparse.ArgumentTypeError("must be a positive number")
    return value


def _percent(text):
    value = _parse_number(text, "a percentage")
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError("must be a percentage in (0, 100]")
    return value


def _sampling_parser(verb, description):
    """monitor's and track's shared options: how long, how often."""
    p = argparse.ArgumentParser(prog="gpumemprof " + verb, description=description)
    p.add_argument("--duration", type=_positive, help="seconds (default: until interrupted)")
    p.add_argument("--interval", type=_positive, default=1.0, help="seconds between readings")
    return p


def monitor(args):
    p = _sampling_parser("monitor", "Every collector's reading of every device, every "
                                    "interval, until --duration or Ctrl-C.")
    p.add_argument("--output", help="write there instead of stdout")
    p.add_argument("--format", choices=("text", "csv", "json"),
                   help="default: text on stdout; for --output, by its extension (.json, else csv)")
    a = p.parse_args(args)
    stream, fmt = _output(a.output, a.format, "text")
    out = _RowWriter(stream, fmt, collectors.FIELDS)
    for c in collectors.availability(may_load=True):
        if not c["available"]:
            print("gpumemprof monitor: %s: %s" % (c["collector"], c["why_not"]), file=sys.stderr)
    try:
        _until(a.duration, a.interval, lambda: [out.write(r) for r in
                                                collectors.read_all(may_load=True)])
    finally:
        out.close()
        if a.output:
            stream.close()
    return 0


TRACK_FIELDS = ("timestamp", "event_type", "backend", "device_id", "name", "memory_allocated",
                "device_used", "device_free", "device_total", "usage_percent", "context")


def track(args):
    from .tracker import MemoryTracker
    p = _sampling_parser("track", "Track every device's usage: warnings at thresholds, a "
                                  "memory-pressure bundle at critical.")
    p.add_argument("--output", help="the events, written at the end (.json, else csv)")
    p.add_argument("--format", choices=("csv", "json"))
    p.add_argument("--warning-threshold", type=_percent, default=80.0, metavar="PCT")
    p.add_argument("--critical-threshold", type=_percent, default=95.0, metavar="PCT")
    p.add_argument("--dump-dir", default="oom_dumps", help="where bundles go (default oom_dumps)")
    p.add_argument("--devices", choices=("all", "gpus", "host"), default="all",
                   help="every device and the host (default), only the GPUs, only the host")
    p.add_argument("--watchdog", action="store_true",
                   help="at each crossing, clean up what this process can give back "
                        "(gc.collect, torch's cached blocks); memory another process holds "
                        "is its own: run a MemoryTracker(enable_watchdog=True) inside it")
    a = p.parse_args(args)
    if a.warning_threshold > a.critical_threshold:
        p.error("--warning-threshold is above --critical-threshold")
    tracker = MemoryTracker(device=a.devices, sampling_interval=a.interval,
                            oom_dump_dir=a.dump_dir, dump_on_critical=True,
                            enable_watchdog=a.watchdog)
    tracker.set_threshold("memory_warning_percent", a.warning_threshold)
    tracker.set_threshold("memory_critical_percent", a.critical_threshold)
    bundles = []
    tracker.add_alert_callback(
        lambda e: e["event_type"] == "critical" and bundles.append(tracker.last_pressure_dump_path))
    first = tracker.devices()
    print("gpumemprof track: %d device(s) (%s); warning at %g%%, critical at %g%%; bundles in %s"
          % (len(first), ", ".join(_where(r) for r in first) or "none",
             a.warning_threshold, a.critical_threshold, os.path.abspath(a.dump_dir)),
          file=sys.stderr)
    _until(a.duration, a.interval, tracker.sample)
    events = tracker.get_events()
    if a.output:
        stream, fmt = _output(a.output, a.format, "csv")
        with stream:
            out = _RowWriter(stream, fmt, TRACK_FIELDS)
            for e in events:
                out.write(e)
            out.close()
    stats = tracker.get_statistics()
    print("gpumemprof track: %d readings, peak usage %s%%, %d alert(s), %d bundle(s)%s"
          % (stats["samples"], stats["peak_usage_percent"], stats["alert_count"],
             len([b for b in bundles if b]),
             "".join("\n  " + b for b in bundles if b)), file=sys.stderr)
    return 0


def _inspect(*args):
    """gmp-inspect's (exit status, output)."""
    r = subprocess.run([native_path("gmp-inspect")] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    return r.returncode, r.stdout


def _bundles_under(path):
    found = []
    for top, dirs, files in os.walk(path):
        if "manifest.json" in files:
            found.append(top)
            dirs[:] = []
    return sorted(found, key=lambda b: os.path.getmtime(os.path.join(b, "manifest.json")))


def _load_readings(path):
    if path.lower().endswith(".json"):
        with open(path) as f:
            rows = json.load(f)
        if not isinstance(rows, list):
            raise ValueError("not a JSON array of readings")
        return rows
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _number(value):
    try:
        return float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _summarise_readings(rows):
    """Per device: readings, first/last time, peak used and percent, last."""
    devices = {}
    for r in rows:
        if not isinstance(r, dict) or r.get("event_type", "sample") != "sample":
            continue
        device = _number(r.get("device_id"))
        if device is None or not r.get("backend"):
            continue  # not a reading monitor or track wrote
        where = "host" if device < 0 else "%s:%d" % (r["backend"], device)
        key = ("%s %s" % (r["collector"], where)) if r.get("collector") else where
        d = devices.setdefault(key, {"device": key, "name": r.get("name") or "", "readings": 0,
                                     "first": None, "last": None, "peak_used_bytes": None,
                                     "peak_used_percent": None, "last_used_percent": None})
        t = _number(r.get("timestamp"))
        used = _number(r.get("used_bytes", r.get("device_used")))
        pct = _number(r.get("used_percent", r.get("usage_percent")))
        d["readings"] += 1
        d["first"] = t if d["first"] is None else min(d["first"], t or d["first"])
        d["last"] = t if d["last"] is None else max(d["last"], t or d["last"])
        if used is not None:
            d["peak_used_bytes"] = max(d["peak_used_bytes"] or 0, int(used))
        if pct is not None:
            d["peak_used_percent"] = max(d["peak_used_percent"] or 0.0, pct)
            d["last_used_percent"] = pct
    return list(devices.values())


def readings_series(path):
    """[(device, timestamps, bytes, total bytes or None)] from a file
    monitor or track wrote (CSV or JSON), or tfmemprof's results (a JSON
    object: memory_usage in MB, timestamps)."""
    with open(path) as f:
        head = f.read(1)
    if head == "{":
        with open(path) as f:
            data = json.load(f)
        usage, stamps = data.get("memory_usage"), data.get("timestamps")
        if not isinstance(usage, list) or not isinstance(stamps, list) or len(usage) != len(stamps):
            raise ValueError("no memory_usage and timestamps of one length")
        total = data.get("total_memory")
        return [(str(data.get("device") or "device"), [float(t) for t in stamps],
                 [float(m) * _MB for m in usage], float(total) * _MB if total else None)]
    out = {}
    for r in _load_readings(path):
        if not isinstance(r, dict) or r.get("event_type", "sample") != "sample":
            continue
        try:
            t = float(r["timestamp"])
            used = float(r.get("used_bytes") or r.get("device_used") or "nan")
            device = int(float(r["device_id"]))
        except (KeyError, TypeError, ValueError):
            continue
        if used != used:
            continue
        key = ("host" if device < 0 else "%s:%d" % (r.get("backend"), device),
               r.get("collector") or "")
        s = out.setdefault(key, ([], [], None))
        s[0].append(t)
        s[1].append(used)
        total = r.get("total_bytes") or r.get("device_total")
        if total not in (None, ""):
            out[key] = (s[0], s[1], float(total))
    return [(("%s %s" % (c, d)).strip(), ts, vs, total) for (d, c), (ts, vs, total) in out.items()]


def plot_readings(series, svg, title):
    """series [(name, timestamps, bytes, total or None)] drawn into svg by
    gmp-inspect plot (a readings file: the one drawing code of the
    toolkit); (exit status, what it said)."""
    rows = [{"timestamp": t, "series": name, "used_bytes": v,
             "total_bytes": total} for name, ts, vs, total in series for t, v in zip(ts, vs)]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"title": title, "readings": rows}, f)
    try:
        return _inspect("plot", f.name, "-o", svg)
    finally:
        os.unlink(f.name)


def _plot(bundles, plot_dir):
    """Each bundle's memory over time as plot_dir/<bundle>.svg; 0 or 1."""
    os.makedirs(plot_dir, exist_ok=True)
    for b in bundles:
        svg = os.path.join(plot_dir, os.path.basename(os.path.normpath(b)) + ".svg")
        rc, text = _inspect("plot", b, "-o", svg)
        if rc:
            sys.stderr.write(text)
            return rc
        print("gpumemprof analyze: drew %s" % svg, file=sys.stderr)
    return 0


def analyze(args):
    p = argparse.ArgumentParser(prog="gpumemprof analyze",
                                description="A bundle, a directory of bundles, or a file that "
                                            "monitor or track wrote, in plain words or JSON.  "
                                            "For a CI verdict use `gmp-inspect triage` "
                                            "(exit 3 on an out-of-memory death).")
    p.add_argument("path")
    p.add_argument("--format", choices=("txt", "json"), default="txt")
    p.add_argument("--output", help="write there instead of stdout")
    p.add_argument("--visualization", action="store_true",
                   help="also draw each bundle's memory over time (gmp-inspect plot)")
    p.add_argument("--plot-dir", help="where the drawings go (default plots; implies "
                                      "--visualization)")
    a = p.parse_args(args)
    if not os.path.exists(a.path):
        print("gpumemprof analyze: %s: no such file or directory" % a.path, file=sys.stderr)
        return 1
    status, text = 0, ""
    if os.path.isdir(a.path):
        bundles = _bundles_under(a.path)
        if not bundles:
            print("gpumemprof analyze: no bundle under %s" % a.path, file=sys.stderr)
            return 1
        if a.format == "json":
            status, text = _inspect("triage", a.path, "--format", "json")
        elif os.path.isfile(os.path.join(a.path, "manifest.json")):  # one bundle
            status, text = _inspect("show", a.path)
        else:
            status, text = _inspect("triage", a.path)
            if status in (0, 3):
                shown, more = _inspect("show", bundles[-1])
                status = shown
                text += "\nThe newest bundle:\n\n" + more
        status = 0 if status == 3 else status  # 3 is triage's "found an OOM"
        if not status and (a.visualization or a.plot_dir):
            status = _plot(bundles, a.plot_dir or "plots")
    else:
        try:
            summary = _summarise_readings(_load_readings(a.path))
        except (OSError, ValueError, csv.Error) as e:
            print("gpumemprof analyze: %s: not a bundle, nor a file monitor or track "
                  "wrote: %s" % (a.path, e), file=sys.stderr)
            return 1
        if not summary:
            print("gpumemprof analyze: %s holds no readings" % a.path, file=sys.stderr)
            return 1
        from .leaks import detect_leaks
        series = {name: (ts, vs, total) for name, ts, vs, total in readings_series(a.path)
                  if ts}
        for d in summary:  # the leak rule gmp-inspect leaks applies, on each device's line
            ts, vs, total = series.get(d["device"], ([], [], None))
            d["leak_detection"] = detect_leaks(ts, vs, limit=total, what=d["device"])
        if a.visualization or a.plot_dir:
            os.makedirs(a.plot_dir or "plots", exist_ok=True)
            svg = os.path.join(a.plot_dir or "plots",
                               os.path.splitext(os.path.basename(a.path))[0] + ".svg")
            rc, said = plot_readings([(n,) + v for n, v in series.items()], svg,
                                     "memory over time: " + os.path.basename(a.path))
            if rc:
                sys.stderr.write(said)
                return 1
            print("gpumemprof analyze: drew %s" % svg, file=sys.stderr)
        if a.format == "json":
            text = json.dumps({"devices": summary}, indent=2) + "\n"
        else:
            for d in summary:
                span = (d["last"] - d["first"]) if d["first"] is not None else 0.0
                if d["peak_used_percent"] is None:
                    usage = "usage unknown (the collector cannot tell it)"
                else:
                    usage = "peak %s (%.1f%%), last %.1f%%" % (
                        format_memory(d["peak_used_bytes"]), d["peak_used_percent"],
                        d["last_used_percent"])
                leak = d["leak_detection"]
                if leak["detected"]:
                    usage += "; grew and never came back down: +%.1f MB over %.1f s (%s)" % (
                        leak["memory_increase_mb"], leak["time_window_seconds"],
                        leak["severity"])
                text += "%-16s %-24s %4d readings over %.1f s; %s\n" % (
                    d["device"], d["name"][:24], d["readings"], span, usage)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if status:
        print("gpumemprof analyze: gmp-inspect failed (exit %d)" % status, file=sys.stderr)
    return 1 if status else 0


# what this Python adds to gmp-inspect's view (a C program's, no Python)
_PYTHON_VIEW = ("python_version", "torch_version", "cuda_available", "cuda_version",
                "detected_backend", "rocm_available", "rocm_version", "mps_built", "mps_available")


def info(args):
    from .system_info import get_system_info
    p = argparse.ArgumentParser(prog="gpumemprof info",
                                description="What the collectors see here (gmp-inspect info), "
                                            "and this Python's view: its version, torch's, and "
                                            "the backend it would use.")
    p.add_argument("--json", action="store_true", help="one JSON document")
    a = p.parse_args(args)
    r = subprocess.run([native_path("gmp-inspect"), "info"] + (["--json"] if a.json else []),
                       stdout=subprocess.PIPE, universal_newlines=True)
    if r.returncode:
        sys.stdout.write(r.stdout)
        return r.returncode
    mine = get_system_info()
    if a.json:
        doc = json.loads(r.stdout)
        doc.setdefault("system", {}).update({k: mine.get(k) for k in _PYTHON_VIEW})
        print(json.dumps(doc, indent=2))
        return 0
    sys.stdout.write(r.stdout)
    print("Python:  %s (%s); torch %s; backend %s" % (
        mine["python_version"], sys.executable,
        mine["torch_version"] or "not importable here", mine["detected_backend"]))
    return 0


VERBS = {"info": info, "monitor": monitor, "track": track, "analyze": analyze}
