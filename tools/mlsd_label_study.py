#!/usr/bin/python3
"""How M-LSD's score threshold and line cap (MlsdLabelOptions, core/data/mlsd_lines.h) trade
label precision for recall on labelled photographs: for each setting, the share of M-LSD's kept
lines that are true positives at sAP10 (L-CNN's matching: 128 x 128 frame, summed squared
endpoint distance < 10, each ground-truth line matched once, best score first) and the share of
ground-truth lines they find. Used to choose the labels of `mlsd:LIST` (docs/decisions.md, "LETR
on photos: data and evaluation (issue 51)").

usage: tools/mlsd_label_study.py [--data .eval_data/wireframe_tiny/test.json] [--glimpse build/app/glimpse]
Runs `glimpse infer --model mlsd` on the set's images (its own defaults: score > 0.1, top 200).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def dist(p, g):
    a = (p[0] - g[0]) ** 2 + (p[1] - g[1]) ** 2 + (p[2] - g[2]) ** 2 + (p[3] - g[3]) ** 2
    b = (p[0] - g[2]) ** 2 + (p[1] - g[3]) ** 2 + (p[2] - g[0]) ** 2 + (p[3] - g[1]) ** 2
    return min(a, b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(ROOT, ".eval_data", "wireframe_tiny", "test.json"))
    ap.add_argument("--glimpse", default=os.path.join(ROOT, "build", "app", "glimpse"))
    ap.add_argument("--threshold", type=float, default=10.0)
    a = ap.parse_args()
    recs = json.load(open(a.data))
    d = os.path.dirname(os.path.abspath(a.data))
    with tempfile.TemporaryDirectory() as tmp:
        lst = os.path.join(tmp, "list.txt")
        with open(lst, "w") as f:
            for r in recs:
                p = os.path.join(d, "images", r["filename"])
                f.write((p if os.path.exists(p) else os.path.join(d, r["filename"])) + "\n")
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        subprocess.run([a.glimpse, "infer", "--model", "mlsd", "--image", lst, "--out", out], check=True,
                       stdout=subprocess.DEVNULL)
        preds = {}
        for r in recs:
            stem = os.path.splitext(r["filename"])[0]
            cands = [f for f in os.listdir(out) if f.startswith(stem) and f.endswith(".json")]
            if not cands:
                sys.exit("mlsd_label_study: no output for %s" % r["filename"])
            j = json.load(open(os.path.join(out, cands[0])))
            preds[r["filename"]] = sorted(([l["x1"], l["y1"], l["x2"], l["y2"], l["score"]] for l in j["lines"]),
                                          key=lambda l: -l[4])
    print("%-9s %-5s %10s %10s %10s %8s" % ("score>=", "top", "lines/img", "precision", "recall", "F"))
    for thr in (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5):
        for top in (40, 60, 100, 200):
            tp = n = ngt = 0
            for r in recs:
                w, h = r["width"], r["height"]
                sx, sy = 128.0 / w, 128.0 / h
                gt = [[l[0] * sx, l[1] * sy, l[2] * sx, l[3] * sy] for l in r["lines"]]
                ngt += len(gt)
                used = [False] * len(gt)
                kept = [l for l in preds[r["filename"]] if l[4] >= thr][:top]
                for l in kept:
                    p = [l[0] * sx, l[1] * sy, l[2] * sx, l[3] * sy]
                    best, bi = None, -1
                    for i, g in enumerate(gt):
                        dd = dist(p, g)
                        if best is None or dd < best:
                            best, bi = dd, i
                    n += 1
                    if bi >= 0 and best < a.threshold and not used[bi]:
                        used[bi] = True
                        tp += 1
            prec = tp / n if n else 0.0
            rec = tp / ngt if ngt else 0.0
            f = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
            print("%-9.2f %-5d %10.1f %9.1f%% %9.1f%% %7.1f%%" % (thr, top, n / len(recs), 100 * prec, 100 * rec, 100 * f))


if __name__ == "__main__":
    main()
