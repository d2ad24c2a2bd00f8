#!/usr/bin/env bash
# The figures of issue 51's targets for one LETR model (docs/decisions.md, "LETR on photos: data
# and evaluation (issue 51)"), each from the glimpse command printed before it:
#   1. photos on an edge: `glimpse eval edges` on the four opencv-doc photos, top 50: LETR's mean
#      against LSD's (target: >= LSD; stretch: >= M-LSD);
#   2. labelled photos: `glimpse eval letr --layers all` on the 20 Wireframe test images of
#      iitpvisionlab/LSDNet (tools/wireframe_tiny.py makes .eval_data/wireframe_tiny/test.json):
#      sAP5/10/15 of every layer, LSD and M-LSD (target: LETR's last layer sAP10 >= 2x LSD's;
#      stretch: >= M-LSD's); skipped with a note when the set is not there;
#   3. held-out procedural rooms: `glimpse eval letr --layers all` (target: the last fine layer
#      beats the last coarse layer in sAP10);
#   4. speed: `glimpse bench letr` on a 640x480 photo with 2 threads (target: end-to-end
#      <= 0.5 s); and the model file's size (target: <= 25 MB).
# Then one summary line per target.
#
# usage: tools/eval_letr_photos.sh MODEL.h5 [OUT_DIR]
#   OUT_DIR (default: a temporary folder) keeps each command's output and the edge figure.
# Environment: GLIMPSE [build/app/glimpse], THREADS [2], PROC [procedural:200:1000:256x192]
# (the held-out set of every LETR measurement in docs/decisions.md; procedural:50:1000:256x192
# is its first quarter, for a quick look), WIREFRAME [.eval_data/wireframe_tiny/test.json],
# PHOTOS [/usr/share/doc/opencv-doc/examples/data], SKIP ["": any of edges,wireframe,proc,bench],
# DEVICE [cpu] (passed to eval letr; eval edges and bench run on the CPU).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
GLIMPSE="${GLIMPSE:-$here/build/app/glimpse}"
THREADS="${THREADS:-2}"
PROC="${PROC:-procedural:200:1000:256x192}"
WIREFRAME="${WIREFRAME:-$here/.eval_data/wireframe_tiny/test.json}"
PHOTOS="${PHOTOS:-/usr/share/doc/opencv-doc/examples/data}"
SKIP="${SKIP:-}"
DEVICE="${DEVICE:-cpu}"

if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    [ $# -lt 1 ] && exit 2 || exit 0
fi
MODEL="$1"
[ -f "$MODEL" ] || { echo "eval_letr_photos.sh: no model file $MODEL" >&2; exit 1; }
[ -x "$GLIMPSE" ] || { echo "eval_letr_photos.sh: $GLIMPSE is not built" >&2; exit 1; }
OUT="${2:-$(mktemp -d -t eval_letr_photos.XXXXXX)}"
mkdir -p "$OUT"
skip() { case ",$SKIP," in *",$1,"*) return 0;; *) return 1;; esac; }
run() {   # run NAME CMD...: prints the command, runs it, keeps its output in OUT/NAME.txt
    local name="$1"; shift
    echo
    echo "\$ $*"
    "$@" 2> "$OUT/$name.err" | tee "$OUT/$name.txt"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
        echo "eval_letr_photos.sh: $name failed (exit $rc):" >&2
        tail -n 5 "$OUT/$name.err" >&2
        return "$rc"
    fi
}
echo "model: $MODEL"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), threads $THREADS; outputs in $OUT"

if ! skip edges; then
    imgs=()
    for f in building.jpg home.jpg box_in_scene.png board.jpg; do
        [ -f "$PHOTOS/$f" ] || { echo "eval_letr_photos.sh: $PHOTOS/$f missing (install opencv-doc or set PHOTOS)" >&2; exit 1; }
        imgs+=("$PHOTOS/$f")
    done
    run edges "$GLIMPSE" eval edges "${imgs[@]}" --checkpoint "$MODEL" --top 50 --threads "$THREADS" \
        --figure "$OUT/edges.jpg"
fi
if ! skip wireframe; then
    if [ -f "$WIREFRAME" ]; then
        run wireframe "$GLIMPSE" eval letr --checkpoint "$MODEL" --data "$WIREFRAME" --layers all \
            --threads "$THREADS" --device "$DEVICE"
    else
        echo
        echo "(no labelled photos at $WIREFRAME: make them with tools/wireframe_tiny.py; skipped)"
    fi
