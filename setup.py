"""setup.py -- setuptools driving the Makefile, for what pyproject.toml
cannot say:

- build_py runs `make native` (the preload, gmp-run, gmp-inspect and the
  recorder library; debug sections stripped) and puts them in the package's
  _native/ directory.  GMP_NATIVE_DIR names a directory that already holds
  them (mk/wheel.sh, which built them in an older distribution's root), and
  then make is not run.
- The version, from the C header, the one place it is written.
- gpumemprof/_c_types.py, the header's structs in Python (mk/c_types.py).
- The man pages and bash's completions, under the prefix's share/ (man and
  bash-completion look there).
- The wheel is for one platform but any Python 3 (py3-none-<platform>): the
  package holds native programs and libraries, not extension modules.
"""
import os
import re
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:  # setuptools >= 70.1 carries bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "include", "gpumemprof.h")
NATIVE = ("gmp-run", "gmp-inspect", "libgpumemprof_preload.so", "libgpumemprof.so")
# make's outputs, beside the ones `make` builds for the tests; setuptools'
# own build directory is under it too (options below)
MAKE_BUILD = os.path.join("build", "python-native")


def version():
    with open(HEADER, encoding="utf-8") as f:
        found = re.search(r'#define GMP_VERSION_STRING "([^"]+)"', f.read())
    if not found:
        raise SystemExit("setup.py: no GMP_VERSION_STRING in " + HEADER)
    return found.group(1)


def c_types():
    out = os.path.join(HERE, "python", "gpumemprof", "_c_types.py")
    if not os.path.isfile(out):
        subprocess.check_call([sys.executable, os.path.join(HERE, "mk", "c_types.py"), HEADER, out])


def missing_build_deps():
    """The Debian packages gmp-inspect builds with that are not here: one
    line naming them beats a compiler's error about a header."""
    missing = []
    for pkg, module in (("libjansson-dev", "jansson"), ("libdw-dev", "libdw")):
        try:
            ok = subprocess.call(["pkg-config", "--exists", module]) == 0
        except OSError:
            ok = False
        if not ok:
            missing.append(pkg)
    if not os.path.isfile("/usr/include/libiberty/demangle.h"):
        missing.append("libiberty-dev")
    return missing


def make_native():
    prebuilt = os.environ.get("GMP_NATIVE_DIR")
    if prebuilt:
        return prebuilt
    missing = missing_build_deps()
    if missing:
        raise SystemExit("gpumemprof: building it needs a C compiler, make and the headers of "
                         + ", ".join(missing) + " (Debian's names; on RHEL: jansson-devel, "
                         "elfutils-devel, binutils-devel)")
    subprocess.check_call(["make", "-s", "-C", HERE, "BUILD=" + MAKE_BUILD, "native"])
    return os.path.join(HERE, MAKE_BUILD)


class BuildWithNative(build_py):
    def run(self):
        c_types()
        super().run()
        built = make_native()
        into = os.path.join(self.build_lib, "gpumemprof", "_native")
        os.makedirs(into, exist_ok=True)
        for name in NATIVE:
            source, target = os.path.join(built, name), os.path.join(into, name)
            if not os.path.isfile(source):
                raise SystemExit("setup.py: %s was not built (%s)" % (name, source))
            # debug sections off: a fifth of the size, nothing a user reads
            if subprocess.call(["strip", "--strip-debug", "-o", target, source]) != 0:
                shutil.copyfile(source, target)
            os.chmod(target, 0o755)
        with open(os.path.join(self.build_lib, "gpumemprof", "_version.py"), "w") as f:
            f.write('__version__ = "%s"\n' % version())


class NativeDistribution(Distribution):
    def has_ext_modules(self):  # the package's files go to platlib
        return True


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(
    version=version(),
    distclass=NativeDistribution,
    cmdclass={"build_py": BuildWithNative, "bdist_wheel": PlatformWheel},
    data_files=[
        ("share/man/man1", ["docs/man/gmp-inspect.1", "docs/man/gmp-run.1"]),
        ("share/bash-completion/completions",
         ["tools/completion/gmp-inspect.bash", "tools/completion/gmp-run.bash"]),
    ],
    options={"build": {"build_base": os.path.join("build", "python")}},
)
