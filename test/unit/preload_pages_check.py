"""preload_pages_check.py BUILD — the preload's writable pages at load, as
the loader sees them in every process it starts.

The loader writes the library's relocated data (the GNU_RELRO region: the
.dynamic section, the GOT, every table of pointers in .data.rel.ro) and
its .got.plt and .data; each page of those is a fault and a copied page in
every process, 4-5 us each on this project's VM, where a shell's
`/bin/true` takes 530 us in all (docs/performance.md).  The region fits one
page, and the rest of what the loader writes the next: this fails, naming
the largest tables of pointers, when a change spreads them over more.  A table of strings is
an array of characters (names.c's api_names) or one NUL-separated string
(bundle_env.c's env_names); a table of functions is a switch
(cuda_driver.c's route_at)."""
import os
import re
import subprocess
import sys

PAGE = 4096

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build")
lib = os.path.join(build, "libgpumemprof_preload.so")


def tool(*argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("preload_pages_check: %s: %s" % (argv[0], e))


symbols = tool("nm", "-S", lib)
if re.search(r" (__asan_init|__tsan_init|__ubsan_handle_\w+)$", symbols, re.M):
    print("preload_pages_check: a sanitizer's build, laid out as it needs: not checked")
    sys.exit(0)
relro = load = None
for line in tool("readelf", "-lW", lib).splitlines():
    f = line.split()
    if f[:1] == ["GNU_RELRO"]:
        relro = (int(f[2], 16), int(f[5], 16))
    elif f[:1] == ["LOAD"] and "W" in "".join(f[6:-1]):
        load = (int(f[2], 16), int(f[4], 16))  # vaddr, bytes in the file
if not relro or not load:
    sys.exit("preload_pages_check: %s has no relro region or no writable segment" % lib)


def pages(start, size):
    return (start + size - 1) // PAGE - start // PAGE + 1


problems = []
if pages(*relro) > 1:
    problems.append("its relocated data (GNU_RELRO) spans %d pages, %d bytes"
                    % (pages(*relro), relro[1]))
if pages(*load) > 2:
    problems.append("the data the loader writes spans %d pages, %d bytes"
                    % (pages(*load), load[1]))
if problems:
    start, end = relro[0], relro[0] + relro[1]
    tables = []
    for line in symbols.splitlines():
        f = line.split()
        if len(f) == 4 and start <= int(f[0], 16) < end:
            tables.append((int(f[1], 16), f[3]))
    largest = ", ".join("%s (%d bytes)" % (n, s) for s, n in sorted(tables, reverse=True)[:6])
    sys.exit("preload_pages_check: %s: %s: a page fault more in every process; the largest "
             "tables of pointers there: %s" % (lib, "; ".join(problems), largest))
print("preload_pages_check: relocated data %d bytes on 1 page, all the loader writes on %d"
      % (relro[1], pages(*load)))
