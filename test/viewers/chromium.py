"""chromium.py -- headless Chromium driven over the DevTools protocol on a
pipe (--remote-debugging-pipe: no port, no WebSocket library), a local web
server for the pages it opens, and the count of inked pixels in a PNG.
Used by render_trace.py; `python3 chromium.py ink FILE.png` prints
"WIDTH HEIGHT INK" (pixels that are not white) for the other tests, and
`python3 chromium.py report FILE.html WIDTH HEIGHT SHOT.png` what a reader
of that page gets (report() below), as one JSON object."""
import base64
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib


class Browser:
    def __init__(self, width=1400, height=900):
        self.profile = tempfile.mkdtemp(prefix="gmp-chromium-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        # the protocol's fixed descriptors, 3 to read and 4 to write, set by
        # the shell (no Python runs between fork and exec: a web server
        # thread may be running)
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--hide-scrollbars", "--remote-debugging-pipe",
                "--window-size=%d,%d" % (width, height), "--user-data-dir=" + self.profile,
                "about:blank"]
        self.proc = subprocess.Popen(
            ["sh", "-c", 'exec chromium "$@" 3<&%d 4>&%d' % (to_chrome_r, from_chrome_w), "sh"]
            + args, pass_fds=(to_chrome_r, from_chrome_w), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf, self.next_id, self.session = b"", 0, None
        self.events = []  # what the browser told unasked (console, network), in order

    def call(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if "method" in reply:
                    self.events.append(reply)
                elif reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError("%s: %s" % (method, reply["error"]))
                    return reply["result"]
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buf += chunk

    def open(self, url):
        target = self.call("Target.createTarget", {"url": url}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]

    def eval(self, expression):
        """A JavaScript expression's value (a promise awaited), as JSON."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError("page script failed: %s" % r["exceptionDetails"])
        return r["result"].get("value")

    def wait_for(self, expression, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.eval(expression):
                return True
            time.sleep(0.25)
        return False

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.call("Browser.close", session=False)
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self.to_chrome)
        os.close(self.from_chrome)
        shutil.rmtree(self.profile, ignore_errors=True)


def serve(directory, files):
    """A web server on 127.0.0.1 for directory, with files ({path: (bytes,
    type)}) answered first; (server, its address)."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            path = self.path.split("?")[0]
            if path in files:
                body, kind = files[path]
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=directory))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, "http://127.0.0.1:%d" % server.server_address[1]


def ink(path, box=None, colored=False):
    """(width, height, pixels not white) of an 8-bit RGB/RGBA PNG, within
    box (x0, y0, x1, y1) when given; with colored, only the pixels that
    are not a grey (a viewer's data, not its frame)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = (int.from_bytes(body[0:4], "big"),
                                  int.from_bytes(body[4:8], "big"), body[8], body[9])
            if depth != 8 or color not in (2, 6):
                raise ValueError("not 8-bit RGB(A)")
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), w * bpp
    x0, y0, x1, y1 = box or (0, 0, w, h)
    prev, count = bytearray(stride), 0
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            p = a + b - c
            pr = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else \
                b if abs(p - b) <= abs(p - c) else c
            line[x] = (line[x] + [0, a, b, (a + b) // 2, pr][f]) & 255
        if y0 <= y < y1:
            for x in range(x0 * bpp, min(x1, w) * bpp, bpp):
                px = line[x:x + 3]
                count += max(px) - min(px) > 40 if colored else px != b"\xff\xff\xff"
        prev = line
    return w, h, count


def report(path, width, height, shot):
    """A page opened from its file as a reader opens it: its text, the
    chart's width and the window's, the hover texts (SVG titles), what the
    console said (messages, exceptions, errors), every request beyond the
    page itself, and a screenshot."""
    b = Browser(width, height)
    try:
        b.open("about:blank")
        for domain in ("Runtime", "Log", "Network", "Page"):
            b.call(domain + ".enable")
        url = "file://" + os.path.abspath(path)
        b.call("Page.navigate", {"url": url})
        loaded = b.wait_for("document.readyState === 'complete'", 30)
        time.sleep(0.5)  # a late request or message has its chance
        facts = b.eval("""(() => {
            const svg = document.querySelector('svg');
            return {text: document.body.innerText,
                    chart_width: svg ? svg.getBoundingClientRect().width : 0,
                    window_width: document.documentElement.clientWidth,
                    hover: Array.from(document.querySelectorAll('svg title'), t => t.textContent)};
        })()""")
        b.screenshot(shot)
        said = []
        for e in b.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.consoleAPICalled":
                said.append("console.%s: %s" % (p.get("type"), [a.get("value") for a in p.get("args", [])]))
            elif m == "Runtime.exceptionThrown":
                said.append("exception: %s" % p.get("exceptionDetails", {}).get("text"))
            elif m == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
                said.append("%s: %s" % (p["entry"]["level"], p["entry"].get("text")))
        requests = [e["params"]["request"]["url"] for e in b.events
                    if e["method"] == "Network.requestWillBeSent"
                    and e["params"]["request"]["url"] != url]
        facts.update(loaded=loaded, console=said, requests=requests)
        return facts
    finally:
        b.close()


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "ink":
    print(*ink(sys.argv[2]))
elif __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "report":
    print(json.dumps(report(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])))
