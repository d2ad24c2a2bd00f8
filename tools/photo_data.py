#!/usr/bin/python3
"""Rebuilds .photo_data/, LETR's training photos (docs/decisions.md, "LETR on photos: data and
evaluation (issue 51)"), from the sources listed in resources/letr_photo_sources.tsv.

Every row of that file is one training image: its output name, where it comes from, the sha256
of the source file and its license. Sources:
  file     a still image installed by a Debian package (opencv-doc, python3-skimage)
  video    frame N of a video installed by a Debian package (PATH#N, decoded with python3-opencv)
  github   a file of a public GitHub repository at a fixed commit (OWNER/REPO:PATH@COMMIT), read
           from a local bare mirror (--mirrors DIR, DIR/OWNER+REPO/repo as the `fetch` tool
           leaves it) or downloaded from raw.githubusercontent.com
The source bytes must have the listed sha256 (else the row is reported and the build stops:
another package version or commit gives other images). Each image is decoded, converted to
RGB (EXIF orientation applied), downscaled to at most 640 px on its long side (Lanczos) and written as JPEG quality 90 to
OUT/images/NAME.jpg; OUT/photos.txt lists them with paths relative to OUT (the form of
`--data mlsd:OUT/photos.txt`). The total must stay within --max-mb (default 15).

Then, unless --no-labels, `glimpse data export --data mlsd:OUT/photos.txt` computes M-LSD's
labels once and caches them in OUT/photos.txt.mlsd.h5 (core/data/mlsd_lines.h).

Usage:
  tools/photo_data.py build [--out .photo_data] [--mirrors /work/.mirror] [--glimpse build/app/glimpse]
                            [--max-mb 15] [--no-labels]
  tools/photo_data.py hash FILE...        sha256 of files (for new manifest rows)
  tools/photo_data.py frames VIDEO        the frame count of a video
Needs: python3-numpy, python3-pil, python3-opencv (video rows), the Debian packages opencv-doc
and python3-skimage (file rows), and git (github rows with --mirrors).
"""
import argparse
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(ROOT, "resources", "letr_photo_sources.tsv")
MAX_SIDE = 640
QUALITY = 90
# Photos that must never be trained on: the four that `glimpse eval edges` reports, box.png (the
# object of box_in_scene.png) and the labelled evaluation photographs (tools/wireframe_tiny.py).
EVAL_NAMES = {"building.jpg", "home.jpg", "box_in_scene.png", "board.jpg", "box.png"}


def fail(msg):
    print("photo_data: error: " + msg, file=sys.stderr)
    sys.exit(1)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def read_manifest(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) < 5:
                fail("%s:%d: expected NAME KIND ORIGIN SHA256 LICENSE [NOTE] separated by tabs" % (path, n))
            name, kind, origin, digest, lic = cols[:5]
            if kind not in ("file", "video", "github"):
                fail("%s:%d: unknown kind '%s' (file, video or github)" % (path, n, kind))
            if not name.replace("_", "").replace("-", "").isalnum():
                fail("%s:%d: bad output name '%s' (letters, digits, _ and - only)" % (path, n, name))
            rows.append({"line": n, "name": name, "kind": kind, "origin": origin, "sha256": digest, "license": lic})
    names = [r["name"] for r in rows]
    dup = {x for x in names if names.count(x) > 1}
    if dup:
        fail("%s: output names used twice: %s" % (path, ", ".join(sorted(dup))))
    return rows


def github_bytes(origin, mirrors):
    # OWNER/REPO:PATH@COMMIT
    repo, rest = origin.split(":", 1)
    path, commit = rest.rsplit("@", 1)
    if mirrors:
        gitdir = os.path.join(mirrors, repo.replace("/", "+"), "repo")
        if os.path.isdir(gitdir):
            r = subprocess.run(["git", "--git-dir", gitdir, "cat-file", "blob", "%s:%s" % (commit, path)],
                               capture_output=True)
            if r.returncode == 0:
                return r.stdout
            # The mirror may hold a newer snapshot only: the same path at its HEAD is checked
            # against the sha256 below, so a changed file is still refused.
            r = subprocess.run(["git", "--git-dir", gitdir, "cat-file", "blob", "HEAD:%s" % path],
                               capture_output=True)
            if r.returncode == 0:
                return r.stdout
    url = "https://raw.githubusercontent.com/%s/%s/%s" % (repo, commit, path)
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.read()
    except Exception as e:  # noqa: BLE001 - reported with the row
        raise RuntimeError("cannot read %s (no mirror under %s and download failed: %s)" % (origin, mirrors, e))


def video_frame(path, index):
    try:
        import cv2
    except ImportError:
        fail("video rows need python3-opencv (apt-get install python3-opencv)")
    cap = cv2.VideoCapture(path)
    if not cap.isOpened():
        raise RuntimeError("%s: cannot open the video" % path)
    # Sequential decoding up to the frame: seeking is not frame-exact in every container.
    frame = None
    for _ in range(index + 1):
        ok, frame = cap.read()
        if not ok:
            raise RuntimeError("%s: has no frame %d" % (path, index))
    cap.release()
    return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)


