#!/bin/sh
# test/wheel/run.sh BUILD — the wheel as a Python user gets it.  Builds it
# (mk/wheel.sh), installs it with pip into a fresh venv with no index (so
# nothing else comes with it), and runs what a user types: the commands pip
# made (gmp-run, gmp-inspect, gpumemprof), `python -m gpumemprof run` and
# `--preload-path`, each on a real Python process that runs out of memory,
# with the bundle it leaves checked by the installed gmp-inspect; and the
# Python recorder API (api_check.py), alone and under the preload;
# MemoryTracker (tracker_check.py); the profiler and device collectors
# (profiler_check.py); the seed's example (seed_example.py);
# the info/monitor/track/analyze verbs on the collectors' doubles; its
# glibc (manylinux_2_28), man pages and completions; a notebook on its
# kernel (notebook.sh); on Debian 11 (old_root.sh); and the package built
# from source (from_source.sh).  The
# installed gmp-inspect must take jansson and libdw from the wheel's own
# copies, not the machine's -dev packages.  Skipped, with a line, where the
# build tools cannot be had from PyPI.
set -u
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
ok() { echo "ok    wheel: $1"; }
fail() {
    echo "FAIL  wheel: $1"
    failed=1
}

sh "$root/mk/wheel.sh" "$build" >"$work/wheel.out" 2>&1
rc=$?
if [ $rc = 77 ]; then
    echo "SKIP  wheel: $(tail -1 "$work/wheel.out")"
    exit 0
fi
if [ $rc != 0 ]; then
    cat "$work/wheel.out"
    fail "make wheel failed"
    exit 1
fi
version=$(sed -n 's/^#define GMP_VERSION_STRING "\(.*\)"$/\1/p' "$root/include/gpumemprof.h")
whl=$(tail -1 "$work/wheel.out")
case "$(basename "$whl")" in
gpumemprof-"$version"-py3-none-manylinux_2_[0-9]*_x86_64.whl) ok "built $(basename "$whl")" ;;
*) fail "the wheel's name is not gpumemprof-$version-py3-none-manylinux_2_N_x86_64: $whl" ;;
esac

venv=$work/venv
/usr/bin/python3 -m venv "$venv" >"$work/venv.log" 2>&1 &&
    "$venv/bin/pip" install -q --disable-pip-version-check --no-index "$whl" >>"$work/venv.log" 2>&1 || {
    cat "$work/venv.log"
    fail "pip install --no-index of the wheel into a fresh venv failed"
    exit 1
}
py=$venv/bin/python
cd "$work" || exit 1

# the tag says glibc 2.28 or older, and so does every symbol version the
# programs and libraries in it ask for (where the wheel could be built in
# Debian 11's root: mk/wheel.sh says when it could not)
here_built=$(grep "^wheel: built against this machine's glibc" "$work/wheel.out")
if [ -n "$here_built" ]; then
    echo "SKIP  wheel: manylinux_2_28: ${here_built#wheel: }"
else
    newest=$(for f in "$venv"/lib/python*/site-packages/gpumemprof/_native/* \
        "$venv"/lib/python*/site-packages/gpumemprof.libs/*; do
        objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*'
    done | sort -uV | tail -1)
    case "$(basename "$whl")" in
    *-manylinux_2_2[0-8]_x86_64.whl | *-manylinux_2_1[0-9]_x86_64.whl | *-manylinux_2_[5-9]_x86_64.whl)
        if [ -n "$newest" ] && [ "$(printf '%s\n' "$newest" GLIBC_2.28 | sort -V | tail -1)" = GLIBC_2.28 ]; then
            ok "$(basename "$whl"): its binaries ask for $newest at most"
        else
            fail "the binaries in $(basename "$whl") ask for ${newest:-nothing of glibc}"
        fi
        ;;
    *) fail "the wheel is not for glibc 2.28 or older: $(basename "$whl")" ;;
    esac
fi

# the man pages where man looks (beside the venv's bin/ on PATH), and the
# completions where bash-completion loads them from
man=$(PATH="$venv/bin:/usr/bin:/bin" man -w gmp-inspect 2>&1)
[ "$man" = "$venv/share/man/man1/gmp-inspect.1" ] && ok "man gmp-inspect: $man" ||
    fail "man -w gmp-inspect with the venv's bin/ on PATH: $man"
bash "$root/test/unit/completion_check.sh" "$build" "$venv" >"$work/completion.out" 2>&1 &&
    ok "the completions, under the venv's share/, loaded by bash-completion" ||
    fail "the installed completions: $(cat "$work/completion.out")"

# the license, as pip shows it and as the metadata carries its text
licensed=$("$venv/bin/pip" show gpumemprof 2>/dev/null | sed -n 's/^License: //p')
license_file=$(ls "$venv"/lib/python*/site-packages/gpumemprof-"$version".dist-info/LICENSE \
    "$venv"/lib/python*/site-packages/gpumemprof-"$version".dist-info/licenses/LICENSE 2>/dev/null | head -1)
