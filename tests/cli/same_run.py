"""same_run.py RUN REFERENCE [BOUND] - two run directories trained the same
model the same way (on other ranks, say): their weights (model.safetensors,
F32) within BOUND (default 1e-6) of each other (relative, over all
tensors), and the same number of training losses in metrics.jsonl, each
within 1e-5 (relative): up to the rounding of another gradient summation
order. Prints the distances; exit status 0 when they are within the
bounds, 1 otherwise."""
import json
import struct
import sys

import numpy as np


def weights(run):
    b = open(run + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], dtype=np.float32)
            for k, v in h.items() if k != "__metadata__"}


def losses(run):
    return [json.loads(line)["loss"] for line in open(run + "/metrics.jsonl") if '"loss"' in line]


a, b = weights(sys.argv[1]), weights(sys.argv[2])
d = (sum(((a[k].astype(np.float64) - b[k]) ** 2).sum() for k in b) /
     sum((b[k].astype(np.float64) ** 2).sum() for k in b)) ** 0.5 if set(a) == set(b) else float("inf")
la, lb = losses(sys.argv[1]), losses(sys.argv[2])
def brief(l):
    return "%d, %s ... %s" % (len(l), l[:2], l[-2:]) if len(l) > 6 else str(l)


print("     weights %.2e apart; losses %s against %s" % (d, brief(la), brief(lb)))
bound = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-6
same = d < bound and len(la) == len(lb) > 0 and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(la, lb))
sys.exit(0 if same else 1)
