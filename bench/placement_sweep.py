#!/usr/bin/python3
"""placement_sweep.py - bench/placement_sweep.sh's helper (stdlib only).

  smallest FILE               the smallest host share in strata plan's failure message, in whole MiB (rounded up)
  budgets SMALL_MIB WHOLE_BYTES POINTS
                              the sweep's budgets in MiB, one a line: POINTS evenly spaced from SMALL_MIB to
                              the whole state (rounded up), and half the state if not among them ("MIB half")
  placements FILE N           the first N distinct placements of a strata plan table, in rank order, each with
                              the schedule, micro-batch, alpha and gradient buffers ranked first for it:
                              "SCHED B ALPHA GBUFS OFFLOAD"
  best FILE                   strata plan's best line: "SCHED B ALPHA GBUFS OFFLOAD SECONDS"
  json FILE KEY[.KEY...]      one value of a JSON file (strata simulate --json, strata probe)
  faster FILE...              the position (from 1) of the strata simulate --json FILE with the smallest iter_s
  steptime RUN_DIR            the mean step time of steps 2.. of RUN_DIR/metrics.jsonl
  runhw HW LOG OUT            HW with its SSD's rates replaced by the ones the run in LOG saw while busy
                              ("SSD path P while busy ...: read R GB/s ..., write W GB/s"; mixed rates scaled
                              alike), into OUT; HW unchanged when the run moved nothing on the SSD
  held START RUN TOL          exit 0 when strata simulate's iteration times in START and RUN (--json) are within
                              TOL of each other (or RUN is missing), 1 when not: the drive changed speed
  report OUT MODEL SEQ STEPS  the markdown report from OUT/sweep.tsv, the runs' logs and metrics
  repredict OUT STRATA MODEL [NONE_S]
                              every finished run of OUT predicted again by STRATA (another build's model) on the
                              descriptions the sweep recorded (the disk before the run, the disk the run saw):
                              the iteration's error and compute's (computing against compute + contention), and
                              how many runs each puts within 10%; the sweep's own prediction beside them. With
                              NONE_S, every description's blocks' factor is first set to the one (bisected) that
                              predicts the run with nothing on the SSD at NONE_S seconds on its own description:
                              the predictions had the probe timed the executor's pace as the runs saw it
  probes REPORT...            the start probe against the end probe, from sweep reports (markdown): each report's
                              runs with nothing on the SSD (compute alone), their median measured, the prediction
                              on the start description and on the end one, and how many reports put the start's
                              compute more than 5% slower than the end's, or faster
"""
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys

MIB = 1 << 20
# strata train's rates while busy, per SSD path: path, read GB/s, write GB/s (builds before the steps-only
# counters printed "while busy:", counting evaluations, commits and the first step)
BUSY = re.compile(r"^SSD path (\d+) while busy(?: in the steps after the first)?: read ([\d.]+) GB/s .*?, "
                  r"write ([\d.]+) GB/s", re.M)
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def smallest(path):
    text = open(path).read()
    m = re.search(r"the smallest host share ([\d.]+) (B|KiB|MiB|GiB|TiB)", text)
    if not m:
        sys.exit(f"no 'smallest host share' in {path}:\n{text}")
    print(math.ceil(float(m.group(1)) * UNITS[m.group(2)] / MIB))


def budgets(small, whole_bytes, points):
    small, whole_bytes, points = int(small), int(whole_bytes), int(points)
    whole = math.ceil(whole_bytes / MIB)
    half = round(whole_bytes / 2 / MIB)
    if points < 2 or whole <= small:
        sys.exit(f"no sweep: {points} points from {small} MiB to the whole state, {whole} MiB")
    out = sorted({small + round(i * (whole - small) / (points - 1)) for i in range(points)})
    if half >= small and half not in out:
        out = sorted(out + [half])
    for b in out:
        print(b, "half" if b == half else "")


def table(path):
    """Rows of a strata plan table: (schedule, B, alpha, gradient buffers, offload)."""
    rows = []
    for line in open(path):
        f = line.split()
        # rank schedule B x M alpha gbufs offload tokens/s ...
        if len(f) >= 8 and f[0].isdigit() and f[1] in ("vertical", "horizontal") and f[3] == "x":
            rows.append((f[1], f[2], f[5], f[6], f[7]))
    return rows