if [ "$licensed" = "Apache-2.0" ] && [ -n "$license_file" ] && cmp -s "$license_file" "$root/LICENSE"; then
    ok "the installed metadata: License Apache-2.0, the LICENSE file with it"
else
    fail "the installed metadata: License '$licensed', LICENSE file '${license_file:-none}'"
fi

# the preload inside the installed package, for LD_PRELOAD
preload=$("$py" -m gpumemprof --preload-path)
case "$preload" in
"$venv"/lib/python*/site-packages/gpumemprof/_native/libgpumemprof_preload.so)
    [ -r "$preload" ] && ok "--preload-path: the preload inside the installed package" ||
        fail "--preload-path names a file that is not there: $preload" ;;
*) fail "--preload-path is not inside the venv: $preload" ;;
esac
for cmd in "gpumemprof --version" "tfmemprof --version" "gmp-run --version" "gmp-inspect --version"; do
    set -- $cmd
    seen=$("$venv/bin/$1" "$2" 2>&1)
    if [ "$seen" = "$1 $version" ]; then ok "$cmd: $seen"; else fail "$cmd said: $seen"; fi
done

# gmp-inspect's libraries beyond glibc come from the wheel
inspect_bin=$(dirname "$preload")/gmp-inspect
deps=$(ldd "$inspect_bin" 2>&1)
if printf '%s\n' "$deps" | grep -q "not found"; then
    fail "the installed gmp-inspect misses libraries: $(printf '%s\n' "$deps" | grep 'not found' | tr -d '\t')"
elif ! printf '%s\n' "$deps" | grep -q "libjansson.*=> $venv/.*gpumemprof.libs/" ||
    ! printf '%s\n' "$deps" | grep -q "libdw.*=> $venv/.*gpumemprof.libs/"; then
    fail "the installed gmp-inspect does not take jansson and libdw from the wheel: $deps"
else
    ok "gmp-inspect takes jansson and libdw from the wheel's own copies"
fi

# one MemoryError, one bundle, checked by the installed tools
oom='import sys
sys.stderr.write("allocating\n")
block = bytearray(1 << 45)'
printf '%s\n' "$oom" >"$work/train.py"
check_one_bundle() { # NAME DIR RC
    n=$(ls -d "$2"/oom_dump_* 2>/dev/null | wc -l)
    if [ "$3" != 1 ] || [ "$n" != 1 ]; then
        fail "$1: exit $3 (1 expected) and $n bundle(s) (1 expected)"
        return
    fi
    b=$(ls -d "$2"/oom_dump_*)
    if ! "$venv/bin/gmp-inspect" validate "$b" >"$work/validate.out" 2>&1; then
        fail "$1: the bundle does not validate: $(tail -1 "$work/validate.out")"
    elif ! "$venv/bin/gmp-inspect" show "$b" 2>&1 | grep -q '^Exception: *MemoryError$'; then
        fail "$1: show does not name the MemoryError"
    else
        ok "$1: one bundle, valid, the MemoryError named"
    fi
}
"$venv/bin/gmp-run" --dump-dir "$work/d1" -- "$py" "$work/train.py" >/dev/null 2>&1
check_one_bundle "gmp-run python train.py" "$work/d1" $?
"$py" -m gpumemprof run --dump-dir "$work/d2" "$work/train.py" >/dev/null 2>&1
check_one_bundle "python -m gpumemprof run train.py" "$work/d2" $?
GMP_DUMP_DIR=$work/d3 LD_PRELOAD=$preload "$py" "$work/train.py" >/dev/null 2>&1
check_one_bundle "LD_PRELOAD=\$(python -m gpumemprof --preload-path)" "$work/d3" $?

# the seed's Python API on the C recorder, then the same under the preload;
# the recorder leaves no ring file behind
mkdir -p "$work/run"
GMP_RUN_DIR=$work/run "$py" "$root/test/wheel/api_check.py" "$venv/bin/gmp-inspect" "$work/api" ||
    failed=1