fi
if ! skip proc; then
    # M-LSD is left out here: its row costs ~10 s per image on this CPU and is not a target.
    run proc "$GLIMPSE" eval letr --checkpoint "$MODEL" --data "$PROC" --layers all --no-mlsd \
        --threads "$THREADS" --device "$DEVICE"
fi
if ! skip bench; then
    # board.jpg is 640 x 480 (the size of the speed target).
    run bench env OMP_WAIT_POLICY=PASSIVE "$GLIMPSE" bench letr --checkpoint "$MODEL" --threads 2 \
        --image "$PHOTOS/board.jpg" --runs 5 --warmup 1
fi

/usr/bin/python3 - "$OUT" "$MODEL" <<'EOF'
import os, re, sys
out = sys.argv[1]
def read(name):
    p = os.path.join(out, name + ".txt")
    return open(p).read() if os.path.exists(p) else None

def table(text):
    # eval letr's table: "layer sAP5 sAP10 sAP15 ..." then one row per layer / baseline.
    rows, head = {}, None
    for line in text.splitlines():
        if line.startswith("layer "):
            head = line.split()[1:]
            continue
        if head is None or not line.strip():
            continue
        label, rest = line[:10].strip(), line[10:].split()
        try:
            rows[label] = dict(zip(head, map(float, rest)))
        except ValueError:
            pass
    return rows

def last(rows, stage):
    keys = [k for k in rows if k.startswith(stage + " ")]
    return max(keys, key=lambda k: int(k.split()[1])) if keys else None

print("\n== issue 51 targets ==")
mb = os.path.getsize(sys.argv[2]) / 1e6
print("model file: %.1f MB: %s (<= 25 MB)" % (mb, "MET" if mb <= 25 else "not met"))
t = read("edges")
if t:
    mean = {m.group(1): float(m.group(2)) for m in re.finditer(r"^mean\s+(\S+)\s+([\d.]+)%", t, re.M)}
    l, s, m = mean.get("LETR"), mean.get("LSD"), mean.get("M-LSD")
    verdict = "MET" if l is not None and s is not None and l >= s else "not met"
    stretch = " (stretch >= M-LSD %s)" % ("met" if m is not None and l is not None and l >= m else "not met") if m is not None else ""
    print("photos on an edge (top 50, 4 opencv-doc photos): LETR %s%%, LSD %s%%, M-LSD %s%%: %s%s"
          % (l, s, m, verdict, stretch))
t = read("wireframe")
if t:
    r = table(t)
    fl, cl = last(r, "fine"), last(r, "coarse")
    best = fl or cl
    lsd, ml = r.get("LSD", {}).get("sAP10"), r.get("M-LSD", {}).get("sAP10")
    v = r.get(best, {}).get("sAP10") if best else None
    verdict = "MET" if v is not None and lsd is not None and v >= 2 * lsd else "not met"
    stretch = " (stretch >= M-LSD %s)" % ("met" if v is not None and ml is not None and v >= ml else "not met") if ml is not None else ""
    print("labelled photos (Wireframe 20), sAP10: LETR %s %s, LSD %s, M-LSD %s: %s (>= 2x LSD)%s"
          % (best, v, lsd, ml, verdict, stretch))
    print("  sAP5/10/15: " + "; ".join("%s %s/%s/%s" % (k, x.get("sAP5"), x.get("sAP10"), x.get("sAP15")) for k, x in r.items()))
t = read("proc")
if t:
    r = table(t)
    fl, cl = last(r, "fine"), last(r, "coarse")
    f, c = (r[fl]["sAP10"] if fl else None), (r[cl]["sAP10"] if cl else None)
    verdict = "MET" if f is not None and c is not None and f > c else "not met"
    print("held-out procedural, sAP10: %s %s vs %s %s (LSD %s): %s (fine > coarse)"
          % (fl, f, cl, c, r.get("LSD", {}).get("sAP10"), verdict))
t = read("bench")
if t:
    m = re.search(r"^\s*end-to-end\s+([\d.]+)\s*ms", t, re.M)
    f = re.search(r"^\s*forward\s+([\d.]+)\s*ms", t, re.M)
    if m:
        ms = float(m.group(1))
        print("speed, 640x480, 2 threads: end-to-end %.0f ms (forward %s ms): %s (<= 500 ms)"
              % (ms, f.group(1) if f else "?", "MET" if ms <= 500 else "not met"))
    else:
        print("speed: see the bench output above (OUT/bench.txt)")
EOF
