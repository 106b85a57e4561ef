"""summary.py RESULTS — the tables and the verdict of `make bench`.

RESULTS has one line per run, written by bench/run.sh: "KIND TOOL ROUND
WALL CPU [FAULTS]" for a timed workload (seconds; the churn and the runs
timed in pairs add their own "WALL_RATIO CPU_RATIO", see bench/churn.c,
and the pairs their page faults and the bare side's times, see
bench/start_pairs.c), "pairs TOOL ROUND NS" for the device pair,
"recorder WHAT ROUND VALUE" for the recorder's, and the rows of triage
and rss.  A ratio cell is the median of the rounds' own ratios (a
round's time under a tool over the baseline's time in the same round, or
the run's own ratio of its pairs where it has one) with their lowest and
highest.  A verdict says only what the rounds can tell apart from this
machine's noise: each median has its distribution-free 95% interval (two
of the rounds' own values, by the binomial count of rounds on either side
of the true median); a row meets its target when the wall-time and the
CPU-time intervals both lie at or under it, misses it when either lies
wholly over it, and is too close to call otherwise.  Prints Markdown: the
ratios, the other costs, then each row's verdict with its intervals.
"""
import math
import statistics
import sys

rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
TOOLS = [("gpumemprof", "gpumemprof"), ("empty", "empty preload"),
         ("forward", "forwarding hook"), ("heaptrack", "heaptrack"),
         ("libmemusage", "libmemusage.so"), ("memray", "Memray --native"), ("fil", "Fil")]
# kind, label, baseline, target ratio for gpumemprof (and gmp-run for start-up)
WORKLOADS = [
    ("churn1", "malloc/free churn, 1 thread", "none", 1.10),
    ("churn2", "malloc/free churn, 2 threads", "none", 1.10),
    ("python", "python3 dict of 100k, JSON round-trip", "none", 1.03),
    ("pylarge", "python3, 5,000 blocks of 2 MiB, each an event with a stack", "none", 1.05),
    ("pystderr", "python3 printing 20,000 lines on stderr that read as OOM messages", "none", 1.30),
    ("gcc", "gcc -O2 -c recorder/bundle.c", "none", 1.05),
    ("startup", "start-up: 300 `/bin/true`, each beside one under the empty preload", "empty", 1.05),
]
missed = []
close = []
met = 0


def times(kind, tool, column):
    """{round: seconds} of one workload under one tool (column 0 wall, 1 CPU)"""
    return {r[2]: float(r[3 + column]) for r in rows
            if r[0] == kind and r[1] == tool and len(r) > 4}


def ratios(kind, tool, base, column):
    own = [float(r[5 + column]) for r in rows
           if r[0] == kind and r[1] == tool and len(r) > 6]
    if own:  # the run's own ratio (the churn's passes, start-up's pairs)
        return sorted(own)
    b, t = times(kind, base, column), times(kind, tool, column)
    return sorted(t[k] / b[k] for k in t if k in b and b[k] > 0)


def cell(r):
    return "%.2fx (%.2f-%.2f)" % (statistics.median(r), r[0], r[-1]) if r else "-"


def interval(r):
    """(low, high): the 95% interval of the median of the sorted values r,
    the k-th lowest and k-th highest of them, k the largest for which
    fewer than k rounds fall under the true median with at most 2.5% odds
    (k is 1, the whole range, where even that is likelier)"""
    n, k, below = len(r), 1, 1
    while k < (n + 1) // 2:
        below += math.comb(n, k)  # P(Binomial(n, 1/2) <= k) * 2^n
        if below > 0.025 * 2 ** n:
            break
        k += 1
    return r[k - 1], r[n - k]


def verdict(name, target, wall, cpu):
    global met
    if not wall or not cpu:
        missed.append("%s: not measured" % name)
        return "not measured"
    (wl, wh), (cl, ch) = interval(wall), interval(cpu)
    said = "wall %.2fx (%.2f-%.2f), CPU %.2fx (%.2f-%.2f), target <= %.2fx" % (
        statistics.median(wall), wl, wh, statistics.median(cpu), cl, ch, target)
    if wh <= target and ch <= target:
        met += 1
        return "meets: " + said
    if wl > target or cl > target:
        missed.append("%s: %s" % (name, said))
        return "misses: " + said
    close.append(name)
    return "too close to call: " + said