left=$(find "$work/run" -type f | head -3)
[ -z "$left" ] && ok "the Python recorder leaves no ring file behind" ||
    fail "ring files left behind: $left"
mkdir -p "$work/api_preload"
GMP_DUMP_DIR=$work/api_preload/dumps GMP_API_CHECK_UNDER_PRELOAD=1 LD_PRELOAD=$preload \
    "$py" "$root/test/wheel/api_check.py" "$venv/bin/gmp-inspect" "$work/api_preload" ||
    failed=1

# MemoryTracker under `ulimit -v` (a real MemoryError), then with the
# stand-in torch; the seed's own example with a stand-in model
standin=$root/test/wheel/standin
(ulimit -v 2000000 && GMP_RUN_DIR=$work/run "$py" "$root/test/wheel/tracker_check.py" \
    "$venv/bin/gmp-inspect" "$work/tracker" "$standin") 2>"$work/tracker.err" || {
    cat "$work/tracker.err"
    failed=1
}
# under the preload, an OOM the program catches and reports is that OOM's
# one bundle: the episode still open (the default) or written already
# (GMP_OOM_POLICY=first, as when PyTorch's retry confirms it)
caught='from gpumemprof import MemoryTracker
t = MemoryTracker(sampling_interval=0.02)
t.start_tracking()
def load_everything():
    return bytearray(3 << 30)
try:
    with t.capture_oom(context="train_loop", metadata={"batch_size": 64}):
        load_everything()
except MemoryError:
    print(t.last_oom_dump_path)
t.stop_tracking()'
for policy in episode first; do
    (ulimit -v 2000000 && GMP_OOM_POLICY=$policy GMP_DUMP_DIR=$work/joined_$policy LD_PRELOAD=$preload \
        "$py" -c "$caught") >"$work/joined.out" 2>"$work/joined.err"
    rc=$?
    n=$(ls -d "$work"/joined_$policy/oom_dump_* 2>/dev/null | wc -l)
    b=$(ls -d "$work"/joined_$policy/oom_dump_* 2>/dev/null | head -1)
    if [ $rc = 0 ] && [ "$n" = 1 ] && [ "$(cat "$work/joined.out")" = "$b" ] &&
        "$venv/bin/gmp-inspect" validate "$b" >/dev/null 2>&1 &&
        "$py" - "$b" "$policy" <<'PY'; then
import json, os, sys
b, policy = sys.argv[1], sys.argv[2]
md = json.load(open(os.path.join(b, "metadata.json")))
man = json.load(open(os.path.join(b, "manifest.json")))
fr = md.get("failed_request") or {}
assert fr.get("api") == "malloc" and 0 <= fr.get("size", 0) - (3 << 30) <= 64, fr
assert md.get("confirmed_by") == ("exception" if policy == "episode" else "first"), md
assert md.get("exception_type") == "MemoryError" and md.get("context") == "train_loop", md
assert md["custom_metadata"].get("batch_size") == 64, md["custom_metadata"]
assert "python_traceback.txt" in man["files"], man
assert "load_everything" in open(os.path.join(b, "python_traceback.txt")).read()
PY
        ok "under the preload ($policy): the caught OOM's report is its one bundle (failed malloc, exception, context, metadata)"
    else
        fail "under the preload ($policy): exit $rc, $n bundle(s): $(cat "$work/joined.out" "$work/joined.err")"
    fi
done

# GMP_TORCH_HISTORY=1 through `python -m gpumemprof run`: the wheel's own
# sitecustomize (_site) records the stand-in torch's history, and its OOM's
# one bundle holds the snapshot
site=$("$py" -m gpumemprof --site-path)
printf 'import torch\ndef build_model():\n    torch.cuda.allocate(3 << 30)\nbuild_model()\ntorch.cuda.allocate(6 << 30)\n' >"$work/torch_train.py"
GMP_TORCH_HISTORY=1 PYTHONPATH=$standin "$py" -m gpumemprof run --dump-dir "$work/history" \
    "$work/torch_train.py" >/dev/null 2>"$work/history.err"
rc=$?
b=$(ls -d "$work"/history/oom_dump_* 2>/dev/null)
case "$site" in
"$venv"/lib/python*/site-packages/gpumemprof/_site) [ -r "$site/sitecustomize.py" ] ||
    fail "--site-path names no sitecustomize.py: $site" ;;
