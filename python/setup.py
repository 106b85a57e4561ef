"""setup.py -- what pyproject.toml cannot say: the version (from the C
header, the one place it is written), and that the wheel is for one
platform but any Python 3 (py3-none-<platform>): the package holds native
programs and libraries, not extension modules."""
import os
import re
import subprocess
import sys

from setuptools import setup
from setuptools.dist import Distribution

try:  # setuptools >= 70.1 carries bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE = os.path.join(HERE, "gpumemprof", "_native")
NEEDED = ("gmp-run", "gmp-inspect", "libgpumemprof_preload.so", "libgpumemprof.so")


def c_types():
    """gpumemprof/_c_types.py, the header's structs and numbers in Python, as
    `make` writes it: written here too when a build from the source tree
    comes without it."""
    out = os.path.join(HERE, "gpumemprof", "_c_types.py")
    writer = os.path.join(HERE, "..", "mk", "c_types.py")
    header = os.environ.get("GMP_VERSION_HEADER", os.path.join(HERE, "..", "include", "gpumemprof.h"))
    if os.path.isfile(out):
        return
    if not os.path.isfile(writer):
        raise SystemExit("setup.py: gpumemprof/_c_types.py is missing: build with `make`")
    subprocess.check_call([sys.executable, writer, header, out])


def version():
    header = os.environ.get("GMP_VERSION_HEADER", os.path.join(HERE, "..", "include", "gpumemprof.h"))
    with open(header, encoding="utf-8") as f:
        found = re.search(r'#define GMP_VERSION_STRING "([^"]+)"', f.read())
    if not found:
        raise SystemExit("setup.py: no GMP_VERSION_STRING in " + header)
    return found.group(1)


class NativeDistribution(Distribution):
    def has_ext_modules(self):  # the package's files go to platlib
        return True


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        missing = [n for n in NEEDED if not os.path.isfile(os.path.join(NATIVE, n))]
        if missing:
            raise SystemExit("setup.py: gpumemprof/_native lacks %s: build the wheel with "
                             "`make wheel`" % ", ".join(missing))
        super().finalize_options()

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


c_types()
setup(version=version(), distclass=NativeDistribution, cmdclass={"bdist_wheel": PlatformWheel})
