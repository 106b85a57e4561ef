"""torch_snapshot_check.py SNAPSHOT.pickle -- a loader written from
PyTorch's published snapshot format (what torch.cuda.memory._snapshot()
returns and torch.cuda._memory_viz reads: segments with their blocks,
device_traces of alloc/free/segment/oom entries), NOT PyTorch's own code:
PyTorch is not on the machines the tests run on.  It loads the pickle with
the standard library, checks every field memory_viz reads for its type, the
invariants its `stats` view asserts (a segment's blocks add up to its
size; a block's requested size is within it), replays each device's trace
as its timeline does (alloc adds, free_completed takes away), checks that
every pickle opcode is one that memory_viz's own JavaScript unpickler
reads (the page at pytorch.org/memory_viz reads a dropped file with it,
not with Python's pickle: an opcode outside its list fails there only),
walks each device's trace back from the end as that page's Allocator
State History does, checking that every live block lies in a segment at
every step (where the page would stop with an error), and prints one JSON
line: per device the replayed peak and the bytes in segments, the
OOM entries, how many frames name a function, how many entries of each
action and how many segments are expandable (mapped).  Exit 1, with the reason,
on anything memory_viz would trip on."""
import json
import pickle
import pickletools
import sys

ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "snapshot", "oom"}
STATES = {"active_allocated", "active_pending_free", "inactive"}
# the opcodes the unpickler in PyTorch's MemoryViz.js handles
JS_OPCODES = {"APPENDS", "BINGET", "BININT", "BININT1", "BININT2", "EMPTY_DICT", "EMPTY_LIST",
              "FRAME", "LONG1", "LONG_BINGET", "MARK", "MEMOIZE", "PROTO", "SETITEMS",
              "SHORT_BINUNICODE", "STOP", "TUPLE2", "APPEND", "NEWFALSE", "BINPUT",
              "BINUNICODE", "EMPTY_TUPLE", "NEWTRUE", "NONE", "BINFLOAT", "TUPLE", "TUPLE1",
              "TUPLE3", "LONG_BINPUT", "LIST", "DICT", "SETITEM"}


def fail(why):
    print("torch_snapshot_check: " + why, file=sys.stderr)
    sys.exit(1)


def need(obj, key, kinds, where):
    if key not in obj or not isinstance(obj[key], kinds) or isinstance(obj[key], bool) != (
            kinds is bool):
        fail("%s: %r missing or not %s: %r" % (where, key, kinds, obj.get(key)))
    return obj[key]


def frames_ok(frames, where, named):
    if not isinstance(frames, list):
        fail(where + ": frames is not a list")
    for f in frames:
        for key, kind in (("filename", str), ("line", int), ("name", str)):
            need(f, key, kind, where + " frame")
        named[0] += bool(f["name"]) and not f["name"].startswith("0x")
    return frames


with open(sys.argv[1], "rb") as fh:
    raw = fh.read()
for op, arg, pos in pickletools.genops(raw):
    if op.name not in JS_OPCODES:
        fail("opcode %s at byte %d: memory_viz's page cannot read it" % (op.name, pos))
    if op.name == "PROTO" and not 2 <= arg <= 4:
        fail("protocol %d: memory_viz's page reads 2 to 4" % arg)
snap = pickle.loads(raw)
if not isinstance(snap, dict):
    fail("not a dict")
named = [0]
segment_bytes = {}
for i, seg in enumerate(need(snap, "segments", list, "snapshot")):
    where = "segment %d" % i
    for key in ("device", "address", "total_size", "allocated_size", "active_size",
                "requested_size", "stream"):
        need(seg, key, int, where)
    need(seg, "segment_type", str, where)
    pool = need(seg, "segment_pool_id", tuple, where)
    if len(pool) != 2:
        fail(where + ": segment_pool_id is not a pair")
    frames_ok(need(seg, "frames", list, where), where, named)
    total = 0
    for k, b in enumerate(need(seg, "blocks", list, where)):
        bw = "%s block %d" % (where, k)
        size = need(b, "size", int, bw)
        if need(b, "requested_size", int, bw) > size:
            fail(bw + ": requested_size over size")
        if need(b, "state", str, bw) not in STATES:
            fail(bw + ": state %r" % b["state"])
        frames_ok(need(b, "frames", list, bw), bw, named)
        total += size
    if total != seg["total_size"]:
        fail(where + ": blocks add up to %d, total_size is %d" % (total, seg["total_size"]))
    segment_bytes[seg["device"]] = segment_bytes.get(seg["device"], 0) + seg["total_size"]



def walk_back(device, trace):
    """The page's simulate_memory, from the end to the first entry."""
    segs = [[seg["address"], seg["total_size"]] for seg in snap["segments"]
            if seg["device"] == device]
    blocks = {}
    for seg in snap["segments"]:
        if seg["device"] != device:
            continue
        addr = seg["address"]
        for b in seg["blocks"]:
            if b["state"] in ("active_allocated", "active_pending_free"):
                blocks[addr] = b["size"]
            addr += b["size"]
    entries = []
    for e in trace:  # the page makes free_requested + free_completed one "free"
        if (e["action"] == "free_completed" and entries and
                entries[-1]["action"] == "free_requested" and entries[-1]["addr"] == e["addr"]):
            entries[-1] = dict(e, action="free")
        else:
            entries.append(e)
    for k in range(len(entries) - 1, -1, -1):
        e, where = entries[k], "device %d entry %d walking back" % (device, k)
        if e["action"] in ("free", "free_completed"):
            blocks[e["addr"]] = e["size"]
        elif e["action"] == "free_requested":
            if e["addr"] not in blocks:
                fail(where + ": free_requested of no block")
        elif e["action"] == "alloc":
            blocks.pop(e["addr"], None)
        elif e["action"] in ("segment_free", "segment_unmap"):
            segs.append([e["addr"], e["size"]])
        elif e["action"] in ("segment_alloc", "segment_map"):
            inside = [s for s in segs if s[0] <= e["addr"] and e["addr"] + e["size"] <= s[0] + s[1]]
            if not inside:
                fail(where + ": %s of a range in no segment" % e["action"])
            segs.remove(inside[0])
        for addr in blocks:
            if not any(s[0] <= addr < s[0] + s[1] for s in segs):
                fail(where + ": the block at %#x lies in no segment" % addr)


peaks, ooms, actions = {}, [], {}
for device, trace in enumerate(need(snap, "device_traces", list, "snapshot")):
    if not isinstance(trace, list):
        fail("device_traces[%d] is not a list" % device)
    now = peak = 0
    for k, e in enumerate(trace):
        where = "device %d entry %d" % (device, k)
        if need(e, "action", str, where) not in ACTIONS:
            fail(where + ": action %r" % e["action"])
        actions[e["action"]] = actions.get(e["action"], 0) + 1
        for key in ("addr", "size", "stream", "time_us"):
            need(e, key, int, where)
        frames_ok(need(e, "frames", list, where), where, named)
        if e["action"] == "alloc":
            now += e["size"]
        elif e["action"] == "free_completed":
            now -= e["size"]
        elif e["action"] == "oom":
            ooms.append({"device": device, "size": e["size"],
                         "device_free": need(e, "device_free", int, where),
                         "frames": [f["name"] for f in e["frames"]]})
        peak = max(peak, now)
    peaks[device] = peak
    walk_back(device, trace)
expandable = sum(1 for seg in snap["segments"] if seg.get("is_expandable"))
print(json.dumps({"peaks": peaks, "segment_bytes": segment_bytes, "ooms": ooms,
                  "named_frames": named[0], "actions": actions, "expandable": expandable}))