*) fail "--site-path is not inside the installed package: $site" ;;
esac
if [ $rc = 1 ] && [ "$(printf '%s\n' "$b" | grep -c .)" = 1 ] && [ -r "$b/torch_snapshot.pickle" ] &&
    "$venv/bin/gmp-inspect" show "$b" 2>&1 | grep -q "^PyTorch's blocks: .*3.0 GiB on cuda:0  torch_train.py:3 in build_model"; then
    ok "GMP_TORCH_HISTORY=1: PyTorch's snapshot in the OOM's one bundle, its largest block shown"
else
    fail "GMP_TORCH_HISTORY=1: exit $rc (1 expected), bundles: $b; $(cat "$work/history.err")"
fi

# the same as `python -c` under gmp-run: its frames are "<string>"'s (PyTorch
# files them so), and they are the program's
GMP_TORCH_HISTORY=1 PYTHONPATH=$standin "$venv/bin/gmp-run" --dump-dir "$work/history_c" -- \
    "$py" -c "$(cat "$work/torch_train.py")" >/dev/null 2>"$work/history_c.err"
rc=$?
b=$(ls -d "$work"/history_c/oom_dump_* 2>/dev/null)
if [ $rc = 1 ] && [ "$(printf '%s\n' "$b" | grep -c .)" = 1 ] &&
    "$venv/bin/gmp-inspect" show "$b" 2>&1 | grep -q "^PyTorch's blocks: .*3.0 GiB on cuda:0  <string>:3 in build_model"; then
    ok "GMP_TORCH_HISTORY=1, python -c: the largest block's frame is the command's"
else
    fail "GMP_TORCH_HISTORY=1, python -c: exit $rc (1 expected), bundles: $b; $(cat "$work/history_c.err")"
fi

PYTHONPATH=$standin "$py" "$root/test/wheel/seed_example.py" "$work/seed" >"$work/seed.out" 2>&1
rc=$?
b=$(ls -d "$work"/seed/oom_dump_* 2>/dev/null)
if [ $rc != 1 ] || [ "$(printf '%s\n' "$b" | grep -c .)" != 1 ] ||
    ! grep -q "^OOM Error detected: torch.cuda.OutOfMemoryError$" "$work/seed.out" ||
    ! grep -q "^Diagnostic dump saved to: $b$" "$work/seed.out"; then
    fail "the seed's example: exit $rc (1 expected), bundles: $b; it said: $(cat "$work/seed.out")"
elif ! "$venv/bin/gmp-inspect" validate "$b" >/dev/null 2>&1 ||
    ! "$py" - "$b" <<'PY'; then
import json, os, sys
b = sys.argv[1]
md = json.load(open(os.path.join(b, "metadata.json")))
ev = json.load(open(os.path.join(b, "events.json")))
states = [e for e in ev if e["event_type"] == "sample" and e["backend"] == "cuda"]
assert md["custom_metadata"] == {"epoch": 3, "batch_size": 8, "model_params": 1 << 28}, md
assert md["context"] == "training_loop" and md["exception_module"] == "torch.cuda", md
assert len(states) == 10 and all(e["bytes_in_use"] == 1 << 30 for e in states), states
# the payloads as recorded, every key kept (reserved has no place in a C event)
recorded = json.load(open(os.path.join(b, "recorded_events.json")))
assert len(recorded) == 10 and all(set(r) == {"timestamp", "allocated", "reserved", "device_id"}
                                   for r in recorded), recorded
assert recorded[0]["reserved"] == 1 << 30 and recorded[-1]["reserved"] == 7 << 30, recorded
assert "recorded_events.json" in json.load(open(os.path.join(b, "manifest.json")))["files"]
PY
    fail "the seed's example: the bundle is not the one it describes"
else
    ok "the seed's example: OOM classified, one valid bundle with its 10 states (as recorded too) and metadata"
fi

# the seed's verbs; the GPU collectors read the doubles (two GPUs, another
# process holding 100 MiB of each)
doubles="LD_LIBRARY_PATH=$build/test/doubles GMP_FAKE_OTHER_BYTES=104857600"

# get_system_info: the backend from the collectors with no torch (the
# doubles' two NVIDIA GPUs and a ROCm one: cuda first), from torch where it
# is importable (the stand-in's CUDA 12.4), cpu with neither; the seed's
# exception classes
systeminfo='import json, sys
from gpumemprof import get_system_info, ProfilerError, ConfigurationError, VisualizationError
i = get_system_info()
want = sys.argv[1:]
keys = {"detected_backend", "rocm_available", "rocm_version", "mps_built", "mps_available",
        "cuda_available", "cuda_version", "python_version", "torch_version"}
