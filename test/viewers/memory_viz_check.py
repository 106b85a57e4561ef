"""memory_viz_check.py VIEWERS SNAPSHOT.pickle -- a torch-snapshot read by
PyTorch's own torch.cuda._memory_viz (from the torch wheel on PyPI, by
fetch_viewers.py; it needs only the standard library), every view it
offers run as `python -m torch.cuda._memory_viz` would:
  stats         segsum: each segment drawn, with PyTorch's own accounting
                checks (a segment's blocks fill it; reserved = allocated +
                free); its totals read back;
  trace         each device's entries as Python-like lines, the OOM's line
                read back;
  segments, memory, compare
                the flamegraph inputs (flamegraph.pl itself is a download
                these machines cannot make, so the lines are taken as they
                are handed to it), their bytes added up; compare is given
                the segment lists (its command line hands it the whole
                snapshot, which it cannot read: PyTorch's bug), this
                snapshot against an empty one;
  trace_plot, segment_plot
                the HTML pages memory_viz's JavaScript draws, with the
                snapshot inside.
Prints one JSON object of what each view showed; exit 1, with PyTorch's
own error, when a view fails on the snapshot."""
import contextlib
import io
import json
import pickle
import re
import sys
import traceback


def flame_bytes(lines):
    """The bytes a flamegraph input adds up to ("frames... BYTES" lines)."""
    return sum(int(line.rsplit(" ", 1)[1]) for line in lines.splitlines() if line.strip())


def main():
    viewers, path = sys.argv[1:3]
    sys.path.insert(0, viewers)
    import _memory_viz as mv
    with open(path, "rb") as f:
        snap = pickle.load(f)
    def same(x):
        return x
    try:
        stats = mv.segsum(snap)
        trace = mv.trace(snap)
        seg_lines = mv.segments(snap, format_flamegraph=same)
        mem_lines = mv.memory(snap, format_flamegraph=same)
        with contextlib.redirect_stdout(io.StringIO()):  # it prints its sets
            cmp_lines = mv.compare(snap["segments"], [], format_flamegraph=same)
        plots = [mv.trace_plot(snap), mv.trace_plot(snap, plot_segments=True),
                 mv.segment_plot(snap)]
    except Exception:  # whatever PyTorch's code raises is the finding
        traceback.print_exc()
        sys.exit(1)
    def total(name):
        m = re.search(r"^%s: ([0-9.]+)([KMGT]?i?B)$" % name, stats, re.M)
        scale = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
        return round(float(m.group(1)) * scale[m.group(2)]) if m else None
    print(json.dumps({
        "segments": int(re.search(r"^segments: (\d+)$", stats, re.M).group(1)),
        "total_reserved": total("total_reserved"),
        "total_allocated": total("total_allocated"),
        # (its lines do not all end: a device can follow "TOTAL MEM" on one)
        "devices": re.findall(r"Device (\d+) -", trace),
        "ooms": re.findall(r"^raise OutOfMemoryError # (.*)$", trace, re.M),
        "segments_flame_bytes": flame_bytes(seg_lines),
        "memory_flame_bytes": flame_bytes(mem_lines),
        "compare_flame_bytes": flame_bytes(cmp_lines),
        "plots": [len(p) for p in plots],
        "plots_hold_snapshot": all('"snapshot.pickle"' in p for p in plots),
    }))


if __name__ == "__main__":
    main()
