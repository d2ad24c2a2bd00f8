#!/usr/bin/env bash
# On a GPU server, after tools/gpu/build_gpu.sh BUILD_DIR: trains the LETR photo recipe
# (tools/train_letr_photo.sh, resources/letr_photo_train.json; docs/decisions.md "LETR on photos
# (issue 51 part 3)") with DEVICE=cuda in a fixed wall-clock budget, then evaluates it. It runs
# the recipe's first form, both phases in one run on the same data; the CPU script now trains
# the fine stage in a second run on procedural scenes alone, which tools/gpu/letr_fine8.sh's
# arm procs16 runs on a GPU (docs/decisions.md "LETR on photos: the fine stage on exact labels").
#   1. two short probe runs (10 and 60 steps) measure the seconds per step on this machine;
#   2. the recipe's step counts are scaled so that training fits BUDGET seconds (70% coarse,
#      30% fine; the cosine schedules follow), and it runs under a hard limit of BUDGET + 90 s;
#   3. eval letr on held-out procedural scenes (every layer, LSD and M-LSD rows), and on the
#      labelled photos when EVAL_PHOTOS names a labelled set.
# At most three files land in OUTDIR: model.h5, letr_photo_log.txt, letr_photo_eval.txt.
#
# usage: tools/gpu/letr_photo.sh BUILD_DIR OUTDIR
# Environment: BUDGET [240] (training seconds), BATCH [16], DEVICE [cuda], PHOTOS
# [.photo_data/photos.txt], EVAL_PHOTOS [.photo_data/eval if it exists], WORK [/tmp/letr_photo_gpu]
set -euo pipefail

here="$(cd "$(dirname "$0")/../.." && pwd)"
[ $# -eq 2 ] || { sed -n '2,15p' "$0"; exit 2; }
BUILD="$(cd "$1" && pwd)"
mkdir -p "$2"
OUTDIR="$(cd "$2" && pwd)"
GLIMPSE="$BUILD/app/glimpse"
BUDGET="${BUDGET:-240}"
BATCH="${BATCH:-16}"
DEVICE="${DEVICE:-cuda}"
PHOTOS="${PHOTOS:-.photo_data/photos.txt}"
WORK="${WORK:-/tmp/letr_photo_gpu}"
THREADS="${THREADS:-4}"
cd "$here"
[ -x "$GLIMPSE" ] || { echo "letr_photo.sh: $GLIMPSE is not built (tools/gpu/build_gpu.sh $1)" >&2; exit 1; }
[ -f "$PHOTOS" ] || { echo "letr_photo.sh: no photo list $PHOTOS (carry .photo_data)" >&2; exit 1; }
LOG="$OUTDIR/letr_photo_log.txt"
EVAL="$OUTDIR/letr_photo_eval.txt"
exec > >(tee "$LOG") 2>&1
rm -rf "$WORK"
mkdir -p "$WORK"
start=$(date +%s)
echo "== $(date -u) letr_photo.sh on $(hostname): $DEVICE, $(nproc) cores, budget ${BUDGET}s, batch $BATCH"
command -v nvidia-smi >/dev/null && nvidia-smi -L || true
"$GLIMPSE" --version

# A run of the recipe (the same config the CPU script makes, scaled): train NAME COARSE FINE VAL LIMIT [--steps N].
# glimpse itself gets the SIGINT of the time limit: it writes run/checkpoint.h5 and stops.
train() {
    local dir="$WORK/$1" limit="$5"
    mkdir -p "$dir"
    COARSE_STEPS=$2 FINE_STEPS=$3 BATCH=$BATCH VAL_EVERY=$4 python3 - "$here/resources/letr_photo_train.json" "$dir/config.json" <<'EOF2'
import json, os, sys
c = json.load(open(sys.argv[1]))
c.update(coarse_steps=int(os.environ["COARSE_STEPS"]), fine_steps=int(os.environ["FINE_STEPS"]),
         batch_size=int(os.environ["BATCH"]), val_every=int(os.environ["VAL_EVERY"]), checkpoint_every=200)
json.dump(c, open(sys.argv[2], "w"))
EOF2
    shift 5
    OMP_WAIT_POLICY=PASSIVE timeout -s INT "$limit" "$GLIMPSE" train letr --config "$dir/config.json" \
        --data "mix:procedural:100000:1:427x320+mlsd:$PHOTOS" --out "$dir/run" --threads "$THREADS" \
        --device "$DEVICE" "$@"
}
# 1. Seconds per step: two probe runs without validation; one pays the start-up, the other 50 steps more.
probe_run() {   # probe_run NAME STEPS -> seconds
    local t0 t1
    t0=$(date +%s.%N)
    train "$1" 1000 0 0 400 --steps "$2" > "$WORK/$1.log" 2>&1 || { echo "probe $1 failed:" >&2; tail -20 "$WORK/$1.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    python3 -c "print($t1 - $t0)"
}
ta=$(probe_run probe10 10) || exit 1
tb=$(probe_run probe60 60) || exit 1
per_step=$(python3 -c "print(max(($tb - $ta) / 50.0, 0.01))")
steps=$(python3 -c "print(int(0.85 * $BUDGET / $per_step))")   # validation and start-up fit in the rest
coarse=$(python3 -c "print(max(int($steps * 0.7), 50))")
fine=$(python3 -c "print(max(int($steps * 0.3), 20))")
val=$(python3 -c "print(max($coarse // 2, 50))")
echo "== probe: 10 steps ${ta}s, 60 steps ${tb}s: ${per_step}s per step of $BATCH images -> coarse $coarse + fine $fine steps"

# 2. The run, under a hard limit (a stop writes run/checkpoint.h5, which loadLetr also reads).
train train "$coarse" "$fine" "$val" $((BUDGET + 90)) 2>&1 | tr '\r' '\n' | awk 'NR % 40 == 1 || /val|rror|step [0-9]+\/|saved|stopped/' \
    || echo "== training ended with an error"
echo "== training done after $(( $(date +%s) - start ))s"
model="$WORK/train/run/model.h5"
[ -f "$model" ] || { echo "letr_photo.sh: no model.h5 (training did not finish)"; exit 1; }
cp "$model" "$OUTDIR/model.h5"
ls -l "$OUTDIR/model.h5"

# 3. Evaluation.
{
    echo "# $(date -u) coarse $coarse + fine $fine steps of $BATCH images on $DEVICE"
    echo "## held-out procedural scenes"
    "$GLIMPSE" eval letr --checkpoint "$model" --data procedural:200:1000:427x320 --layers all --device "$DEVICE" 2>&1
    if [ -n "${EVAL_PHOTOS:-}" ]; then
        echo "## labelled photos $EVAL_PHOTOS"
        "$GLIMPSE" eval letr --checkpoint "$model" --data "$EVAL_PHOTOS" --layers all --device "$DEVICE" 2>&1
    fi
} > "$EVAL" || true
cat "$EVAL"
echo "== $(date -u) done after $(( $(date +%s) - start ))s"
