#!/usr/bin/python3
"""A real few-shot data set for ConstellationNet (issue 54 part 4): the Omniglot characters of
brendenlake/omniglot's two small background sets (python/images_background_small1.zip and
images_background_small2.zip; MIT license, Lake, Salakhutdinov and Tenenbaum, Science 2015),
written in the folder layout that `glimpse train constellation --data DIR` and
`glimpse eval fewshot --data DIR` read (core/data/fewshot.h):

    OUT/train/<Alphabet>-<characterNN>/*.png   base classes   (Korean, Japanese_(katakana),
                                                               Sanskrit, Balinese: 153 characters)
    OUT/val/<Alphabet>-<characterNN>/*.png     validation      (Tagalog: 17)
    OUT/test/<Alphabet>-<characterNN>/*.png    novel classes   (Greek, Latin, Early_Aramaic: 72)

Every character has 20 drawings (by 20 people), 105x105 1-bit PNGs copied byte for byte. The
splits are whole alphabets, so novel characters come from scripts the model never saw. Greek
and Latin are in both zips with identical files; they are taken once (242 characters in all).
The full background / evaluation zips (964 + 659 characters) are not in the snapshot this
tool reads. OUT (default .fewshot_data/omniglot_small) is ignored by git; nothing of it ships.

Usage:
  tools/omniglot_small.py [--mirror DIR | --src DIR] [--out .fewshot_data/omniglot_small]
    --mirror  a bare git mirror of brendenlake/omniglot (default
              /work/.mirror/brendenlake+omniglot/repo, what the `fetch` tool leaves)
    --src     or a checkout's python/ folder (git clone https://github.com/brendenlake/omniglot)
Then:  glimpse eval fewshot --data .fewshot_data/omniglot_small --checkpoint M.h5
       tools/constellation_study.sh --data .fewshot_data/omniglot_small ...
"""
import argparse
import hashlib
import io
import os
import shutil
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = "brendenlake/omniglot"
COMMIT = "057f034baf2ecb8530bc5710e5a23584d2a519cc"  # the snapshot checked (2026-11-29)
ZIPS = {  # path in the repository -> sha256 of the zip checked (2026-11-29)
    "python/images_background_small1.zip": "f38eb80f801274ac2b4dff5b24289016bfaba4a7d5bb50deebf27104ad6cb8a4",
    "python/images_background_small2.zip": "3ccaa407515a8778e5d0861875af38b17e418f301ad5bb3b5a6b65d901a41c7f",
}
SPLITS = {
    "train": ["Korean", "Japanese_(katakana)", "Sanskrit", "Balinese"],
    "val": ["Tagalog"],
    "test": ["Greek", "Latin", "Early_Aramaic"],
}
DRAWINGS = 20


def fail(msg):
    print("omniglot_small: error: " + msg, file=sys.stderr)
    sys.exit(1)


def read_zip(args, rel):
    if args.src:
        path = os.path.join(args.src, os.path.basename(rel))
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as e:
            fail("cannot read %s: %s" % (path, e.strerror))
    r = subprocess.run(["git", "--git-dir", args.mirror, "cat-file", "blob", "%s:%s" % (COMMIT, rel)],
                       capture_output=True)
    if r.returncode != 0:
        fail("cannot read %s at %s from %s: %s (fetch %s first, or give --src)"
             % (rel, COMMIT[:10], args.mirror, r.stderr.decode(errors="replace").strip(), REPO))
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", default="/work/.mirror/brendenlake+omniglot/repo")
    ap.add_argument("--src")
    ap.add_argument("--out", default=os.path.join(ROOT, ".fewshot_data", "omniglot_small"))
    args = ap.parse_args()

    # character key (alphabet, character) -> {drawing file name: png bytes}
    chars = {}
    for rel, want in ZIPS.items():
        data = read_zip(args, rel)
        got = hashlib.sha256(data).hexdigest()
        if got != want:
            fail("%s has sha256 %s, expected %s (a different file than the one checked)" % (rel, got, want))
        try:
            z = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile as e:
            fail("%s is not a zip file: %s" % (rel, e))
        for name in z.namelist():
            parts = name.split("/")
            if len(parts) != 4 or not parts[3].endswith(".png"):
                continue
            _, alphabet, character, drawing = parts
            files = chars.setdefault((alphabet, character), {})
            png = z.read(name)
            if drawing in files and files[drawing] != png:
                fail("%s: %s/%s/%s differs between the two zips" % (rel, alphabet, character, drawing))
            files[drawing] = png

    alphabets = {a for a, _ in chars}
    named = {a for names in SPLITS.values() for a in names}
    if alphabets != named:
        fail("the zips hold alphabets %s, this tool splits %s" % (sorted(alphabets), sorted(named)))
    tmp = args.out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    counts = {}
    for split, names in SPLITS.items():
        for (alphabet, character), files in sorted(chars.items()):
            if alphabet not in names:
                continue
            if len(files) != DRAWINGS:
                fail("%s/%s has %d drawings, expected %d" % (alphabet, character, len(files), DRAWINGS))
            d = os.path.join(tmp, split, "%s-%s" % (alphabet, character))
            os.makedirs(d)
            for drawing, png in files.items():
                with open(os.path.join(d, drawing), "wb") as f:
                    f.write(png)
            counts[split] = counts.get(split, 0) + 1
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    os.rename(tmp, args.out)
    print("omniglot_small: %s: %s characters of %d drawings (train %s, val %s, test %s)"
          % (args.out, sum(counts.values()), DRAWINGS, counts["train"], counts["val"], counts["test"]))


if __name__ == "__main__":
    main()
