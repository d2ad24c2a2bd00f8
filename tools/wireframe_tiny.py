#!/usr/bin/python3
"""Labelled real photographs for `glimpse eval letr`: the 20 Wireframe test images with their
line labels in iitpvisionlab/LSDNet (wireframe_tiny/images/N.jpg, wireframe_tiny/markup/N.jpg.json),
converted to the Wireframe processed JSON form that `--data PATH.json` reads
(core/data/wireframe.h): OUT/test.json plus OUT/images/N.jpg (the JPEG bytes unchanged).

The repository's code is BSD-3-Clause; the images are Wireframe's (Huang et al., CVPR 2018),
whose license is not stated. They are used for evaluation only: never trained on, shipped or
committed (OUT, default .eval_data/wireframe_tiny, is ignored by git). See docs/decisions.md,
"LETR on photos: data and evaluation (issue 51)".

Markup: {"size": [W, H], "objects": [{"type": "seg", "data": [[x1, y1], [x2, y2]]}, ...]} in
image pixels. Segments are clipped to [0, W] x [0, H] (a few end 0.8 px past the border) and
ones shorter than 1 px after that are dropped; the counts are printed.

Usage:
  tools/wireframe_tiny.py [--mirror DIR] [--src DIR] [--out .eval_data/wireframe_tiny]
    --mirror  a bare git mirror of iitpvisionlab/LSDNet (default
              /work/.mirror/iitpvisionlab+LSDNet/repo, what the `fetch` tool leaves)
    --src     or a checkout's wireframe_tiny folder (git clone https://github.com/iitpvisionlab/LSDNet)
Then:  glimpse eval letr --data .eval_data/wireframe_tiny/test.json [--checkpoint M.h5]
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = "iitpvisionlab/LSDNet"
COMMIT = "aea2bf7c5853aa1c3cfe04d42e032034188a600f"   # the snapshot checked (2026-11-28)


def fail(msg):
    print("wireframe_tiny: error: " + msg, file=sys.stderr)
    sys.exit(1)


class Source:
    def __init__(self, mirror, src):
        self.mirror, self.src = mirror, src

    def names(self):
        if self.src:
            d = os.path.join(self.src, "markup")
            return sorted(f for f in os.listdir(d) if f.endswith(".jpg.json"))
        r = subprocess.run(["git", "--git-dir", self.mirror, "ls-tree", "--name-only", COMMIT, "wireframe_tiny/markup/"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("cannot list %s in %s at %s: %s" % ("wireframe_tiny/markup", self.mirror, COMMIT, r.stderr.strip()))
        return sorted(os.path.basename(p) for p in r.stdout.split())

    def read(self, rel):
        if self.src:
            with open(os.path.join(self.src, rel), "rb") as f:
                return f.read()
        r = subprocess.run(["git", "--git-dir", self.mirror, "cat-file", "blob", "%s:wireframe_tiny/%s" % (COMMIT, rel)],
                           capture_output=True)
        if r.returncode != 0:
            fail("cannot read wireframe_tiny/%s from %s: %s" % (rel, self.mirror, r.stderr.decode().strip()))
        return r.stdout


def clip(x1, y1, x2, y2, w, h):
    # Liang-Barsky against [0, w] x [0, h]; None when nothing is inside.
    t0, t1 = 0.0, 1.0
    dx, dy = x2 - x1, y2 - y1
    for p, q in ((-dx, x1), (dx, w - x1), (-dy, y1), (dy, h - y1)):
        if p == 0:
            if q < 0:
                return None
        else:
            t = q / p
            if p < 0:
                t0 = max(t0, t)
            else:
                t1 = min(t1, t)
    if t0 > t1:
        return None
    return [x1 + t0 * dx, y1 + t0 * dy, x1 + t1 * dx, y1 + t1 * dy]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mirror", default="/work/.mirror/iitpvisionlab+LSDNet/repo")
    p.add_argument("--src", default=None)
    p.add_argument("--out", default=os.path.join(ROOT, ".eval_data", "wireframe_tiny"))
    a = p.parse_args()
    if not a.src and not os.path.isdir(a.mirror):
        fail("no mirror at %s and no --src: get the repository first (git clone https://github.com/%s, then "
             "--src LSDNet/wireframe_tiny)" % (a.mirror, REPO))
    src = Source(a.mirror, a.src)
    from PIL import Image
    import io
    os.makedirs(os.path.join(a.out, "images"), exist_ok=True)
    records, clipped, dropped, total = [], 0, 0, 0
    for mk in src.names():
        name = mk[: -len(".json")]
        try:
            markup = json.loads(src.read("markup/" + mk))
        except ValueError as e:
            fail("markup/%s: not JSON (%s)" % (mk, e))
        data = src.read("images/" + name)
        img = Image.open(io.BytesIO(data))
        w, h = img.size
        if list(markup.get("size", [])) != [w, h]:
            fail("markup/%s: size %s, the image is %dx%d" % (mk, markup.get("size"), w, h))
        lines = []
        for o in markup.get("objects", []):
            if o.get("type") != "seg":
                fail("markup/%s: an object of type %r (only 'seg' is known)" % (mk, o.get("type")))
            (x1, y1), (x2, y2) = o["data"]
            total += 1
            c = clip(float(x1), float(y1), float(x2), float(y2), w, h)
            if c is None or ((c[2] - c[0]) ** 2 + (c[3] - c[1]) ** 2) ** 0.5 < 1.0:
                dropped += 1
                continue
            if c != [x1, y1, x2, y2]:
                clipped += 1
            lines.append([round(v, 4) for v in c])
        target = os.path.join(a.out, "images", name)
        with open(target + ".tmp", "wb") as f:
            f.write(data)
        os.replace(target + ".tmp", target)
        records.append({"filename": name, "width": w, "height": h, "lines": lines,
                        "sha256": hashlib.sha256(data).hexdigest()})
    if not records:
        fail("no markup found")
    out = os.path.join(a.out, "test.json")
    with open(out + ".tmp", "w") as f:
        json.dump(records, f)
    os.replace(out + ".tmp", out)
    print("wireframe_tiny: %d images, %d segments (%d clipped to the image, %d dropped) -> %s"
          % (len(records), total - dropped, clipped, dropped, out))


if __name__ == "__main__":
    main()