assert keys <= set(i), i
assert [i["detected_backend"], str(i["cuda_version"]), str(i["cuda_device_count"])] == want, (want, i)
assert issubclass(ConfigurationError, ProfilerError) and issubclass(VisualizationError, ProfilerError)'
if "$py" -c "$systeminfo" cpu None 0 >"$work/si.out" 2>&1 &&
    env $doubles "$py" -c "$systeminfo" cuda None 2 >>"$work/si.out" 2>&1 &&
    PYTHONPATH=$standin "$py" -c "$systeminfo" cuda 12.4 1 >>"$work/si.out" 2>&1; then
    ok "get_system_info: cpu alone, cuda from the collectors' doubles, cuda 12.4 from torch; the seed's exceptions"
else
    fail "get_system_info: $(cat "$work/si.out")"
fi
# the seed's profiler and collector contract (profiler_check.py): the host
# from the preload's counters, exact to the block, and without it from the
# resident memory; cuda:0 through the stand-in torch; the collectors alone
# and with the GPU doubles
GMP_DUMP_DIR=$work/profiler_dumps LD_PRELOAD=$preload "$py" "$root/test/wheel/profiler_check.py" preload ||
    failed=1
"$py" "$root/test/wheel/profiler_check.py" rss 2>"$work/rss.err" || failed=1
grep -q "runs without the preload here" "$work/rss.err" &&
    ok "the profiler without the preload says once that its host numbers are the resident memory" ||
    fail "the profiler without the preload said: $(cat "$work/rss.err")"
PYTHONPATH=$standin "$py" "$root/test/wheel/profiler_check.py" torch || failed=1
"$py" "$root/test/wheel/profiler_check.py" collectors || failed=1
env $doubles "$py" "$root/test/wheel/profiler_check.py" doubles || failed=1

if "$venv/bin/gpumemprof" info >"$work/info.out" 2>&1 && grep -q "^  host  available" "$work/info.out" &&
    grep -q "^Python:  $("$py" -c 'import platform; print(platform.python_version())') .*backend cpu$" "$work/info.out" &&
    "$venv/bin/gpumemprof" info --json | "$py" -c 'import json, platform, sys
s = json.load(sys.stdin)["system"]
sys.exit(s["python_version"] != platform.python_version() or s["detected_backend"] != "cpu" or s["cuda_available"] is not False)'
then ok "gpumemprof info: the collectors, and this Python's version (text and --json system)"
else fail "gpumemprof info: $(cat "$work/info.out")"; fi
env $doubles "$venv/bin/gpumemprof" monitor --duration 0.35 --interval 0.1 --output "$work/m.csv" \
    2>"$work/monitor.err" &&
    env $doubles "$venv/bin/gpumemprof" monitor --duration 0.15 --interval 0.1 --format json \
        >"$work/m.json" 2>>"$work/monitor.err" &&
    "$py" - "$work/m.csv" "$work/m.json" <<'PY' || fail "gpumemprof monitor: $(cat "$work/monitor.err")"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
nvml1 = [r for r in rows if r["collector"] == "nvml" and r["device_id"] == "1"]
host = [r for r in rows if r["collector"] == "host"]
assert 3 <= len(nvml1) <= 5 and len(host) == len(nvml1), rows
assert all(r["other_processes_bytes"] == "104857600" and r["total_bytes"] == "1073741824" and
           r["used_percent"] == "9.77" for r in nvml1), nvml1
assert all(int(r["total_bytes"]) > 0 and r["device_id"] == "-1" for r in host), host
js = json.load(open(sys.argv[2]))
assert {(r["collector"], r["device_id"]) for r in js} >= {("nvml", 0), ("nvml", 1), ("host", -1)}, js
print("ok    wheel: gpumemprof monitor: every collector's devices each interval, as CSV and JSON")
PY
env $doubles "$venv/bin/gpumemprof" track --duration 0.35 --interval 0.1 --warning-threshold 5 \
    --critical-threshold 9 --devices gpus --dump-dir "$work/track" --output "$work/t.json" 2>"$work/track.err"
