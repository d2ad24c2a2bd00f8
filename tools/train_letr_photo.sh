#!/usr/bin/env bash
# Trains the LETR demo model that ships as resources/letr_demo.h5 (issue 51; docs/decisions.md
# "LETR on photos: proposal queries"): config resources/letr_photo_train.json, backbone mlsd_tiny
# (M-LSD tiny's pretrained MobileNetV2 encoder, copied from resources/mlsd_tiny.h5 and kept
# frozen; only the small stride-32 block on top of it trains), coarse queries from M-LSD's own
# line proposals ("coarse_queries": "proposals"; its decoder is copied from the same file and
# kept frozen), procedural scenes mixed 1:1 with photographs labelled by M-LSD tiny (dataset
# spec mlsd:PHOTOS; the labels are cached beside the list; tools/photo_data.py makes them).
# One stage: the coarse phase (1200 steps), then the fine phase (400): about 33 minutes on the
# 2-core machine. A run that was interrupted resumes; a finished one is left alone. At the end
# OUT/model.h5 is the model.
#
# usage: tools/train_letr_photo.sh [OUT]            (default OUT: runs/letr_photo)
# Environment: GLIMPSE [build/app/glimpse], PHOTOS [.photo_data/photos.txt], DATA [the mix above;
# replaces it], DEVICE [cpu] (cuda or cuda:N on a CUDA build, docs/gpu.md), THREADS [2],
# NICE [0], COARSE_STEPS, FINE_STEPS, BATCH, VAL_EVERY (replace the config's values; written to
# OUT/config.json, which a resumed run must keep: the cosine schedule depends on the step counts),
# CONFIG [resources/letr_photo_train.json].
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
# The run's config: the recipe with the environment's step counts and batch size.
if [ ! -f "$OUT/config.json" ]; then
    COARSE_STEPS="${COARSE_STEPS:-}" FINE_STEPS="${FINE_STEPS:-}" BATCH="${BATCH:-}" VAL_EVERY="${VAL_EVERY:-}" \
    python3 - "$CONFIG" "$OUT/config.json.tmp" <<'EOF'
import json, os, sys
c = json.load(open(sys.argv[1]))
for env, key in (("COARSE_STEPS", "coarse_steps"), ("FINE_STEPS", "fine_steps"), ("BATCH", "batch_size"),
                 ("VAL_EVERY", "val_every")):
    if os.environ.get(env):
        c[key] = int(os.environ[env])
json.dump(c, open(sys.argv[2], "w"), indent=1)
EOF
    mv "$OUT/config.json.tmp" "$OUT/config.json"
fi
echo "== $OUT: $(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print("coarse", c["coarse_steps"], "fine", c["fine_steps"], "batch", c["batch_size"])' "$OUT/config.json") on $DATA ($DEVICE, $THREADS threads)"
OMP_WAIT_POLICY=PASSIVE nice -n "$NICE" "$GLIMPSE" train letr --config "$OUT/config.json" --data "$DATA" \
    --out "$OUT/run" --threads "$THREADS" --resume --device "$DEVICE"
if [ ! -f "$OUT/run/model.h5" ]; then
    echo "train_letr_photo.sh: stopped before its last step; run the script again to resume" >&2
    exit 3
fi
cp "$OUT/run/model.h5" "$OUT/model.h5.tmp" && mv "$OUT/model.h5.tmp" "$OUT/model.h5"
echo "== $OUT/model.h5: evaluate with"
echo "   $GLIMPSE eval letr --checkpoint $OUT/model.h5 --data procedural:200:1000:427x320 --layers all"
echo "   $GLIMPSE eval edges building.jpg home.jpg box_in_scene.png board.jpg --checkpoint $OUT/model.h5 --top 50"
