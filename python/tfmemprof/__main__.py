"""python -m tfmemprof (also the `tfmemprof` command the wheel installs):
see cli.py."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
