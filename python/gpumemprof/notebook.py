"""Notebooks: a Jupyter kernel under gmp-run and the preload, in one
command, and the IPython extension that kernel loads.

    python -m gpumemprof kernel install [--user | --sys-prefix | --prefix DIR]
                                        [--name NAME] [--display-name TEXT]
                                        [--dump-dir DIR]

The kernelspec runs `gmp-run -- python -m ipykernel_launcher -f ... --ext
gpumemprof.notebook`: every allocation of the kernel is recorded, and a
kernel the OOM killer ends still leaves its bundle.  The extension
(load_ipython_extension) does three things a notebook needs:

- each cell is named as Jupyter names it.  ipykernel compiles a cell to
  <tmp>/ipykernel_<pid>/<hash>.py; before each cell runs, its hash and
  execution count go into the recorder's custom metadata ("jupyter_cells"),
  so a bundle's sites read "In [2], line 4" (gmp-inspect), and the cell
  running is the recorder's context ("In [2]");
- after a cell that died of running out of memory, that OOM's bundle is
  written at once (joining what the preload saw, so one OOM stays one
  bundle) and its line is printed in that cell's output: the bundle that
  stays, not a pressure warning's that it replaces;
- nothing else: the kernel's results are untouched."""
import ctypes
import json
import os
import sys

from ._native import native_path
from ._recorder_lib import preload_recorder

KERNEL_NAME = "gpumemprof"
CELLS_KEPT = 200
METADATA_MAX = 8000  # the recorder keeps 8 KiB of custom metadata

USAGE = """usage: python -m gpumemprof kernel install [--user | --sys-prefix | --prefix DIR]
                                           [--name NAME] [--display-name TEXT] [--dump-dir DIR]

Installs a Jupyter kernel (a kernelspec) that runs this Python's ipykernel
under gmp-run, with the preload: pick it in Jupyter ("%s"), or
`jupyter nbconvert --execute --ExecutePreprocessor.kernel_name=%s`.
Bundles name a notebook's cells as Jupyter does ("In [2], line 4"), and a
cell that runs out of memory shows its bundle's line.

  --user         in your Jupyter data directory (the default outside a venv)
  --sys-prefix   in this Python's prefix (the default in a venv: %s)
  --prefix DIR   under DIR/share/jupyter/kernels
  --name NAME    the kernel's name (default %s)
  --display-name TEXT
                 what Jupyter shows (default "Python 3 (gpumemprof)")
  --dump-dir DIR where the bundles go (default ./oom_dumps, beside the notebook)
"""


def _usage():
    return USAGE % ("Python 3 (gpumemprof)", KERNEL_NAME, sys.prefix, KERNEL_NAME)


def _user_data_dir():
    """Jupyter's user data directory, as jupyter_core finds it."""
    if os.environ.get("JUPYTER_DATA_DIR"):
        return os.environ["JUPYTER_DATA_DIR"]
    home = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                           "share")
    return os.path.join(home, "jupyter")


def kernel_main(args):
    """python -m gpumemprof kernel ...: 0, 1 when the spec cannot be
    written, 2 on a usage error."""
    if not args or args[0] in ("-h", "--help"):
        (sys.stdout if args else sys.stderr).write(_usage())
        return 0 if args else 2
    if args[0] != "install":
        sys.stderr.write("gpumemprof kernel: unknown command %r\n%s" % (args[0], _usage()))
        return 2
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    where = os.path.join(sys.prefix, "share", "jupyter") if in_venv else _user_data_dir()
    name, display, dump_dir = KERNEL_NAME, "Python 3 (gpumemprof)", None
    rest = args[1:]
    while rest:
        opt = rest.pop(0)
        if opt == "--user":
            where = _user_data_dir()
        elif opt == "--sys-prefix":
            where = os.path.join(sys.prefix, "share", "jupyter")
        elif opt in ("--prefix", "--name", "--display-name", "--dump-dir") and rest:
            value = rest.pop(0)
            if opt == "--prefix":
                where = os.path.join(value, "share", "jupyter")
            elif opt == "--name":
                name = value
            elif opt == "--display-name":
                display = value
            else:
                dump_dir = os.path.abspath(value)
        else:
            sys.stderr.write("gpumemprof kernel install: %s %s\n%s" % (
                "unknown option" if opt.startswith("-") else "unexpected", opt, _usage()))
            return 2
    if not name or "/" in name or name.startswith("."):
        sys.stderr.write("gpumemprof kernel install: %r is not a kernel name\n" % name)
        return 2
    try:
        gmp_run = native_path("gmp-run")
    except FileNotFoundError as e:
        sys.stderr.write("gpumemprof kernel install: %s\n" % e)
        return 1
    argv = [gmp_run] + (["--dump-dir", dump_dir] if dump_dir else []) + [
        "--", sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
        "--ext", "gpumemprof.notebook"]
    spec = {"argv": argv, "display_name": display, "language": "python",
            "metadata": {"debugger": True}}
    target = os.path.join(where, "kernels", name)
    try:
        os.makedirs(target, exist_ok=True)
        with open(os.path.join(target, "kernel.json"), "w") as f:
            json.dump(spec, f, indent=1)
            f.write("\n")
    except OSError as e:
        sys.stderr.write("gpumemprof kernel install: cannot write %s: %s\n" % (target, e))
        return 1
    print("Installed the kernel %s (\"%s\") in %s" % (name, display, target))
    try:
        import ipykernel  # noqa: F401
    except ImportError:
        print("It runs ipykernel, which this Python lacks: pip install ipykernel")
    return 0


