"""triage_corpus.py TEMPLATE OUT BUNDLES RUNS -- a dump directory as a
cluster's week leaves it, for `make bench`'s triage row: BUNDLES bundles
of RUNS torchrun runs (BUNDLES / RUNS ranks each), every one a copy of the
real bundle TEMPLATE (a rank's, written by the preload) with its own run
id, rank, pid, name and times.  The files a rank's copy does not change
are hard links to those of the run's first rank (a file has at most
65,000 links), so the corpus is quick to make and small; gmp-inspect
reads them as it reads any file.
"""
import json
import os
import sys

template, out, bundles, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ranks = max(1, bundles // runs)
manifest = json.load(open(os.path.join(template, "manifest.json")))
environment = json.load(open(os.path.join(template, "environment.json")))
metadata = json.load(open(os.path.join(template, "metadata.json")))
shared = [f for f in os.listdir(template)
          if f not in ("manifest.json", "environment.json", "metadata.json")]
os.makedirs(out, exist_ok=True)
base_ns = manifest["created_at_ns"]
for n in range(bundles):
    run, rank = n // ranks, n % ranks
    at_ns = base_ns + run * 3600 * 10**9 + rank * 10**8  # a run an hour, ranks 0.1 s apart
    pid = 100000 + n
    name = "oom_dump_%s_%d_cpu_r%d_1" % (manifest["created_at_utc"].replace("-", "").replace(":", ""),
                                         pid, rank)
    d = os.path.join(out, name)
    os.mkdir(d)
    if rank == 0:
        first = d
        for f in shared:
            with open(os.path.join(template, f), "rb") as src, open(os.path.join(d, f), "wb") as dst:
                dst.write(src.read())
    else:
        for f in shared:
            os.link(os.path.join(first, f), os.path.join(d, f))
    run_id = "run-%05d" % run
    manifest.update(bundle_name=name, pid=pid, rank=rank, world_size=ranks, created_at_ns=at_ns,
                    run="torchrun|%s|0" % run_id, run_first=rank == 0)
    environment["pid"] = pid
    environment["process"]["rank"].update(rank=rank, local_rank=rank % 8, world_size=ranks)
    environment["environment"].update(RANK=str(rank), LOCAL_RANK=str(rank % 8),
                                      WORLD_SIZE=str(ranks), TORCHELASTIC_RUN_ID=run_id)
    if metadata.get("failed_request"):
        metadata["failed_request"]["timestamp"] = at_ns / 1e9 - 1
    for f, doc in (("manifest.json", manifest), ("environment.json", environment),
                   ("metadata.json", metadata)):
        with open(os.path.join(d, f), "w") as fp:
            json.dump(doc, fp, separators=(",", ":"))