def placements(path, n):
    seen = []
    for sched, b, alpha, gbufs, offload in table(path):
        if offload not in [s[4] for s in seen]:
            seen.append((sched, b, alpha, gbufs, offload))
    if not seen:
        sys.exit(f"no ranked configurations in {path}")
    for p in seen[:int(n)]:
        print(*p)


def best(path):
    text = open(path).read()
    m = re.search(r"^best: --schedule (\S+) --micro-batch (\d+) --alpha (\S+) --grad-buffers (\d+) --offload (\S+): "
                  r"([\d.]+) s per iteration",
                  text, re.M)
    if not m:
        sys.exit(f"no 'best:' line in {path}")
    print(*m.groups())


def get(path, key):
    v = json.load(open(path))
    for k in key.split("."):
        v = v[int(k)] if isinstance(v, list) else v[k]
    print(v)


def trialcheck(log):
    """The probe's check of its own trial on the drives ((predicted - measured) / measured, in percent), if it ran."""
    found = re.findall(r"the trial on the drives: .*\(([-+]?[0-9.]+)%\)", open(log).read())
    if found:
        print(found[-1])


def faster(*sims):
    times = []
    for path in sims:
        with open(path) as f:
            times.append(json.load(f)["iter_s"])
    print(1 + times.index(min(times)))


def steptime(run_dir):
    rows = [json.loads(l) for l in open(f"{run_dir}/metrics.jsonl") if '"step_s"' in l]
    times = [r["step_s"] for r in rows if r["step"] >= 2]
    print(f"{sum(times) / len(times):.3f}")


def runhw(hw_path, log, out_path):
    hw = json.load(open(hw_path))
    text = open(log).read()
    for m in BUSY.finditer(text):
        p, r, w = int(m.group(1)), float(m.group(2)), float(m.group(3))
        d = hw["ssd"][p]
        # a direction the run never used keeps the probe's rate
        for key, new in (("read_gbps", r), ("write_gbps", w)):
            if new > 0:
                mixed = "mixed_" + key
                if mixed in d:
                    d[mixed] *= new / d[key]
                d[key] = new
    json.dump(hw, open(out_path, "w"), indent=2)


def held(start, run_json, tol):
    try:
        seen = json.load(open(run_json))["iter_s"]
    except OSError:
        sys.exit(0)
    sys.exit(0 if abs(seen / json.load(open(start))["iter_s"] - 1) <= float(tol) else 1)


# ---------------------------------------------------------------- repredict