rc=$?
n=$(ls -d "$work"/track/oom_dump_* 2>/dev/null | wc -l)
tri=$("$venv/bin/gmp-inspect" triage "$work/track" --format json 2>&1)
# nvml's cuda:0 and cuda:1, the ROCm double's rocm:0: each at 9.8%, above 9
if [ $rc = 0 ] && [ "$n" = 3 ] && "$venv/bin/gmp-inspect" validate "$work"/track/oom_dump_* >/dev/null 2>&1 &&
    printf '%s' "$tri" | "$py" -c 'import json,sys; t=json.load(sys.stdin); sys.exit(t["pressure_warnings"]!=3 or t["oom_bundles"]!=0)' &&
    [ "$(grep -c ': critical: ' "$work/track.err")" = 3 ] &&
    "$py" -c 'import json,sys; e=json.load(open(sys.argv[1])); sys.exit(len([x for x in e if x["event_type"]=="critical"])!=3)' "$work/t.json"
then
    ok "gpumemprof track: 3 devices past critical: 3 lines, 3 critical events, 3 pressure bundles"
else
    fail "gpumemprof track: exit $rc, $n bundle(s); $(cat "$work/track.err") $tri"
fi
"$venv/bin/gpumemprof" analyze "$work/track" >"$work/a.txt" 2>&1 &&
    grep -q "3 memory-pressure warning(s)" "$work/a.txt" && grep -q "^The newest bundle:" "$work/a.txt" &&
    "$venv/bin/gpumemprof" analyze "$(ls -d "$work"/seed/oom_dump_*)" 2>&1 | grep -q "^Exception: *torch.cuda.OutOfMemoryError" &&
    "$venv/bin/gpumemprof" analyze "$work/track" --format json | "$py" -c 'import json,sys; sys.exit(json.load(sys.stdin)["pressure_warnings"]!=3)' &&
    "$venv/bin/gpumemprof" analyze "$work/m.csv" 2>&1 | grep -q "^nvml cuda:1 .* peak 100.0 MiB (9.8%)" &&
    "$venv/bin/gpumemprof" analyze "$work/track" --plot-dir "$work/plots" >/dev/null 2>&1 &&
    [ "$(ls "$work"/plots/oom_dump_*.svg | wc -l)" = 3 ] && grep -q "<svg" "$work"/plots/oom_dump_*_rocm_3.svg &&
    "$venv/bin/gpumemprof" analyze "$work/m.csv" --plot-dir "$work/mplots" >/dev/null 2>&1 &&
    grep -q ">nvml cuda:1 in use<" "$work/mplots/m.svg" && grep -q "time since the first reading" "$work/mplots/m.svg" &&
    ok "gpumemprof analyze: a directory (triage, the newest shown), a bundle, JSON, a monitor file (drawn too), --plot-dir" ||
    fail "gpumemprof analyze: $(cat "$work/a.txt")"
# a hostile file of readings (times of +-1e308, a count of 1e300) draws, and ends
printf '[{"timestamp":1e308,"used_bytes":1},{"timestamp":-1e308,"used_bytes":5},{"timestamp":100,"used_bytes":1e300},{"timestamp":101,"used_bytes":7}]' >"$work/evil.json"
timeout 20 "$venv/bin/gmp-inspect" plot "$work/evil.json" -o "$work/evil.svg" >/dev/null 2>&1
rc=$?
[ $rc = 0 ] && grep -q "</svg>" "$work/evil.svg" &&
    ok "gmp-inspect plot of readings with absurd times and counts: drawn, in time" ||
    fail "gmp-inspect plot of hostile readings: exit $rc"
printf 'not,a\nreading,file\n' >"$work/junk.csv"
"$venv/bin/gpumemprof" analyze "$work/junk.csv" >/dev/null 2>"$work/junk.err"
rc=$?
[ $rc = 1 ] && grep -q "holds no readings" "$work/junk.err" &&
    ok "gpumemprof analyze of a file that is no reading: exit 1 and a line" ||
    fail "gpumemprof analyze of junk: exit $rc, $(cat "$work/junk.err")"