def bare(kind, base):
    v = list(times(kind, base, 0).values())
    return statistics.median(v) if v else 0


def paired_median(kind, tool, at):
    """the median over the rounds of a value of start_pairs' line (0 when
    there is none): at 3 and 4 a TOOL process's wall and CPU time, 7 and 8
    the page faults of a TOOL and a BASE process, 9 and 10 a BASE
    process's times"""
    v = [float(r[at]) for r in rows if r[0] == kind and r[1] == tool and len(r) > at]
    return statistics.median(v) if v else 0


for column, title in ((0, "Wall time"), (1, "CPU time (user + system)")):
    print("%s, against the bare run beside it (the peers: the round's bare run; start-up: the "
          "empty preload beside it):" % title)
    print()
    print("| workload | " + " | ".join(label for _, label in TOOLS) + " | target |")
    print("| --- |" + " ---: |" * len(TOOLS) + " --- |")
    for kind, label, base, target in WORKLOADS:
        if kind == "startup":
            each = paired_median(kind, "gpumemprof", 3 + column)
            loop = paired_median(kind, "gmp-run", 9 + column)
            for tool, what in (
                    ("gpumemprof", "%s (%.2f ms a process under the library)" % (label, each * 1e3)),
                    ("gmp-run", "a shell loop of 300 `/bin/true` under `gmp-run`, beside the same "
                     "loop under the empty preload (%.3f s)" % loop)):
                print("| %s | %s | 1.00x | - | - | - | - | - | <= %.2fx |" % (
                    what, cell(ratios(kind, tool, base, column)), target))
            continue
        what = "%s (%.3f s bare)" % (label, bare(kind, base))
        if kind.startswith("churn"):  # what the method reads where there is no tool
            what = "%s (%.3f s bare, whose two kinds of pass read %s)" % (
                label, bare(kind, base), cell(ratios(kind, base, base, column)))
        cells = [cell(ratios(kind, tool, base, column)) for tool, _ in TOOLS]
        print("| %s | %s | <= %.2fx |" % (what, " | ".join(cells), target))
    print()

results = []
for kind, label, base, target in WORKLOADS:
    tools = (("gpumemprof", label), ("gmp-run", "start-up: a shell loop of 300 `/bin/true` under "
                                     "gmp-run")) \
        if kind == "startup" else (("gpumemprof", label),)
    for tool, name in tools:
        results.append((name, verdict(name, target, ratios(kind, tool, base, 0),
                                      ratios(kind, tool, base, 1))))


def added(tool):
    base, t = {r[2]: float(r[3]) for r in rows if r[0] == "pairs" and r[1] == "none"}, \
        {r[2]: float(r[3]) for r in rows if r[0] == "pairs" and r[1] == tool}
    return sorted(t[k] - base[k] for k in t if k in base)


def limit(name, value, target, text, rounds=None):
    """a row with a fixed bound: its verdict counted like the ratios', on
    the interval of its median where it has rounds (sorted)"""
    global met
    if value is None:
        missed.append("%s: not measured" % name)
        return "| %s | - | <= %s | not measured |" % (name, text)
    low, high = interval(rounds) if rounds else (value, value)
    if high <= target:
        met += 1
        said = "meets"
    elif low > target:
        missed.append("%s: over %s" % (name, text))
        said = "misses"
    else:
        close.append(name)
        said = "too close to call"
    return "| %s | %%s | <= %s | %s |" % (name, text, said)


print("Other costs:")
print()
print("| what | gpumemprof | target | verdict |")
print("| --- | ---: | --- | --- |")
pair_base = [float(r[3]) for r in rows if r[0] == "pairs" and r[1] == "none"]
for tool, name, bound in (("gpumemprof", "device alloc/free pair, cudart double (%.0f ns bare), GMP_STACKS=0", 100),
                          ("stacks", "the same with allocation stacks (the default)", 400)):
    d = added(tool)
    label = name % statistics.median(pair_base) if "%" in name and pair_base else name
    line = limit(label, statistics.median(d) if d else None, bound, "%d ns" % bound, d)
    print(line % ("+%.0f ns (%+.0f to %+.0f)" % (statistics.median(d), d[0], d[-1])) if d else line)
