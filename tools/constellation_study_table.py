#!/usr/bin/env python3
"""Markdown table of tools/constellation_study.sh's runs.

usage: constellation_study_table.py OUT DATA STEPS BATCH

Reads OUT/<backbone>/s<seed>/<model>/eval.json (glimpse eval fewshot --json) and log.txt (the
/usr/bin/time lines and the parameter count) and prints, per backbone: one row per seed (5-way
1-shot and 5-shot accuracy in % with the 95% CI over 600 episodes, for the baseline and
ConstellationNet, their difference and whether the two intervals are disjoint), then the mean
over seeds with the 95% CI over seeds (Student t, n - 1 degrees of freedom) of each model and of
the per-seed difference. A run without eval.json is listed as missing.
"""
import json
import math
import os
import re
import sys

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def seed_ci(values):
    n = len(values)
    if n < 2:
        return float("nan")
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    return T975.get(n - 1, 1.96) * sd / math.sqrt(n)


def read_run(d):
    try:
        with open(os.path.join(d, "eval.json")) as f:
            ev = json.load(f)
    except (OSError, ValueError):
        return None
    run = {"acc": {}, "ci": {}, "train_cpu": None, "eval_cpu": None, "params": None}
    for row in ev.get("results", []):
        run["acc"][row["shots"]] = 100 * row["accuracy"]
        run["ci"][row["shots"]] = 100 * row["ci95"]
    try:
        log = open(os.path.join(d, "log.txt"), errors="replace").read()
    except OSError:
        log = ""
    for kind in ("train", "eval"):
        cpu = [float(a) + float(b) for a, b in re.findall(kind + r" cpu ([0-9.]+)\+([0-9.]+) s", log)]
        if cpu:
            run[kind + "_cpu"] = sum(cpu)
    m = re.search(r"\((\d+) parameters\)", log)
    if m:
        run["params"] = int(m.group(1))
    return run


def fmt(v, ci):
    return "%.2f ± %.2f" % (v, ci)


def ablation_table(bdir, seeds, costs):
    """The multi-branch model without constellation modules (baseline-mb), when it was run."""
    rows, diffs = [], {1: ([], []), 5: ([], [])}
    for s in seeds:
        a = read_run(os.path.join(bdir, s, "baseline-mb"))
        if not a:
            continue
        costs["baseline-mb"].append(a)
        b = read_run(os.path.join(bdir, s, "baseline"))
        c = read_run(os.path.join(bdir, s, "constellation"))
        for k in (1, 5):
            if k not in a["acc"]:
                continue
            vs = lambda r: "%+.2f%s" % (a["acc"][k] - r["acc"][k], " (disjoint)" if abs(a["acc"][k] - r["acc"][k]) >
                                         a["ci"][k] + r["ci"][k] else "") if r and k in r["acc"] else "missing"
            rows.append("| %s | %d | %s | %s | %s |" % (s[1:], k, fmt(a["acc"][k], a["ci"][k]), vs(b), vs(c)))
            if b and c and k in b["acc"] and k in c["acc"]:
                diffs[k][0].append(a["acc"][k] - b["acc"][k])
                diffs[k][1].append(a["acc"][k] - c["acc"][k])
    for k in (1, 5):
        db, dc = diffs[k]
        if len(db) >= 2:
            mean = lambda v: sum(v) / len(v)
            rows.append("| mean of %d | %d | | %+.2f ± %.2f | %+.2f ± %.2f |" % (len(db), k, mean(db), seed_ci(db), mean(dc),
                                                                            seed_ci(dc)))
    if rows:
        print("Ablation: the multi-branch model without constellation modules (`--baseline --multi-branch`).\n")
        print("| seed | shots | multi-branch baseline | minus baseline | minus ConstellationNet |")
        print("|---|---|---|---|---|")
        print("\n".join(rows))
        print()


def main():
    out, data, steps, batch = sys.argv[1:5]
    print("5-way accuracy (%%) on the novel classes of `%s`, 600 episodes per cell (15 queries per class), "
          "95%% CI; %s steps of batch %s per run, 1 thread.\n" % (data, steps, batch))
    for backbone in sorted(os.listdir(out)):
        bdir = os.path.join(out, backbone)
        if not os.path.isdir(bdir):
            continue
        seeds = sorted((s for s in os.listdir(bdir) if re.fullmatch(r"s\d+", s)), key=lambda s: int(s[1:]))
        print("**%s**\n" % backbone)
        print("| seed | shots | ProtoNet baseline | ConstellationNet | difference | intervals disjoint |")
        print("|---|---|---|---|---|---|")
        per = {1: ([], [], []), 5: ([], [], [])}
        costs = {"baseline": [], "constellation": [], "baseline-mb": []}
        for s in seeds:
            b = read_run(os.path.join(bdir, s, "baseline"))
            c = read_run(os.path.join(bdir, s, "constellation"))
            for name, r in (("baseline", b), ("constellation", c)):
                if r:
                    costs[name].append(r)
            for k in (1, 5):
                if not b or not c or k not in b["acc"] or k not in c["acc"]:
                    print("| %s | %d | %s | %s | | |" % (s[1:], k, fmt(b["acc"][k], b["ci"][k]) if b and k in b["acc"] else "missing",
                                                        fmt(c["acc"][k], c["ci"][k]) if c and k in c["acc"] else "missing"))
                    continue
                d = c["acc"][k] - b["acc"][k]
                disjoint = abs(d) > b["ci"][k] + c["ci"][k]
                print("| %s | %d | %s | %s | %+.2f | %s |" % (s[1:], k, fmt(b["acc"][k], b["ci"][k]),
                                                             fmt(c["acc"][k], c["ci"][k]), d,
                                                             ("yes, " + ("ConstellationNet" if d > 0 else "baseline") + " ahead")
                                                             if disjoint else "no"))
                per[k][0].append(b["acc"][k])
                per[k][1].append(c["acc"][k])
                per[k][2].append(d)
        for k in (1, 5):
            bs, cs, ds = per[k]
            if not ds:
                continue
            n = len(ds)
            mb, mc, md = sum(bs) / n, sum(cs) / n, sum(ds) / n
            cid = seed_ci(ds)
            verdict = "n/a (1 seed)" if n < 2 else ("yes, " + ("ConstellationNet" if md > 0 else "baseline") + " ahead"
                                                   if abs(md) > cid else "no")
            print("| mean of %d | %d | %s | %s | %+.2f ± %.2f | %s |" % (n, k, fmt(mb, seed_ci(bs)), fmt(mc, seed_ci(cs)), md,
                                                                     cid, verdict))
        print()
        ablation_table(bdir, seeds, costs)
        for name, runs in costs.items():
            if not runs:
                continue
            params = next((r["params"] for r in runs if r["params"]), None)
            tr = [r["train_cpu"] for r in runs if r["train_cpu"] is not None]
            ev = [r["eval_cpu"] for r in runs if r["eval_cpu"] is not None]
            print("- %s %s: %s parameters; CPU time per run: training %s s, evaluation (1200 episodes) %s s" % (
                backbone, name, "{:,}".format(params) if params else "?",
                "%.0f" % (sum(tr) / len(tr)) if tr else "?", "%.0f" % (sum(ev) / len(ev)) if ev else "?"))
        print()
    print("Mean rows: the mean over seeds ± the 95% CI over seeds (Student t); 'difference' there is the mean of the "
          "per-seed differences (same episodes for both models of a seed) ± its 95% CI over seeds.")


if __name__ == "__main__":
    main()
