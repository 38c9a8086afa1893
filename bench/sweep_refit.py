#!/usr/bin/env python3
"""sweep_refit.py - how much of a placement sweep's prediction error is the
executor's pace (issue 13).

    bench/sweep_refit.py STRATA OUT_DIR [MEASURED_NONE_S]

OUT_DIR is a finished bench/placement_sweep.sh output. For every run there
(not those set aside) it predicts the run again with `strata simulate` on
the description with the run's own disk rates (run-NAME.hw-run.json, as the
sweep's "run's disk" column) and prints measured (the median of steps 2..),
predicted and the error. With MEASURED_NONE_S, the descriptions' blocks'
factor (compute.block_factor) is first refitted, by bisection, so that the
run with nothing on the SSD (the budget of the whole state) is predicted at
that time, and every run is predicted with that factor: what the sweep's
predictions would be had the probe timed the executor's pace as the runs
saw it. The sweep's shape (gpt2-350m, 1 x SEQ, mixed, no clipping) is read
from the run names and MODEL/SEQ in the environment (defaults gpt2-350m, 64).
"""
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def parse_name(name):
    """b3050-vertical-a0.00-g6-optim0.64_grads0.88-r2 -> schedule, alpha, buffers, --offload."""
    m = re.match(r"b\d+-(vertical|horizontal)-a([\d.]+)(?:-g(\d+))?-(.*?)(?:-r\d+)?$", name)
    if not m:
        raise SystemExit(f"sweep_refit: not a run name: {name}")
    kinds = [re.sub(r"^([a-z]+)([\d.]+)$", r"\1=\2", k) for k in m.group(4).split("_")]
    return m.group(1), m.group(2), m.group(3) or "3", ",".join(kinds)


def predict(strata, hw, name):
    sched, alpha, bufs, offload = parse_name(name)
    shape = ["--model", os.environ.get("MODEL", "gpt2-350m"), "--seq", os.environ.get("SEQ", "64"),
             "--precision", "mixed", "--clip", "0", "--micro-batch", "1"]
    r = subprocess.run([strata, "simulate", "--hw", hw, *shape, "--schedule", sched, "--alpha", alpha,
                        "--grad-buffers", bufs, "--offload", offload, "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"sweep_refit: strata simulate failed for {name}: {r.stderr.strip()}")
    return json.loads(r.stdout)["iter_s"]


def measured(out, name):
    steps = [json.loads(line)["step_s"] for line in open(f"{out}/run-{name}/metrics.jsonl") if '"step_s"' in line]
    return statistics.median(steps[1:])


def with_factor(src, factor, dst):
    d = json.load(open(src))
    d["compute"]["block_factor"] = factor
    json.dump(d, open(dst, "w"))


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__.split("\n\n")[1])
    strata, out = sys.argv[1], sys.argv[2]
    target = float(sys.argv[3]) if len(sys.argv) == 4 else None
    names = sorted(os.path.basename(f)[len("run-"):-len(".hw-run.json")] for f in glob.glob(f"{out}/run-*.hw-run.json"))
    names = [n for n in names if not re.search(r"\.t\d+$", n)]
    if not names:
        raise SystemExit(f"sweep_refit: no runs in {out}")
    tmp = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    factor = None
    try:
        if target is not None:
            none = [n for n in names if n.endswith("-none")]
            if not none:
                raise SystemExit("sweep_refit: no run with nothing on the SSD to refit the factor to")
            src = f"{out}/run-{none[0]}.hw-run.json"
            lo, hi = 0.25, 4.0   # the probe's bounds on the factor
            for _ in range(30):
                mid = (lo + hi) / 2
                with_factor(src, mid, tmp)
                lo, hi = (lo, mid) if predict(strata, tmp, none[0]) > target else (mid, hi)
            factor = (lo + hi) / 2
            print(f"blocks' factor refitted to {none[0]} at {target:.3f} s: {factor:.3f} "
                  f"(the sweep's: {json.load(open(src))['compute']['block_factor']:.3f})")
        within = 0
        for n in names:
            hw = f"{out}/run-{n}.hw-run.json"
            if factor is not None:
                with_factor(hw, factor, tmp)
                hw = tmp
            p, m = predict(strata, hw, n), measured(out, n)
            err = 100 * (p - m) / m
            within += abs(err) <= 10
            print(f"{n:56s} measured {m:.3f} s, predicted {p:.3f} s ({err:+.1f}%)")
        print(f"{within} of {len(names)} runs within 10%")
    finally:
        os.unlink(tmp)


if __name__ == "__main__":
    main()