def repredict(out, strata, model, none_s=None):
    tmp = f"{out}/repredict.hw.json"

    def predict(hw, flags, factor=None):
        if factor is not None:   # the description with this blocks' factor
            d = json.load(open(hw))
            d["compute"]["block_factor"] = factor
            json.dump(d, open(tmp, "w"))
            hw = tmp
        r = subprocess.run([strata, "simulate", "--hw", hw] + flags + ["--json"], capture_output=True, text=True,
                           check=True)
        return json.loads(r.stdout)

    def within(errs):
        return sum(abs(e) <= 0.10 for e in errs)

    def flags_of(start):
        j = json.load(open(start))
        return ["--model", model, "--seq", str(j["seq"]), "--precision", "mixed", "--clip", "0",   # the sweep's SHAPE
                "--micro-batch", str(j["micro_batch"]), "--schedule", j["schedule"], "--alpha", str(j["alpha"]),
                "--grad-buffers", str(j["grad_buffers"]), "--offload", j["offload"]]

    starts = sorted(glob.glob(f"{out}/run-*.sim-start.json"))
    factor = None
    if none_s is not None:
        none = [f for f in starts if json.load(open(f))["offload"] == "none"]
        if not none:
            sys.exit(f"repredict: no run with nothing on the SSD in {out} to fit the blocks' factor to")
        hw, flags = none[0].replace(".sim-start.json", ".hw.json"), flags_of(none[0])
        lo, hi = 0.25, 4.0   # the probe's bounds on the factor
        for _ in range(30):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if predict(hw, flags, mid)["iter_s"] > float(none_s) else (mid, hi)
        factor = (lo + hi) / 2
        print(f"blocks' factor fitted to {os.path.basename(none[0])[4:-15]} at {float(none_s):.3f} s: {factor:.3f} "
              f"(the description's {json.load(open(hw))['compute']['block_factor']:.3f})\n")
    rows, sweep_e, before_e, run_e, comp_e = [], [], [], [], []
    for start in starts:
        name = os.path.basename(start)[len("run-"):-len(".sim-start.json")]
        m = run(out, name)
        if m is None or not os.path.exists(f"{out}/run-{name}.hw-run.json"):
            continue
        j = json.load(open(start))
        flags = flags_of(start)
        before = predict(f"{out}/run-{name}.hw.json", flags, factor)
        seen = predict(f"{out}/run-{name}.hw-run.json", flags, factor)
        meas, computing = m["step_s"], m["computing"]
        e = (j["iter_s"] / meas - 1, before["iter_s"] / meas - 1, seen["iter_s"] / meas - 1)
        sweep_e.append(e[0]), before_e.append(e[1]), run_e.append(e[2])
        working = seen["compute_s"] + seen["contention_s"]
        if computing:
            comp_e.append(working / computing - 1)
        rows.append(f"| {name} | {meas:.3f} | {e[0] * 100:+.1f} | {e[1] * 100:+.1f} | {e[2] * 100:+.1f} | "
                    + (f"{computing:.3f} / {working:.3f} ({comp_e[-1] * 100:+.1f})" if computing else "-") + " |")
    n = len(rows)
    if n == 0:
        sys.exit(f"repredict: no finished runs with recorded descriptions in {out}")
    print("| run | measured s | err %: the sweep's (disk before) | this build's, disk before | this build's, the run's "
          "disk | compute thread: measured / predicted s (err %) |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nwithin 10%: the sweep's predictions {within(sweep_e)} of {n}; this build's {within(before_e)} of {n} "
          f"(median error {statistics.median(before_e) * 100:+.1f}%), {within(run_e)} of {n} on the disk each run saw "
          f"(median {statistics.median(run_e) * 100:+.1f}%)"
          + (f"; compute thread median {statistics.median(comp_e) * 100:+.1f}%, mean |error| "
             f"{statistics.mean(abs(x) for x in comp_e) * 100:.1f}%" if comp_e else ""))
    if factor is not None:
        os.unlink(tmp)


# ---------------------------------------------------------------- report

def run(out, name):
    """Measured figures of run NAME, or None when it did not finish."""
    log = f"{out}/run-{name}.log"
    text = open(log).read() if os.path.exists(log) else ""
    if not re.search(r"^done:", text, re.M):
        return None
    rows = [json.loads(l) for l in open(f"{out}/run-{name}/metrics.jsonl") if '"step_s"' in l]
    times = [r["step_s"] for r in rows if r["step"] >= 2]
    r = {"step_s": sum(times) / len(times), "steps": times}
    m = re.search(r"SSD traffic per step of this schedule and placement: .* \((\d+), (\d+) bytes\)", text)
    r["read"], r["written"] = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    m = re.search(r"peak resident ([\d.]+ \S+)", text)
    r["rss"] = m.group(1) if m else "?"
    m = re.search(r"compute thread: computing ([\d.]+) s, waiting ([\d.]+) s \(on the SSD ([\d.]+) s, "
                  r"the optimizer ([\d.]+) s\)", text)
    r["wait"] = f"{m.group(1)} / {m.group(3)} / {m.group(4)}" if m else "?"
    r["computing"] = float(m.group(1)) if m else None
    m = next((m for m in BUSY.finditer(text) if m.group(1) == "0"), None)
    r["busy"] = f"r {m.group(2)}, w {m.group(3)} GB/s" if m else "-"
    r["read_gbps"] = float(m.group(2)) if m and float(m.group(2)) > 0 else None
    return r


def sim(out, name, which):
    path = f"{out}/run-{name}.sim-{which}.json"
    try:
        return json.load(open(path))["iter_s"]
    except (OSError, ValueError, KeyError):
        return None


def first_drive(path):
    """The first SSD path of description PATH (a dict), or None when it has none or cannot be read."""
    try:
        s = json.load(open(path))["ssd"][0]
        return s if "read_gbps" in s and "write_gbps" in s else None
    except (OSError, ValueError, KeyError, IndexError):
        return None


def disk(path):
    s = first_drive(path)
    return f"read {s['read_gbps']:.3f} GB/s, write {s['write_gbps']:.3f} GB/s" if s else "not measured"


