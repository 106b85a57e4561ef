# pyload.py — the python3 workload of `make bench`: build a dict of 100k
# entries and round-trip it through JSON.
import json

d = {str(i): [i, str(i), {"k": i, "v": [i, i + 1]}] for i in range(100000)}
s = json.dumps(d)
assert len(json.loads(s)) == 100000
