#!/usr/bin/python3
"""trace_tasks.py - the compute thread's tasks in executor traces, by what ran beside them (stdlib only).

  trace_tasks.py TRACE.json [TRACE.json ...]

For each trace (strata train --trace, or strata simulate --trace: the same lanes), the steps after the first
(from the second embed_forward on), one line a trace:
  - step: the median time from one embed_forward to the next;
  - fwd, bwd: the median block_forward and block_backward with nothing beside them (no optimizer lane and no
    transfer in flight for more than 5% of the task), and bwd beside: beside the streaming lane's job and a
    transfer (each for more than half the task), with the counts; host: the backward tasks that had the
    host lane's AdamW beside them for more than half their time;
  - head: the median head task;
  - loads: the median weight load (load_weights: widening bf16 weights, copying them to a device) and their
    time per step, both without the waits inside them (for a read, for the unit's optimizer steps); the
    simulator's timeline shows the widening as "widen weights" tasks, counted here too;
  - gaps: per step, the compute lane's time in no span (the work between tasks: zeroing buffers, handing
    jobs to the optimizer; before the executor traced its weight loads, those too).
A task's name is "OP uUNIT mbMB"; lane 1 is compute, 2 the streaming optimizer lane, 3 the host lane, 4 and on
the store's paths (trace lanes in the order the executor and the simulator open them).
"""
import json
import statistics
import sys

COMPUTE, STREAMING, HOST, FIRST_PATH = 1, 2, 3, 4


def merged(spans):
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def overlap(a, b, spans):
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in spans)


def med(xs):
    return f"{statistics.median(xs) / 1e3:.1f} ms (n {len(xs)})" if xs else "-"


def one(path):
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    starts = sorted(e["ts"] for e in events if e["tid"] == COMPUTE and e["name"].startswith("embed_forward"))
    if len(starts) < 3:
        return f"{path}: fewer than three steps traced"
    t0 = starts[1]
    beside = {lane: merged([(e["ts"], e["ts"] + e["dur"]) for e in events
                            if (e["tid"] >= FIRST_PATH if lane == FIRST_PATH else e["tid"] == lane)])
              for lane in (STREAMING, HOST, FIRST_PATH)}
    fwd, bwd, bwd_beside, bwd_host, head, loads = [], [], [], [], [], []
    compute = sorted((e for e in events if e["tid"] == COMPUTE and e["ts"] >= t0), key=lambda e: e["ts"])
    waits = merged([(e["ts"], e["ts"] + e["dur"]) for e in compute if e["name"].startswith("wait")])
    for e in compute:
        a, d = e["ts"], e["dur"]
        op = e["name"].split()[0]
        if op in ("load_weights", "widen"):
            loads.append(d - overlap(a, a + d, waits))
        o = {lane: overlap(a, a + d, s) for lane, s in beside.items()}
        if op == "head":
            head.append(d)
        elif op in ("block_forward", "block_backward"):
            if sum(o.values()) < 0.05 * d:
                (fwd if op == "block_forward" else bwd).append(d)
            elif op == "block_backward" and o[STREAMING] > d / 2 and o[FIRST_PATH] > d / 2:
                bwd_beside.append(d)
            if op == "block_backward" and o[HOST] > d / 2:
                bwd_host.append(d)
    spans = merged([(e["ts"], e["ts"] + e["dur"]) for e in compute])   # a load's waits lie inside it
    steps = len(starts) - 1
    gaps = (spans[-1][1] - t0 - sum(b - a for a, b in spans)) / steps
    step = statistics.median(b - a for a, b in zip(starts[1:], starts[2:])) / 1e6 if len(starts) > 2 else 0
    return (f"{path}: step {step:.3f} s; fwd {med(fwd)}; bwd {med(bwd)}; bwd beside {med(bwd_beside)}; "
            f"host {med(bwd_host)}; head {med(head)}; loads {med(loads)}, {sum(loads) / steps / 1e6:.3f} s a step; "
            f"gaps {gaps / 1e6:.3f} s a step")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        print(one(p))
