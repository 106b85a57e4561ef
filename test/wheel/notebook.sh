#!/bin/sh
# test/wheel/notebook.sh BUILD WHEEL — a notebook as its user runs one: in a
# venv with ipykernel, nbclient and nbformat from PyPI (kept under BUILD)
# and the wheel, `python -m gpumemprof kernel install` makes the kernel,
# and nbclient runs a notebook on it whose third cell runs out of memory
# under RLIMIT_AS, slowly enough (50 ms a step) that a memory-pressure
# warning is written first.  That cell's output holds the MemoryError and
# the line of its bundle, which is the one bundle there when the notebook
# is done (the OOM's replaces the warning's, as it does when the preload
# writes it); the next cell runs (the kernel lives); the bundle names the
# cells as Jupyter does ("In [2], line 2"), not the kernel's temporary
# files.  Skipped, with a line, where PyPI cannot be reached.
set -u
build=$(cd "$1" && pwd)
whl=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
venv=$build/nb-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import ipykernel, nbclient, nbformat" 2>/dev/null; then
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv" >"$work/venv.log" 2>&1 &&
        timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check ipykernel nbclient nbformat \
            >>"$work/venv.log" 2>&1 || {
        echo "SKIP  wheel: notebooks: ipykernel and nbclient cannot be had from PyPI here: $(tail -1 "$work/venv.log")"
        rm -rf "$venv"
        exit 0
    }
fi
if ! "$venv/bin/pip" install -q --disable-pip-version-check --no-index --no-deps --force-reinstall "$whl" \
    >"$work/pip.log" 2>&1; then
    echo "FAIL  wheel: notebooks: the wheel does not install beside ipykernel: $(cat "$work/pip.log")"
    exit 1
fi
rm -rf "$venv/share/jupyter/kernels/gpumemprof"
said=$("$venv/bin/python" -m gpumemprof kernel install 2>&1)
spec=$venv/share/jupyter/kernels/gpumemprof/kernel.json
if [ ! -f "$spec" ]; then
    echo "FAIL  wheel: notebooks: kernel install wrote no $spec: $said"
    exit 1
fi

cat >"$work/drive.py" <<'EOF'
import json, sys
import nbformat
from nbclient import NotebookClient
cells = [
    "import resource, time\n"
    "resource.setrlimit(resource.RLIMIT_AS, (1500 << 20, resource.RLIM_INFINITY))\n"
    "kept = []",
    "def load_batch():\n    kept.append(bytearray(40 << 20))",
    "for i in range(100):\n    load_batch()\n    time.sleep(0.05)",
    "kept.clear()\nprint('alive')",
]
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
NotebookClient(nb, kernel_name="gpumemprof", allow_errors=True, timeout=120).execute(cwd=sys.argv[1])
print(json.dumps([[{k: o.get(k) for k in ("output_type", "name", "text", "ename")} for o in c.outputs]
                  for c in nb.cells]))
EOF
mkdir "$work/nb"
if ! (cd "$work/nb" && timeout 300 "$venv/bin/python" "$work/drive.py" "$work/nb") >"$work/cells.json" 2>"$work/drive.err"; then
    echo "FAIL  wheel: notebooks: nbclient could not run the notebook: $(tail -5 "$work/drive.err")"
    exit 1
fi
verdict=$("$venv/bin/python" - "$work/cells.json" "$work/nb/oom_dumps" 2>"$work/verdict.err" <<'EOF'
import json, os, re, sys
cells = json.load(open(sys.argv[1]))
failing = cells[2]
if not any(o["output_type"] == "error" and o["ename"] == "MemoryError" for o in failing):
    sys.exit("the third cell did not end in MemoryError: %s" % failing)
said = "".join(o["text"] or "" for o in failing if o["output_type"] == "stream")
m = re.search(r"bundle: (\S+); read it: gmp-inspect show (\S+)\n", said)
if not m or m.group(1) != m.group(2):
    sys.exit("the failing cell does not show its bundle's line: %r" % said)
left = sorted(b for b in os.listdir(sys.argv[2]) if not b.startswith("."))
if [os.path.join(sys.argv[2], b) for b in left] != [m.group(1)]:
    sys.exit("the cell named %s; the dump directory holds %s" % (m.group(1), left))
if not any("alive" in (o["text"] or "") for o in cells[3]):
    sys.exit("the next cell did not run: %s" % cells[3])
print(m.group(1))
EOF
)
if [ $? != 0 ]; then
    echo "FAIL  wheel: notebooks: $(cat "$work/verdict.err")" # the reason sys.exit gave
    exit 1
fi
"$venv/bin/gmp-inspect" show "$verdict" >"$work/show.out" 2>&1
if grep -q "^Held by: .* made at In \[2\], line 2 in load_batch (called from In \[3\], line 2)$" "$work/show.out" &&
    grep -q "^Python stack: *In \[2\], line 2 in load_batch" "$work/show.out" &&
    grep -q "^Context: *In \[3\]$" "$work/show.out" && ! grep -q "/ipykernel_" "$work/show.out"; then
    echo "ok    wheel: notebooks: kernel install; the failing cell shows the bundle that stays, the kernel lives, the bundle names In [2] and In [3]"
    exit 0
fi
echo "FAIL  wheel: notebooks: gmp-inspect show does not name the cells:"
cat "$work/show.out"
exit 1
