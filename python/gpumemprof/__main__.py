"""python -m gpumemprof (also the `gpumemprof` command): the toolkit's entry
for Python users.

    python -m gpumemprof --preload-path          the preload, for LD_PRELOAD
    python -m gpumemprof --site-path             GMP_TORCH_HISTORY's sitecustomize
                                                 directory, for PYTHONPATH
    python -m gpumemprof run [--dump-dir DIR] [--] SCRIPT.py [ARG...]
                                                 this Python under gmp-run
    python -m gpumemprof inspect ARG...          gmp-inspect
    python -m gpumemprof kernel install [...]    a Jupyter kernel under gmp-run
                                                 (notebook.py)
    python -m gpumemprof info|monitor|track|analyze ...
                                                 the seed's verbs (commands.py)
    python -m gpumemprof --version

`run` takes what would follow `python` on a command line (a script, or
-m MODULE, -c CODE) and runs it with this interpreter under gmp-run, which
puts the preload in every process of the job and writes the bundle of one
the kernel's OOM killer ends."""
import sys

from . import __version__
from ._native import exec_program, preload_path, site_path
from .commands import VERBS

USAGE = """usage: python -m gpumemprof --preload-path | --site-path | --version
       python -m gpumemprof run [--dump-dir DIR] [--] SCRIPT.py|-m MODULE|-c CODE [ARG...]
       python -m gpumemprof inspect ARG...   (gmp-inspect; `inspect --help` lists its verbs)
       python -m gpumemprof kernel install [--user|--sys-prefix|--prefix DIR] [--name NAME]
                                           [--display-name TEXT] [--dump-dir DIR]
       python -m gpumemprof info [--json]
       python -m gpumemprof monitor [--duration S] [--interval S] [--output FILE] [--format text|csv|json]
       python -m gpumemprof track [--duration S] [--interval S] [--output FILE] [--format csv|json]
                                  [--warning-threshold PCT] [--critical-threshold PCT] [--dump-dir DIR]
                                  [--devices all|gpus|host] [--watchdog]
       python -m gpumemprof analyze BUNDLE|DIR|FILE [--format txt|json] [--output FILE]
                                    [--visualization] [--plot-dir DIR]
"""


RUN_USAGE = """usage: python -m gpumemprof run [--dump-dir DIR] [--] SCRIPT.py|-m MODULE|-c CODE [ARG...]

Runs this Python (%s) under gmp-run: the preload in every process of the
job, and a bundle for each that runs out of memory, the kernel's OOM
killer's included.  What follows is what would follow `python` on a
command line (its own options, such as -u or -X, included).

  --dump-dir DIR   where the bundles go (default ./oom_dumps)
""" % sys.executable


def run(args):
    gmp_run_args = []
    if args and args[0] in ("-h", "--help"):
        sys.stdout.write(RUN_USAGE)
        return 0
    separated = False
    while args and args[0] in ("--dump-dir", "--"):
        if args[0] == "--":
            args, separated = args[1:], True
            break
        if len(args) < 2:
            sys.stderr.write("gpumemprof run: --dump-dir needs a directory\n" + USAGE)
            return 2
        gmp_run_args += args[:2]
        args = args[2:]
    if not args:
        sys.stderr.write("gpumemprof run: nothing to run\n" + RUN_USAGE)
        return 2
    if args[0].startswith("--") and not separated:
        # Python's long options are --help and --version: ours say what run is
        sys.stderr.write("gpumemprof run: unknown option %s\n%s" % (args[0], RUN_USAGE))
        return 2
    return exec_program("gmp-run", gmp_run_args + ["--", sys.executable] + list(args))


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        (sys.stdout if args else sys.stderr).write(USAGE)
        return 0 if args else 2
    verb, rest = args[0], args[1:]
    if verb == "--version":
        print("gpumemprof " + __version__)
        return 0
    if verb in ("--preload-path", "--site-path"):
        try:
            print(preload_path() if verb == "--preload-path" else site_path())
        except FileNotFoundError as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    if verb == "run":
        return run(rest)
    if verb == "inspect":
        return exec_program("gmp-inspect", rest)
    if verb == "kernel":
        from .notebook import kernel_main
        return kernel_main(rest)
    if verb in VERBS:
        return VERBS[verb](rest)
    sys.stderr.write("gpumemprof: unknown command %r\n%s" % (verb, USAGE))
    return 2


if __name__ == "__main__":
    sys.exit(main())