# the leak rule on a series (the one gmp-inspect leaks applies): a staircase
# that never comes back down is growth, a sawtooth is not
"$py" - <<'PY' || fail "gpumemprof.leaks.detect_leaks"
from gpumemprof.leaks import detect_leaks
t = [float(i) for i in range(60)]
stairs = [(1 << 30) + i * (4 << 20) for i in range(60)]
saw = [(1 << 30) + (i % 6) * (50 << 20) for i in range(60)]
grew, back = detect_leaks(t, stairs, limit=2 << 30), detect_leaks(t, saw)
keys = {"detected", "severity", "memory_increase_mb", "time_window_seconds", "suggestions"}
assert keys <= set(grew) and grew["detected"] and grew["severity"] == "medium", grew
assert 170 < grew["memory_increase_mb"] < 190 and len(grew["suggestions"]) == 2, grew
assert not back["detected"] and back["severity"] == "none" and back["memory_increase_mb"] == 0, back
assert not detect_leaks(t[:5], stairs[:5])["detected"]
print("ok    wheel: detect_leaks: the seed's result; a staircase is growth, a sawtooth is not")
PY

# tfmemprof without TensorFlow: the command and its devices (the doubles'
# two GPUs), an alert once per crossing, the seed's results, analyze of them
# (leaks, recommendations, the drawing, the report); the profiler says
# TensorFlow is missing
tf_work=$work/tf
mkdir -p "$tf_work"
"$venv/bin/tfmemprof" info >"$tf_work/info.out" 2>&1 &&
    grep -q "^TensorFlow Version: not installed here$" "$tf_work/info.out" &&
    "$venv/bin/tfmemprof" --help 2>&1 | grep -q "analyze" &&
    "$py" -c 'import tfmemprof, sys
try:
    tfmemprof.TFMemoryProfiler()
except tfmemprof.ConfigurationError as e:
    sys.exit("TensorFlow is not installed here" not in str(e))
sys.exit(1)' && ok "tfmemprof info and --help without TensorFlow; TFMemoryProfiler says it is missing" ||
    fail "tfmemprof without TensorFlow: $(cat "$tf_work/info.out")"
env $doubles "$venv/bin/tfmemprof" monitor --duration 0.45 --interval 0.1 --threshold 50 \
    --output "$tf_work/r.json" >"$tf_work/monitor.out" 2>"$tf_work/monitor.err"
rc=$?
env $doubles "$venv/bin/tfmemprof" track --duration 0.2 --interval 0.1 >/dev/null 2>"$tf_work/track.err"
rc2=$?
if [ $rc = 0 ] && [ $rc2 = 2 ] && grep -q "the following arguments are required: --output" "$tf_work/track.err" &&
    [ "$(grep -c "tfmemprof: alert: /GPU:0 at 100.0 MB, above the threshold of 50 MB" "$tf_work/monitor.err")" = 1 ] &&
    "$py" - "$tf_work/r.json" <<'PY'; then
import json, sys
r = json.load(open(sys.argv[1]))
assert {"peak_memory", "average_memory", "duration", "memory_usage", "timestamps", "alerts"} <= set(r), r
assert r["device"] == "/GPU:0" and r["peak_memory"] == 100.0 and len(r["alerts"]) == 1, r
assert 4 <= len(r["memory_usage"]) == len(r["timestamps"]) <= 6 and r["total_memory"] == 1024.0, r
PY
    ok "tfmemprof monitor: /GPU:0 each interval, one alert per crossing, the seed's results; track needs --output"
else
    fail "tfmemprof monitor: exit $rc, track exit $rc2: $(cat "$tf_work/monitor.out" "$tf_work/monitor.err" "$tf_work/track.err")"
fi
"$py" - "$tf_work/leak.json" <<'PY'
import json, sys
t = [1000.0 + i for i in range(40)]
json.dump({"device": "/GPU:0", "memory_usage": [2000.0 + 25 * i for i in range(40)],
           "timestamps": t, "total_memory": 4096.0, "peak_memory": 2975.0,
           "average_memory": 2487.5, "duration": 39.0, "alerts": []}, open(sys.argv[1], "w"))
PY
(cd "$tf_work" && "$venv/bin/tfmemprof" analyze --input leak.json --detect-leaks --optimize \
    --visualize --report report.txt >analyze.out 2>&1)
rc=$?
if [ $rc = 0 ] && grep -q "Memory leak analysis: growth that stayed, severity high" "$tf_work/analyze.out" &&
    grep -q "grew and never came back down" "$tf_work/analyze.out" &&
    grep -q "<polyline" "$tf_work/memory_timeline.svg" && grep -q ">/GPU:0 total 4.0 GiB<" "$tf_work/memory_timeline.svg" &&
    grep -q "^Timeline drawn: $tf_work/memory_timeline.svg" "$tf_work/analyze.out" &&
    grep -q '"leak_detection"' "$tf_work/report.txt" &&
    (cd "$tf_work" && "$venv/bin/tfmemprof" analyze --input r.json --detect-leaks) | grep -q "no growth that stayed"; then
    ok "tfmemprof analyze: the leak rule, recommendations, the drawing, the report"
