"""preload_pages_check.py BUILD — the preload's writable pages at load, as
the loader sees them in every process it starts, and the pages of its own
that such a process writes as it starts and exits.

The loader writes the library's relocated data (the GNU_RELRO region: the
.dynamic section, the GOT, every table of pointers in .data.rel.ro) and
its .got.plt and .data; each page of those is a fault and a copied page in
every process, 4-5 us each on this project's VM, where a shell's
`/bin/true` takes 530 us in all (docs/performance.md).  The region fits one
page, and the rest of what the loader writes the next: this fails, naming
the largest tables of pointers, when a change spreads them over more.  A table of strings is
an array of characters (names.c's api_names) or one NUL-separated string
(bundle_env.c's env_names); a table of functions is a switch
(cuda_driver.c's route_at).

Then `/bin/true` runs under the preload, stopped at its exit (ptrace's exit
event: after the exit's handlers ran, before its memory goes), and the
preload's .bss must hold no page: the start and exit read and write only
what lies on the pages above (GMP_STARTUP_DATA), and each .bss page they
touch is a fault, a zeroed page and its unmapping in every process.  It
fails naming the variables on the pages touched.  Where ptrace is refused
(a sandbox), that half is skipped with a line."""
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

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
image_end = 0  # past the last byte of the library in memory, its .bss included
for line in tool("readelf", "-lW", lib).splitlines():
    f = line.split()
    if f[:1] == ["GNU_RELRO"]:
        relro = (int(f[2], 16), int(f[5], 16))
    elif f[:1] == ["LOAD"] and "W" in "".join(f[6:-1]):
        load = (int(f[2], 16), int(f[4], 16))  # vaddr, bytes in the file
    if f[:1] == ["LOAD"]:
        image_end = max(image_end, int(f[2], 16) + int(f[5], 16))
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


def bss_pages_at_exit(argv):
    """The preload's .bss pages present in argv's process as it exits,
    their offsets in the library; None where ptrace is refused."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    traceme, cont, setoptions, detach = 0, 7, 0x4200, 17
    o_traceexit, event_exit = 0x40, 6
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMP_")}
    dumps = tempfile.mkdtemp(prefix="gmp-pages.")
    env.update(LD_PRELOAD=lib, GMP_DUMP_DIR=dumps)
    pid = os.fork()
    if pid == 0:
        try:
            if libc.ptrace(traceme, 0, None, None) == 0:
                os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)  # the exec's stop, or the child's end
    found = None
    try:
        if not os.WIFSTOPPED(status):
            pid = 0  # reaped: ptrace refused
            return None
        if libc.ptrace(setoptions, pid, None, ctypes.c_void_p(o_traceexit)) != 0:
            return None
        libc.ptrace(cont, pid, None, None)
        while True:
            _, status = os.waitpid(pid, 0)
            if not os.WIFSTOPPED(status):
                pid = 0  # it ended without the exit's stop
                return None
            if status >> 16 == event_exit:
                break
            sig = os.WSTOPSIG(status)
            libc.ptrace(cont, pid, None, ctypes.c_void_p(0 if sig == signal.SIGTRAP else sig))
        # the .bss past the file: the anonymous mapping that starts where
        # the library's last mapping ends, as far as the library's image
        # (the kernel may join the loader's own mappings to it)
        with open("/proc/%d/maps" % pid) as f:
            maps = [line.split() for line in f]
        end = max((int(m[0].split("-")[1], 16) for m in maps if m[-1] == lib), default=None)
        base = min((int(m[0].split("-")[0], 16) for m in maps if m[-1] == lib), default=None)
        bss = [m for m in maps if len(m) == 5 and int(m[0].split("-")[0], 16) == end]
        found = []
        if bss:
            lo, hi = (int(x, 16) for x in bss[0][0].split("-"))
            hi = min(hi, base + (image_end + PAGE - 1) // PAGE * PAGE)
            with open("/proc/%d/pagemap" % pid, "rb") as f:
                f.seek(lo // PAGE * 8)
                entries = f.read((hi - lo) // PAGE * 8)
            for i in range(len(entries) // 8):
                if int.from_bytes(entries[8 * i:8 * i + 8], "little") >> 63:
                    found.append(lo - base + i * PAGE)
    finally:
        if pid:
            libc.ptrace(detach, pid, None, None)
            os.waitpid(pid, 0)
        shutil.rmtree(dumps, ignore_errors=True)
    return found


written = bss_pages_at_exit(["/bin/true"])
if written is None:
    print("preload_pages_check: ptrace refused here: what /bin/true writes at start and exit "
          "not checked")
    sys.exit(0)
if written:
    names = []
    for line in symbols.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "bB" and any(
                int(f[0], 16) < p + PAGE and int(f[0], 16) + int(f[1], 16) > p for p in written):
            names.append(f[3])
    sys.exit("preload_pages_check: /bin/true under the preload touched %d page(s) of its .bss "
             "as it started and exited, a page fault each in every process; the variables there: %s"
             % (len(written), ", ".join(sorted(names)[:12]) or "?"))
print("preload_pages_check: /bin/true under the preload starts and exits without a page of its .bss")