rec = {}
for r in rows:
    if r[0] == "recorder":  # "recorder WHAT ROUND VALUE"
        rec.setdefault(r[1], []).append(float(r[-1]))
for v in rec.values():
    v.sort()


def rec_median(what):
    return statistics.median(rec[what]) if what in rec else None


def rec_cell(what, form):
    v = rec[what]
    return (form + " (" + form + "-" + form + ")") % (statistics.median(v), v[0], v[-1])


line = limit("ring push, 1 thread (2 threads beside it)", rec_median("push1"), 10, "10 ns",
             rec.get("push1"))
print(line % ("%s; %.1f ns" % (rec_cell("push1", "%.1f ns"), rec_median("push2") or 0))
      if "push1" in rec else line)
line = limit("dump with 10k events", rec_median("dump10k"), 20, "20 ms", rec.get("dump10k"))
print(line % rec_cell("dump10k", "%.1f ms") if "dump10k" in rec else line)
line = limit("dump with 1M events", rec_median("dump1m"), 1000, "1 s", rec.get("dump1m"))
print(line % rec_cell("dump1m", "%.0f ms") if "dump1m" in rec else line)


def rss(tool):
    r = [x for x in rows if x[0] == "rss" and x[1] == tool]
    return (int(r[0][3]), int(r[0][5])) if r else None


if rss("none") and rss("gpumemprof"):
    (n, _), (g, ring) = rss("none"), rss("gpumemprof")
    mib = (g - ring - n) / 1024
    print(limit("memory added to a process, apart from the ring", mib, 2, "2 MiB") %
          ("%.2f MiB (ring %.2f MiB)" % (mib, ring / 1024)))
else:
    print(limit("memory added to a process, apart from the ring", None, 2, "2 MiB"))
t = sorted(float(r[3]) for r in rows if r[0] == "triage" and r[1] == "gpumemprof")
if t:
    n = int(next(float(r[3]) for r in rows if r[0] == "triage" and r[1] == "count"))
    most = next((float(r[3]) for r in rows if r[0] == "triage" and r[1] == "rss"), 0)
    print(limit("`gmp-inspect triage` of {:,} bundles from {:,} torchrun runs ({} warm runs; at most {:.0f} MiB)".format(
        n, n // 100, len(t), most / 1024), statistics.median(t), 6, "6 s", t) %
        ("%.2f s (%.2f-%.2f)" % (statistics.median(t), t[0], t[-1])))
faults = {}
for name, tool, at, per in (("empty", "gmp-run", 8, 301), ("gmp-run", "gmp-run", 7, 301),
                            ("library", "gpumemprof", 7, 1), ("beside", "gpumemprof", 8, 1)):
    f = paired_median("startup", tool, at)
    if f:
        faults[name] = f / per

if len(faults) == 4:
    print()
    print("Page faults a process takes (medians): %.1f under the library, %.1f under the empty "
          "preload beside it (%+.1f); in the shell loops (the shell's share included), %.1f under "
          "the empty preload, %.1f under `gmp-run` (%+.1f)." % (
              faults["library"], faults["beside"], faults["library"] - faults["beside"],
              faults["empty"], faults["gmp-run"], faults["gmp-run"] - faults["empty"]))
    big = [paired_median("pylarge", "gpumemprof", at) for at in (7, 8)]
    if all(big):
        print("python3 with 5,000 blocks of 2 MiB, each an event: %.0f under the library, %.0f "
              "bare beside it (%+.0f)." % (big[0], big[1], big[0] - big[1]))
print()
print("Verdict, row by row (each median with its 95% interval; met when both intervals lie "
      "at or under the target, missed when either lies over it):")
print()
for name, v in results:
    print("- %s: %s" % (name, v))
print()
total = met + len(missed) + len(close)
said = "Verdict: %d of %d targets met" % (met, total)
if close:
    said += "; too close to call: %s" % "; ".join(close)
if missed:
    said += "; missed: %s" % "; ".join(missed)
print(said + ".")