else
    fail "tfmemprof analyze: exit $rc: $(cat "$tf_work/analyze.out")"
fi

# tfmemprof on real TensorFlow (tensorflow-cpu from PyPI, in a venv kept
# under BUILD), under the preload
tfvenv=$build/tf-venv
if [ ! -x "$tfvenv/bin/python" ] || ! "$tfvenv/bin/python" -c "import tensorflow" >/dev/null 2>&1; then
    rm -rf "$tfvenv"
    /usr/bin/python3 -m venv "$tfvenv" >"$work/tfvenv.log" 2>&1 &&
        timeout 900 "$tfvenv/bin/pip" install -q --disable-pip-version-check tensorflow-cpu \
            >>"$work/tfvenv.log" 2>&1 || { rm -rf "$tfvenv"; }
fi
if [ ! -x "$tfvenv/bin/python" ]; then
    echo "SKIP  wheel: tfmemprof on TensorFlow: tensorflow-cpu cannot be had from PyPI here: $(tail -1 "$work/tfvenv.log")"
elif ! "$tfvenv/bin/pip" install -q --disable-pip-version-check --no-index --no-deps --force-reinstall "$whl" >"$work/tfwheel.log" 2>&1; then
    fail "the wheel does not install beside TensorFlow: $(cat "$work/tfwheel.log")"
else
    GMP_DUMP_DIR=$work/tf_dumps LD_PRELOAD=$("$tfvenv/bin/python" -m gpumemprof --preload-path) \
        "$tfvenv/bin/python" "$root/test/wheel/tf_check.py" "$work/tf_dumps" 2>"$work/tf.err" ||
        { grep -v "^I0000\|^WARNING: All log" "$work/tf.err"; failed=1; }
fi

# track --watchdog: the cleanup runs at each crossing, and says what it did
env $doubles "$venv/bin/gpumemprof" track --duration 0.25 --interval 0.1 --warning-threshold 5 \
    --critical-threshold 99 --devices gpus --watchdog --dump-dir "$work/wd" >/dev/null 2>"$work/wd.err"
rc=$?
[ $rc = 0 ] && grep -q "^gpumemprof: watchdog: [0-9]* unreachable objects collected" "$work/wd.err" &&
    ok "gpumemprof track --watchdog: a cleanup at each crossing, said" ||
    fail "track --watchdog: exit $rc: $(cat "$work/wd.err")"

# our own help and errors, in our words, never CPython's or argparse's internals
"$py" -m gpumemprof run --help >"$work/runhelp.out" 2>&1
rc=$?
"$py" -m gpumemprof run --bogus x.py >/dev/null 2>"$work/runbad.err"
rc2=$?
"$venv/bin/gpumemprof" monitor --interval abc >/dev/null 2>"$work/interval.err"
rc3=$?
if [ $rc = 0 ] && grep -q "^usage: python -m gpumemprof run" "$work/runhelp.out" &&
    grep -q "under gmp-run" "$work/runhelp.out" && [ $rc2 = 2 ] &&
    grep -q "^gpumemprof run: unknown option --bogus" "$work/runbad.err" && [ $rc3 = 2 ] &&
    grep -q "'abc' is not a number of seconds" "$work/interval.err" &&
    ! grep -q "_positive" "$work/interval.err"; then
    ok "run --help and run --bogus are ours; monitor --interval abc says what is wrong"
else
    fail "help and errors: run --help exit $rc, --bogus exit $rc2, --interval abc exit $rc3: $(cat "$work/runhelp.out" "$work/runbad.err" "$work/interval.err" | head -20)"
fi

"$py" -m gpumemprof frobnicate >/dev/null 2>"$work/bad.err"
rc=$?
[ $rc = 2 ] && grep -q "unknown command" "$work/bad.err" && ok "an unknown command: exit 2 and a line" ||
    fail "an unknown command: exit $rc, $(cat "$work/bad.err")"

# in a notebook; on an older distribution; and built from the source tree
sh "$root/test/wheel/notebook.sh" "$build" "$whl" || failed=1
sh "$root/test/wheel/old_root.sh" "$whl" || failed=1
sh "$root/test/wheel/from_source.sh" || failed=1
exit $failed