def _initial_metadata():
    """GMP_METADATA's object, kept beside the cells' names."""
    try:
        doc = json.loads(os.environ.get("GMP_METADATA", "") or "{}")
        return doc if isinstance(doc, dict) else {}
    except ValueError:
        return {}


class _Cells:
    """Each cell's file and execution count, told to the preload's recorder
    before the cell runs; the OOM a cell died of, written up after it."""

    def __init__(self, shell, recorder):
        self.shell, self.lib, self.rec = shell, recorder[0], recorder[1]
        self.cells = {}  # the file's hash: its execution count, oldest first
        self.base = _initial_metadata()
        self.counted_before, self.running = 0, None
        for name in ("gmp_recorder_set_metadata", "gmp_recorder_set_context"):
            fn = getattr(self.lib, name)
            fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]

    def pre_run_cell(self, info):
        # IPython 9 counts the cell before pre_run_cell, older ones after:
        # the first cell's result says which (post_run_cell)
        self.running = self._name(info.raw_cell, self.shell.execution_count - self.counted_before)

    def _name(self, raw_cell, number):
        """Tells the recorder cell number's file; its hash, or None."""
        try:
            name = self.shell.compile.get_code_name(raw_cell, raw_cell, number)
        except Exception:  # an IPython without per-cell files: nothing to name
            return None
        digits = os.path.basename(name)[:-3] if name.endswith(".py") else ""
        if not digits.isdigit():
            return None
        self.cells.pop(digits, None)
        self.cells[digits] = number
        while len(self.cells) > CELLS_KEPT:
            self.cells.pop(next(iter(self.cells)))
        doc = dict(self.base)
        while True:
            doc["jupyter_cells"] = self.cells
            text = json.dumps(doc, separators=(",", ":"))
            if len(text) < METADATA_MAX or len(self.cells) <= 1:
                break
            self.cells.pop(next(iter(self.cells)))
        self.lib.gmp_recorder_set_metadata(self.rec, text.encode())
        self.lib.gmp_recorder_set_context(self.rec, ("In [%d]" % number).encode())
        return digits

    def post_run_cell(self, result):
        number = getattr(result, "execution_count", None)
        info = getattr(result, "info", None)
        if self.running and number and info is not None and self.cells.get(self.running) != number:
            self.counted_before = self.cells[self.running] - number
            self._name(info.raw_cell, number)
        error = getattr(result, "error_in_exec", None)
        if error is None:
            return
        from . import oom_flight_recorder as ofr
        if not ofr.classify_oom_exception(error).is_oom:
            return
        try:
            path = ofr.OOMFlightRecorder().dump(exception=error, context="In [%d]" % (number or 0))
        except Exception as e:  # the cell's own error is what matters
            sys.stderr.write("gpumemprof: the bundle of this cell's OOM was not written: %s\n" % e)
            return
        if path:
            sys.stderr.write("gpumemprof: this cell ran out of memory; bundle: %s; read it: "
                             "gmp-inspect show %s\n" % (path, path))
            sys.stderr.flush()


def load_ipython_extension(ip):
    recorder = preload_recorder()
    if recorder is None:
        sys.stderr.write("gpumemprof: this kernel does not run under the preload "
                         "(python -m gpumemprof kernel install makes one that does)\n")
        return
    cells = _Cells(ip, recorder)
    ip.events.register("pre_run_cell", cells.pre_run_cell)
    ip.events.register("post_run_cell", cells.post_run_cell)