def report(out, model, seq, steps):
    steps = int(steps)
    meta = dict(l.rstrip("\n").split("\t", 1) for l in open(f"{out}/sweep.meta"))
    whole_bytes = int(meta["whole_bytes"])
    points = {}          # budget MiB -> {"half": bool, "binary": [row...], "fractional": row}
    repeats = {}         # run NAME -> its later rounds' rows (NAME-r2, ...)
    aside = f"{out}/setaside"
    for line in open(f"{out}/sweep.tsv"):
        mib, half, role, name, sched, b, alpha, gbufs, offload, plan_s = line.rstrip("\n").split("\t")
        p = points.setdefault(int(mib), {"half": half == "half", "binary": [], "fractional": None})
        row = {"name": name, "sched": sched, "b": b, "alpha": alpha, "gbufs": int(gbufs), "offload": offload,
               "plan_s": float(plan_s) if plan_s != "-" else None, "role": role,
               "run": run(out, name), "pred": sim(out, name, "start"), "pred_end": sim(out, name, "end"),
               "pred_run": sim(out, name, "run"), "pred_plan": sim(out, name, "plan")}
        # its attempts set aside because the drive changed speed under them (NAME.t1, ...)
        row["aside"] = []
        while os.path.exists(f"{aside}/run-{name}.t{len(row['aside']) + 1}.log"):
            tn = f"{name}.t{len(row['aside']) + 1}"
            row["aside"].append({"name": tn, "run": run(aside, tn), "pred": sim(aside, tn, "start"),
                                 "pred_end": None, "pred_run": sim(aside, tn, "run"), "set_aside": True})
        if role == "repeat":
            repeats.setdefault(name.rsplit("-r", 1)[0], []).append(row)
        elif role.startswith("binary"):
            p["binary"].append(row)
        else:
            p["fractional"] = row
    mem = run(out, "memory")

    # A placement's figures at its budget: the median over its rounds,
    # measured and predicted alike (each median on its own: a point's error
    # compares the typical time with the typical prediction).
    def rounds(r):
        return [x for x in [r] + repeats.get(r["name"], []) if x["run"]]

    def med(r):
        done = rounds(r)
        return statistics.median(x["run"]["step_s"] for x in done) if done else None

    def med_pred(r):
        preds = [x["pred"] for x in rounds(r) if x["pred"] is not None]
        return statistics.median(preds) if preds else None

    def place(r):
        more = f", {r['gbufs']} grad bufs" if r["gbufs"] != 3 else ""
        return f"{r['offload']} ({r['sched'][0]}, a {float(r['alpha']):.2f}{more})"

    def s(x):
        return f"{x:.3f}" if x is not None else "-"

    def err(r):
        if r["run"] is None or r["pred"] is None:
            return None
        return 100 * (r["pred"] - r["run"]["step_s"]) / r["run"]["step_s"]

    def measured(r):
        n = len(rounds(r)) if r else 0
        return "failed" if n == 0 else s(med(r)) + (f" (median of {n})" if n > 1 else "")

    def med_err(r, first=False):
        # first: each round's first attempt, set aside or not (what the check would count without re-runs)
        both = [x for x in rounds(r) if x["pred"] is not None]
        if first:
            both = [(x["aside"] or [x])[0] for x in both]
            both = [x for x in both if x["run"] and x["pred"] is not None]
        if not both:
            return None
        m = statistics.median(x["run"]["step_s"] for x in both)
        return 100 * (statistics.median(x["pred"] for x in both) - m) / m

    def pct(x):
        return f"{x:+.1f}" if x is not None else "-"

    L = []
    L.append(f"{model}, mixed precision, batch 1 x {seq} tokens, clipping off; step time = mean of steps 2..{steps}; "
             f"disk (strata probe): at the start {disk(out + '/hw.json')}, at the end {disk(out + '/hw-end.json')}")
    L.append("")
    L.append(f"whole state in memory (strata simulate --offload none, host): {whole_bytes} bytes "
             f"({whole_bytes / MIB:.1f} MiB); smallest budget that plans (strata plan's smallest host share, "
             f"rounded up to a MiB): {meta['small_mib']} MiB. Predictions: strata simulate --json iter_s, same flags, "
             f"with this machine probed at the start at the sweep's shape (OUT/hw.json) and its disk re-measured right before "
             f"each run (OUT/run-NAME.hw.json). Every executor run had --mem-host = its budget. "
             f"Placement = what is on the SSD (schedule v/h, alpha, block gradient buffers when not 3); err % = "
             f"(predicted - measured) / measured. Every placement is measured in rounds, alternated at its budget "
             f"(NAME-r2, ...): a row gives each placement's median measured and predicted "
             f"time (median of N), and the prediction check counts each placement at each budget once, by those "
             f"medians (every round on its own is counted too)."
             # sweeps before the re-runs recorded no tolerance
             + (f" A run whose prediction on the disk re-measured before it and on the disk its steps saw differ by "
                f"more than {100 * float(meta['held']):.0f}% ran on another drive than the one described: it was set "
                f"aside (NAME.tN) and measured again, at most {meta.get('retries', 1)} time(s) (the last attempt "
                f"counts)." if "held" in meta else "")
             + " The speed-up target compares rounds at one drive speed (pairs of rounds whose drives read within 10% "
               "of each other); the table's speed-up is the ratio of all rounds' medians.")
    L.append("")
    L.append("| budget GiB | % of state | best binary placement | measured s | predicted s | err % | other binary: placement, "
             "measured s, predicted s (err %) | fractional placement (plan's best) | measured s | predicted s | err % | speed-up frac/bin | "
             "in-memory s |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    curve = []           # (budget, fractional measured s)
    half_speedup = None
    for mib in sorted(points):
        p = points[mib]
        done = [r for r in p["binary"] if med(r) is not None]
        bb = min(done, key=med) if done else (p["binary"][0] if p["binary"] else None)
        others = [r for r in p["binary"] if r is not bb]
        fr = p["fractional"]
        other = "; ".join(f"{place(o)}, {measured(o)}, predicted {s(med_pred(o))} ({pct(med_err(o))}%)" for o in others) or "(plan --whole ranks one)"
        speed = None
        if bb and med(bb) is not None and fr and med(fr) is not None:
            speed = med(bb) / med(fr)
            curve.append((mib, med(fr)))
        if p["half"]:
            half_speedup = speed
        fr_place = "-"
        if fr:
            fr_place = place(fr) + (" = the best binary" if fr["role"] == "fractional-whole" and bb and fr["name"] == bb["name"]
                                    else " (whole)" if fr["role"] == "fractional-whole" else "")
        label = f"{mib / 1024:.3f}" + (" (half)" if p["half"] else "")
        L.append(f"| {label} | {100 * mib * MIB / whole_bytes:.0f}% | {place(bb) if bb else '-'} | "
                 f"{measured(bb)} | {s(med_pred(bb)) if bb else '-'} | "
                 f"{pct(med_err(bb)) if bb else '-'} | {other} | {fr_place} | "
                 f"{measured(fr)} | {s(med_pred(fr)) if fr else '-'} | "
                 f"{pct(med_err(fr)) if fr else '-'} | {f'{speed:.2f}x' if speed else '-'} | "
                 f"{s(mem['step_s']) if mem else 'failed'} |")
    L.append("")

    # Target checks
    L.append("Targets:")
    half = [m for m in points if points[m]["half"]]
    # The speed-up at one drive speed: this machine's drive runs at two
    # speeds that change within minutes, so the medians of two placements
    # may have met different ones. Every pair of rounds (a binary
    # placement's, the fractional placement's) whose drives read within 10%
    # of each other while busy counts; against each binary placement the
    # median of those pairs' ratios, and the check takes the smaller.
    matched = []         # (binary row, median ratio, pairs)
    if half and points[half[0]]["fractional"]:
        fr = points[half[0]]["fractional"]
        for b in points[half[0]]["binary"]:
            if b["name"] == fr["name"]:
                continue
            pairs = [x["run"]["step_s"] / y["run"]["step_s"] for x in rounds(b) for y in rounds(fr)
                     if x["run"]["read_gbps"] and y["run"]["read_gbps"]
                     and abs(x["run"]["read_gbps"] / y["run"]["read_gbps"] - 1) <= 0.10]
            if pairs:
                matched.append((b, statistics.median(pairs), len(pairs)))
    if matched:
        b, ratio, n = min(matched, key=lambda m: m[1])
        L.append(f"- half the state ({half[0]} MiB), at one drive speed: fractional {ratio:.2f}x the speed of "
                 f"{place(b)} (median over {n} pairs of rounds whose drives read within 10% of each other; "
                 + "; ".join(f"{m[1]:.2f}x over {place(m[0])}, {m[2]} pairs" for m in matched) +
                 f"; the smaller counts; target >= 1.4x): {'PASS' if ratio >= 1.4 else 'FAIL'}"
                 + (f"; the medians of all rounds: {half_speedup:.2f}x the best binary placement"
                    if half_speedup is not None else ""))
    elif half_speedup is None:
        L.append(f"- half the state ({half[0] if half else '-'} MiB): no speed-up measured -> not checked")
    else:
        L.append(f"- half the state ({half[0]} MiB): no pair of rounds at one drive speed; the medians of all rounds: "
                 f"fractional {half_speedup:.2f}x the best binary placement's speed "
                 f"(target >= 1.4x): {'PASS' if half_speedup >= 1.4 else 'FAIL'}")
    steps_txt, monotone = [], True
    desc = sorted(curve, reverse=True)
    for (b1, t1), (b0, t0) in zip(desc, desc[1:]):
        growth = 100 * (t0 / t1 - 1)
        steps_txt.append(f"{b1}->{b0} MiB {growth:+.0f}%")
        if t0 < t1 * 0.95:
            monotone = False
    if len(desc) >= 2:
        L.append(f"- fractional time as the budget shrinks (each step down): {', '.join(steps_txt)}; "
                 f"monotone within 5% noise: {'PASS' if monotone else 'FAIL'}; largest step "
                 f"{max(t0 / t1 for (_, t1), (_, t0) in zip(desc, desc[1:])):.2f}x")
    else:
        L.append("- fractional curve: fewer than two measured points -> not checked")
    runs, seen, placements, bases = [], set(), [], set()
    for mib in points:
        for base in points[mib]["binary"] + ([points[mib]["fractional"]] if points[mib]["fractional"] else []):
            if base["name"] in bases:
                continue   # the fractional placement may be a binary one
            bases.add(base["name"])
            placements.append(base)
            for r in [base] + repeats.get(base["name"], []):
                if r["name"] not in seen and r["run"] and r["pred"] is not None:
                    seen.add(r["name"])
                    runs.append(r)
    # A point is a placement at a budget: its median over the rounds, measured
    # and predicted alike, so that one round whose drive changed speed between
    # its re-probe and its steps decides no point alone. Every round on its own
    # is counted too, below it.
    close = [r for r in placements if med_err(r) is not None and abs(med_err(r)) <= 10]
    unmeasured = [r for r in placements if med_err(r) is None]
    if placements:
        share = len(close) / len(placements)
        L.append(f"- predictions within 10% of measured: {len(close)} of {len(placements)} points (each placement at "
                 f"each budget, medians of its rounds; {100 * share:.0f}%, target >= 80%): "
                 f"{'PASS' if share >= 0.8 else 'FAIL'}"
                 + (f"; {len(unmeasured)} of them with no round both run and predicted, counted as misses: "
                    f"{', '.join(r['name'] for r in unmeasured)}" if unmeasured else ""))
    tried = [r for r in runs if r["aside"]]
    if tried:
        first = [r for r in placements if med_err(r, True) is not None and abs(med_err(r, True)) <= 10]
        L.append(f"- {len(tried)} of {len(runs)} rounds measured again because the drive changed speed under them "
                 f"(the prediction on the disk re-measured before the run and on the rates its steps saw differ by "
                 f"more than {100 * float(meta.get('held', 0.05)):.0f}%; the attempts set aside are listed below): "
                 f"counting each round's first attempt instead, {len(first)} of {len(placements)} points within 10% "
                 f"({100 * len(first) / len(placements):.0f}%)")
    within = [r for r in runs if abs(err(r)) <= 10]
    if runs:
        L.append(f"- each round on its own, on the disk re-measured right before it: {len(within)} of {len(runs)} "
                 f"executor runs within 10% ({100 * len(within) / len(runs):.0f}%)")
    # The same checks on the sweep's own description alone (OUT/hw.json, what strata plan ranked with: the
    # disk as the start probe measured it, not re-measured before each run), and which of the two disk
    # measurements was nearer the rates each run's drive showed while busy: whether re-measuring the disk
    # a minute before a run predicts the run better than the start did.
    planned_pts = [r for r in placements if rounds(r) and r["pred_plan"] is not None]
    if planned_pts:
        ok = [r for r in planned_pts if abs(r["pred_plan"] / med(r) - 1) <= 0.10]
        each = [(r["pred_plan"], x["run"]["step_s"]) for r in planned_pts for x in rounds(r)]
        ok_rounds = sum(abs(p / m - 1) <= 0.10 for p, m in each)
        L.append(f"- on the sweep's description alone (the disk as measured at the start; strata plan's own "
                 f"prediction): {len(ok)} of {len(planned_pts)} points within 10% "
                 f"({100 * len(ok) / len(planned_pts):.0f}%), {ok_rounds} of {len(each)} rounds")
    start = first_drive(f"{out}/hw.json")
    sweep_read = start["read_gbps"] if start else None
    drives = []   # (the run's drive while busy, the re-measurement before it) for runs that read
    for r in runs:
        before = first_drive(f"{out}/run-{r['name']}.hw.json")
        if before and r["run"]["read_gbps"]:
            drives.append((r["run"]["read_gbps"], before["read_gbps"]))
    if drives and sweep_read:
        near_before = sum(abs(b / seen - 1) <= 0.10 for seen, b in drives)
        near_start = sum(abs(sweep_read / seen - 1) <= 0.10 for seen, _ in drives)
        L.append(f"- the drive's read rate while each run streamed, against the disk measured right before the run: "
                 f"{near_before} of {len(drives)} runs within 10% (ratio median "
                 f"{statistics.median(seen / b for seen, b in drives):.2f}); against the start's "
                 f"({sweep_read:.3f} GB/s): {near_start} of {len(drives)} (ratio median "
                 f"{statistics.median(seen / sweep_read for seen, _ in drives):.2f})")
    # How far the machine itself moves a configuration between rounds: a model
    # that predicted each placement's median exactly would still miss the rounds
    # that land more than 10% from it. The ceiling for the line above.
    repeated = [rounds(r) for r in placements if len(rounds(r)) > 1]
    if repeated:
        times = [[x["run"]["step_s"] for x in done] for done in repeated]
        own = sum(abs(t / m - 1) <= 0.10 for ts in times for m in [statistics.median(ts)] for t in ts)
        spreads = [max(ts) / min(ts) for ts in times]
        L.append(f"- the machine's own spread: {own} of {sum(len(ts) for ts in times)} rounds within 10% of "
                 f"their own placement's median (what a model exact at every median would reach); the slowest "
                 f"round over the fastest of one placement: median {statistics.median(spreads):.2f}x, largest "
                 f"{max(spreads):.2f}x over {len(repeated)} placements")
    with_run = [r for r in runs if r["pred_run"] is not None]
    if with_run:
        ok = [r for r in with_run if abs(r["pred_run"] / r["run"]["step_s"] - 1) <= 0.10]
        L.append(f"- the model alone (the disk's rates those the run's steps saw while busy, the rest as probed): "
                 f"{len(ok)} of {len(with_run)} within 10% ({100 * len(ok) / len(with_run):.0f}%)")
    # the start probes (bench/placement_sweep.sh's START_PROBES), and on the runs that move nothing (compute
    # alone) the description the sweep took against the end's: how far the start was from the machine the runs met
    starts = []
    while os.path.exists(f"{out}/hw-start{len(starts) + 1}.none.json"):
        with open(f"{out}/hw-start{len(starts) + 1}.none.json") as f:
            starts.append(json.load(f)["iter_s"])
    none = [r for r in runs if r["offload"] == "none" and r["run"] and r["pred"] is not None]
    if starts or none:
        text = ""
        if starts:
            text = (f"the whole state in memory simulated at {', '.join(f'{t:.3f}' for t in starts)} s on the "
                    f"{len(starts)} start probe(s), the sweep's description the faster")
        if none:
            m = statistics.median(r["run"]["step_s"] for r in none)
            ends = [r["pred_end"] for r in none if r["pred_end"] is not None]
            text += ("; " if text else "") + (
                f"the runs with nothing on the SSD measured {m:.3f} s (median of {len(none)}), predicted "
                f"{none[0]['pred']:.3f} on the sweep's description ({pct(100 * (none[0]['pred'] / m - 1))}%)")
            if ends:
                text += f" and {ends[0]:.3f} on the end probe's ({pct(100 * (ends[0] / m - 1))}%)"
        L.append(f"- the start probes: {text}")
    # the same description (OUT/hw.json) both ways: a check of the planner, not of the model
    # (the predictions above use the disk re-measured before each run, so they differ from the plan's)
    planned = [r for r in runs if r["plan_s"] and r["pred_plan"] is not None]
    plan_off = [r for r in planned if abs(r["pred_plan"] / r["plan_s"] - 1) > 0.01]
    if plan_off:
        L.append(f"- note: strata simulate and strata plan disagree by more than 1% on the same description "
                 f"(OUT/hw.json) for {', '.join(r['name'] for r in plan_off)}")
    elif planned:
        L.append(f"- strata plan's times and strata simulate's on the same description (OUT/hw.json) agree within 1% "
                 f"for the {len(planned)} runs the plan ranked")
    L.append("")

    # Every run
    L.append("| run | measured s (steps 2..) | predicted s (disk before the run / machine at the end / disk the run saw) | "
             "err % (before / after / run's disk) | SSD per step r / w MiB | the run's disk while busy | "
             "compute: computing / waiting on SSD / on optimizer s | peak RSS |")
    L.append("|---|---|---|---|---|---|---|---|")
    failed = [r for mib in sorted(points) for base in points[mib]["binary"] + [points[mib]["fractional"]] if base
              for r in [base] + repeats.get(base["name"], []) if r["run"] is None and r["name"] not in seen]
    for r in runs + failed + [a for r in runs for a in r["aside"] if a["run"]]:
        m = r["run"]
        if m is None:
            L.append(f"| {r['name']} | failed | {s(r['pred'])} / {s(r['pred_end'])} / - | - | - | - | - | - |")
            continue
        e_end = 100 * (r["pred_end"] - m["step_s"]) / m["step_s"] if r["pred_end"] else None
        e_run = 100 * (r["pred_run"] - m["step_s"]) / m["step_s"] if r["pred_run"] else None
        per_step = ", ".join(f"{t:.2f}" for t in m["steps"])
        traffic = f"{m['read'] / MIB:.0f} / {m['written'] / MIB:.0f}"
        label = r["name"] + (" (set aside)" if r.get("set_aside") else "")
        L.append(f"| {label} | {s(m['step_s'])} ({per_step}) | {s(r['pred'])} / {s(r['pred_end'])} / "
                 f"{s(r['pred_run'])} | {pct(err(r))} / {pct(e_end)} / {pct(e_run)} | {traffic} | {m['busy']} | "
                 f"{m['wait']} | {m['rss']} |")
    if mem:
        L.append(f"| memory (in-memory trainer) | {s(mem['step_s'])} ({', '.join(f'{t:.2f}' for t in mem['steps'])}) | - | - | "
                 f"0 / 0 | - | - | {mem['rss']} |")
    print("\n".join(L))


def probes(*reports):
    """The start probe's compute against the end probe's, by the runs that move nothing (report rows
    "| bMIB-SCHED-a0.00-none | MEASURED (steps) | START / END / RUN | ..."): on those the disk plays no part,
    so START / END is the two descriptions' compute alone."""
    row = re.compile(r"^\| b\d+-\w+-a0\.00-none(?:-r\d+)? \| ([\d.]+) .*?\| ([\d.]+) / ([\d.]+) / ", re.M)
    ratios = []
    print("| report | runs | measured s (median) | start s | end s | start / end | start err % | end err % |")
    print("|---|---|---|---|---|---|---|---|")
    for path in reports:
        with open(path) as f:
            found = row.findall(f.read())
        if not found:
            continue
        measured = statistics.median(float(m) for m, _, _ in found)
        start, end = float(found[0][1]), float(found[0][2])   # one description each: the same for every such run
        ratios.append(start / end)
        print(f"| {os.path.basename(path)} | {len(found)} | {measured:.3f} | {start:.3f} | {end:.3f} | {start / end:.2f} | "
              f"{100 * (start / measured - 1):+.1f} | {100 * (end / measured - 1):+.1f} |")
    if ratios:
        slow = sum(r > 1.05 for r in ratios)
        fast = sum(r < 1 / 1.05 for r in ratios)
        print(f"\n{len(ratios)} reports: the start probe's compute more than 5% slower than the end probe's in {slow}, "
              f"more than 5% faster in {fast}; start / end median {statistics.median(ratios):.2f}, "
              f"{min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"smallest": smallest, "budgets": budgets, "placements": placements, "best": best, "faster": faster, "json": get, "steptime": steptime,
     "trialcheck": trialcheck, "runhw": runhw, "held": held, "report": report, "repredict": repredict,
     "probes": probes}[cmd](*args)
