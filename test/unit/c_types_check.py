"""c_types_check.py BUILD — the Python bindings' generated structs and numbers
(python/gpumemprof/_c_types.py, mk/c_types.py) against the C compiler's own
reading of include/gpumemprof.h: a C file of static assertions, one per
struct's size and per field's offset and size, and one per enum member and
flag, compiled with the project's compiler.  A field the generator misread
(a type mapped to the wrong width, an array miscounted, an enum renumbered)
fails the compile and the check."""
import ctypes
import importlib.util
import os
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build")
path = os.path.join(root, "python", "gpumemprof", "_c_types.py")
spec = importlib.util.spec_from_file_location("_c_types", path)
types = importlib.util.module_from_spec(spec)
spec.loader.exec_module(types)

checks = []
for cls in types.STRUCTS:
    c = cls.c_struct
    checks.append("sizeof(%s) == %d" % (c, ctypes.sizeof(cls)))
    for name, _ in cls._fields_:
        field = getattr(cls, name)
        checks.append("offsetof(%s, %s) == %d" % (c, name, field.offset))
        checks.append("sizeof(((%s *)0)->%s) == %d" % (c, name, field.size))
numbers = 0
for name, value in sorted(vars(types).items()):
    if name.isupper() and isinstance(value, int) and name != "STRUCTS":
        checks.append("GMP_%s == %d" % (name, value))
        numbers += 1
source = ['#include <stddef.h>', '#include "gpumemprof.h"']
source += ['_Static_assert(%s, "%s");' % (c, c.replace('"', "'")) for c in checks]
os.makedirs(os.path.join(build, "check"), exist_ok=True)
out = os.path.join(build, "check", "c_types_check.c")
with open(out, "w", encoding="utf-8") as f:
    f.write("\n".join(source) + "\n")
cc = os.environ.get("CC", "cc")
done = subprocess.run([cc, "-std=gnu11", "-fsyntax-only", "-I", os.path.join(root, "include"), out],
                      capture_output=True, text=True)
if done.returncode:
    sys.stderr.write(done.stderr)
    sys.exit("c_types_check: the Python structs disagree with include/gpumemprof.h (%s)" % out)
print("c_types: %d structs, %d numbers, the compiler's layout" % (len(types.STRUCTS), numbers))
