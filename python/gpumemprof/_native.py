"""The native half of the package, installed beside it in _native/: the
preload (libgpumemprof_preload.so), the recorder library without hooks
(libgpumemprof.so), and the two programs, gmp-run and gmp-inspect.  The
`gmp-run` and `gmp-inspect` commands pip installs are these functions,
which become the programs (exec): gmp-run then finds the preload beside its
own file, as it does in a `make install` tree."""
import os
import sys

NATIVE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")


def native_path(name):
    """The installed file `name` of the native half; FileNotFoundError with
    the reason when this copy of the package has none (a source checkout)."""
    path = os.path.join(NATIVE_DIR, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            "gpumemprof: %s is missing: this copy of the package was not installed "
            "from its wheel (build one with `make wheel`)" % path)
    return path


def preload_path():
    """The preload, for LD_PRELOAD."""
    return native_path("libgpumemprof_preload.so")


def site_path():
    """The directory of gpumemprof's sitecustomize (GMP_TORCH_HISTORY=1):
    what gmp-run puts first on PYTHONPATH, for LD_PRELOAD users to do the same."""
    return os.path.dirname(os.path.dirname(native_path("libgpumemprof_preload.so"))) + "/_site"


def recorder_library_path():
    """The recorder library (no hooks), for ctypes."""
    return native_path("libgpumemprof.so")


def exec_program(name, args):
    """Become the native program `name` with `args`; returns (an exit
    status, after one line on stderr) only when it cannot be started."""
    try:
        path = native_path(name)
        os.execv(path, [name] + list(args))
    except OSError as e:
        print("gpumemprof: cannot run %s: %s" % (name, e), file=sys.stderr)
    return 127


def gmp_run_main():
    return exec_program("gmp-run", sys.argv[1:])


def gmp_inspect_main():
    return exec_program("gmp-inspect", sys.argv[1:])
