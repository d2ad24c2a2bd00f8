#!/usr/bin/env bash
# Trains the LETR demo model that ships as resources/letr_demo.h5 (issue 51; docs/decisions.md
# "LETR on photos: proposal queries"): config resources/letr_photo_train.json, backbone mlsd_tiny
# (M-LSD tiny's pretrained MobileNetV2 encoder, copied from resources/mlsd_tiny.h5 and kept
# frozen; only the small stride-32 block on top of it trains), coarse queries from M-LSD's own
# line proposals ("coarse_queries": "proposals"; its decoder is copied from the same file and
# kept frozen). Two runs, each resumable:
#   OUT/coarse  the coarse stage alone (1200 steps), on procedural scenes mixed 1:1 with
#               photographs labelled by M-LSD tiny (dataset spec mlsd:PHOTOS; the labels are
#               cached beside the list; tools/photo_data.py makes them);
#   OUT/fine    the fine stage (1500 steps), copied from the coarse one, on procedural scenes
#               alone (FINE_DATA): exact labels, which photos do not have.
# About 22 + 45 minutes on the 2-core machine. A run that was interrupted resumes; a finished
# one is left alone. At the end OUT/model.h5 is the model.
#
# usage: tools/train_letr_photo.sh [OUT]            (default OUT: runs/letr_photo)
# Environment: GLIMPSE [build/app/glimpse], PHOTOS [.photo_data/photos.txt], DATA [the coarse
# run's mix above; replaces it], FINE_DATA [procedural:100000:1:427x320], DEVICE [cpu] (cuda or
# cuda:N on a CUDA build, docs/gpu.md), THREADS [2], NICE [0], COARSE_STEPS, FINE_STEPS, BATCH,
# VAL_EVERY (replace the config's values; written to each run's OUT/NAME/config.json, which a
# resumed run must keep: the cosine schedule depends on the step counts), CONFIG
# [resources/letr_photo_train.json].
# Relative paths (PHOTOS, the config's backbone_weights) are taken from the repository root.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
GLIMPSE="${GLIMPSE:-$here/build/app/glimpse}"
OUT="${1:-runs/letr_photo}"
PHOTOS="${PHOTOS:-.photo_data/photos.txt}"
DEVICE="${DEVICE:-cpu}"
THREADS="${THREADS:-2}"
NICE="${NICE:-0}"
CONFIG="${CONFIG:-$here/resources/letr_photo_train.json}"
DATA="${DATA:-mix:procedural:100000:1:427x320+mlsd:$PHOTOS}"
FINE_DATA="${FINE_DATA:-procedural:100000:1:427x320}"

[ -x "$GLIMPSE" ] || { echo "train_letr_photo.sh: $GLIMPSE is not built" >&2; exit 1; }
[ -f "$CONFIG" ] || { echo "train_letr_photo.sh: no config $CONFIG" >&2; exit 1; }
case "$THREADS" in ''|*[!0-9]*|0) echo "train_letr_photo.sh: THREADS must be a positive integer" >&2; exit 2;; esac
for v in COARSE_STEPS FINE_STEPS BATCH VAL_EVERY; do
    case "${!v:-x}" in x) ;; ''|*[!0-9]*) echo "train_letr_photo.sh: $v must be a non-negative integer" >&2; exit 2;; esac
done
OUT="$(mkdir -p "$OUT" && cd "$OUT" && pwd)"
cd "$here"

if [ -f "$OUT/model.h5" ]; then
    echo "== done: $OUT/model.h5"
    exit 0
fi
# phase NAME DATA [INIT]: one run of the recipe in OUT/NAME. Its config (OUT/NAME/config.json,
# which a resumed run must keep: the cosine schedule depends on the step counts) is the recipe
# with the environment's step counts and batch size; without INIT the coarse stage alone
# ("stages": "coarse"), with INIT the fine phase alone, started from that coarse-only model.
# A finished phase (OUT/NAME/run/model.h5) is left alone.
phase() {
    local name=$1 data=$2 init=${3:-} dir="$OUT/$1"
    [ -f "$dir/run/model.h5" ] && { echo "== $name: done ($dir/run/model.h5)"; return 0; }
    mkdir -p "$dir"
    if [ ! -f "$dir/config.json" ]; then
        COARSE_STEPS="${COARSE_STEPS:-}" FINE_STEPS="${FINE_STEPS:-}" BATCH="${BATCH:-}" VAL_EVERY="${VAL_EVERY:-}" \
        INIT="$init" python3 - "$CONFIG" "$dir/config.json.tmp" <<'EOF'
import json, os, sys
c = json.load(open(sys.argv[1]))
for env, key in (("COARSE_STEPS", "coarse_steps"), ("FINE_STEPS", "fine_steps"), ("BATCH", "batch_size"),
                 ("VAL_EVERY", "val_every")):
    if os.environ.get(env):
        c[key] = int(os.environ[env])
if os.environ["INIT"]:
    c.update(coarse_steps=0, init=os.environ["INIT"])
else:
    c["model"]["stages"] = "coarse"
json.dump(c, open(sys.argv[2], "w"), indent=1)
EOF
        mv "$dir/config.json.tmp" "$dir/config.json"
    fi
    echo "== $name: $(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print("coarse", c["coarse_steps"], "fine", 0 if c["model"].get("stages") == "coarse" else c["fine_steps"], "batch", c["batch_size"])' "$dir/config.json") on $data ($DEVICE, $THREADS threads)"
    OMP_WAIT_POLICY=PASSIVE nice -n "$NICE" "$GLIMPSE" train letr --config "$dir/config.json" --data "$data" \
        --out "$dir/run" --threads "$THREADS" --resume --device "$DEVICE"
    if [ ! -f "$dir/run/model.h5" ]; then
        echo "train_letr_photo.sh: $name stopped before its last step; run the script again to resume" >&2
        exit 3
    fi
}
# 1. The coarse stage alone, on procedural scenes and photos.
phase coarse "$DATA"
# 2. The fine stage, copied from the coarse one (its last line layer zeroed), on procedural scenes
#    alone: their labels are exact, while a photo's labels are M-LSD's lines, which the coarse
#    stage's proposals already are (docs/decisions.md "LETR on photos: the fine stage on exact
#    labels").
phase fine "$FINE_DATA" "$OUT/coarse/run/model.h5"
cp "$OUT/fine/run/model.h5" "$OUT/model.h5.tmp" && mv "$OUT/model.h5.tmp" "$OUT/model.h5"
echo "== $OUT/model.h5: evaluate with"
echo "   $GLIMPSE eval letr --checkpoint $OUT/model.h5 --data procedural:200:1000:427x320 --layers all"
echo "   $GLIMPSE eval edges building.jpg home.jpg box_in_scene.png board.jpg --checkpoint $OUT/model.h5 --top 50"