def to_rgb_image(data, what):
    from PIL import Image, ImageOps
    import numpy as np
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except Exception as e:  # noqa: BLE001
        raise RuntimeError("%s: not an image PIL can decode (%s)" % (what, e))
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        a = np.asarray(img).astype(np.float64)
        a = (a - a.min()) / max(1.0, a.max() - a.min()) * 255.0
        img = Image.fromarray(a.round().astype(np.uint8))
    if img.mode in ("RGBA", "LA", "P"):
        img = img.convert("RGBA")
        bg = Image.new("RGBA", img.size, (255, 255, 255, 255))
        img = Image.alpha_composite(bg, img)
    # JPEGs are shown as their EXIF orientation says (Glimpse's loader does the same).
    return ImageOps.exif_transpose(img).convert("RGB")


def downscale(img):
    from PIL import Image
    w, h = img.size
    s = MAX_SIDE / float(max(w, h))
    if s >= 1.0:
        return img
    size = (max(1, int(round(w * s))), max(1, int(round(h * s))))
    return img.resize(size, Image.Resampling.LANCZOS)


def build(args):
    from PIL import Image
    rows = read_manifest(args.manifest)
    out = os.path.abspath(args.out)
    images = os.path.join(out, "images")
    os.makedirs(images, exist_ok=True)
    videos = {}
    problems = []
    written = []
    for r in rows:
        where = "%s:%d (%s)" % (os.path.relpath(args.manifest, ROOT), r["line"], r["origin"])
        try:
            if r["kind"] == "github":
                data = github_bytes(r["origin"], args.mirrors)
                base = os.path.basename(r["origin"].split(":", 1)[1].rsplit("@", 1)[0])
            else:
                path = r["origin"].split("#", 1)[0]
                if not os.path.exists(path):
                    raise RuntimeError("%s does not exist (install its Debian package)" % path)
                base = os.path.basename(path)
                if r["kind"] == "video" and path in videos:
                    data = None
                else:
                    with open(path, "rb") as f:
                        data = f.read()
            if base in EVAL_NAMES:
                raise RuntimeError("%s is an evaluation photo and must not be trained on" % base)
            if data is not None and sha256(data) != r["sha256"]:
                raise RuntimeError("sha256 %s, the manifest says %s (another version of the source)"
                                   % (sha256(data), r["sha256"]))
            if r["kind"] == "video":
                if path not in videos:
                    videos[path] = True
                frame = int(r["origin"].split("#", 1)[1])
                img = Image.fromarray(video_frame(path, frame))
            else:
                img = to_rgb_image(data, where)
        except Exception as e:  # noqa: BLE001 - collected and reported together
            problems.append("%s: %s" % (where, e))
            continue
        img = downscale(img)
        target = os.path.join(images, r["name"] + ".jpg")
        tmp = target + ".tmp"
        img.save(tmp, "JPEG", quality=QUALITY)
        os.replace(tmp, target)
        written.append("images/%s.jpg" % r["name"])
    if problems:
        fail("%d of %d sources could not be used:\n  " % (len(problems), len(rows)) + "\n  ".join(problems))
    keep = {os.path.basename(p) for p in written}
    for f in os.listdir(images):
        if f not in keep:
            os.remove(os.path.join(images, f))   # left from an older manifest
    listing = os.path.join(out, "photos.txt")
    with open(listing + ".tmp", "w", encoding="utf-8") as f:
        f.write("# LETR training photos, written by tools/photo_data.py from resources/letr_photo_sources.tsv\n")
        f.write("# (paths relative to this file; labels: --data mlsd:%s)\n" % "photos.txt")
        for p in written:
            f.write(p + "\n")
    os.replace(listing + ".tmp", listing)
    total = sum(os.path.getsize(os.path.join(images, f)) for f in os.listdir(images))
    print("photo_data: %d images, %.2f MB in %s" % (len(written), total / 1e6, images))
    if not args.no_labels:
        glimpse = args.glimpse or os.path.join(ROOT, "build", "app", "glimpse")
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [glimpse, "data", "export", "--data", "mlsd:" + listing, "--out", tmp]
            print("photo_data: labelling with M-LSD: " + " ".join(cmd), flush=True)
            r = subprocess.run(cmd)
            if r.returncode != 0:
                fail("labelling failed (exit %d)" % r.returncode)
    total = 0
    for dirpath, _, files in os.walk(out):
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
    print("photo_data: %s holds %.2f MB" % (out, total / 1e6))
    if total > args.max_mb * 1e6:
        fail("%s holds %.2f MB, more than --max-mb %g" % (out, total / 1e6, args.max_mb))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", default=os.path.join(ROOT, ".photo_data"))
    b.add_argument("--manifest", default=MANIFEST)
    b.add_argument("--mirrors", default="/work/.mirror")
    b.add_argument("--glimpse", default=None)
    b.add_argument("--max-mb", type=float, default=15.0)
    b.add_argument("--no-labels", action="store_true")
    h = sub.add_parser("hash")
    h.add_argument("files", nargs="+")
    fr = sub.add_parser("frames")
    fr.add_argument("video")
    args = p.parse_args()
    if args.cmd == "build":
        build(args)
    elif args.cmd == "hash":
        for f in args.files:
            with open(f, "rb") as fh:
                print("%s\t%s" % (sha256(fh.read()), f))
    else:
        import cv2
        cap = cv2.VideoCapture(args.video)
        n = 0
        while cap.read()[0]:
            n += 1
        print("%d frames" % n)


if __name__ == "__main__":
    main()
