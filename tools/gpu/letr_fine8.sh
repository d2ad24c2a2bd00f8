#!/usr/bin/env bash
# Issue 51's GPU experiment: does a fine stage on stride 8 (C3, "fine_level": 3) move LETR's photo
# lines onto the edges, and does it make the fine stage beat the coarse one? (docs/decisions.md
# "LETR on photos: a stride-8 fine stage on a GPU".) On this 2-core machine one step of 8 took
# 9-14 s; on a GPU it is a matter of minutes.
#
#   tools/gpu/letr_fine8.sh prepare            on the build machine (needs build/app/glimpse,
#                                             /usr/bin/python3 with h5py, .photo_data from
#                                             tools/photo_data.py): the coarse-only start model
#                                             .photo_data/letr_coarse_init.h5 (the shipped model
#                                             without its fine stage) and both label caches
#   tools/gpu/letr_fine8.sh run BUILD OUTDIR   on the GPU server after tools/gpu/build_gpu.sh BUILD
#
# `run` trains the arms of ARMS side by side, each the photo recipe's fine phase alone
# (coarse_steps 0) from the shipped coarse stage, the fine stage copied from it as the recipe
# does. An arm's name says what it changes (see level, data and line_coef below); the default
# ARMS="s8 s8snap s16snap":
#   s8       fine_level 3 (stride 8), M-LSD's labels (the first photo model's data)
#   s8snap   fine_level 3, labels snapped to the edges (mlsd-snapped:)
#   s16snap  fine_level 4 (stride 16, the shipped geometry), snapped labels: the same number of
#            steps, so that s8snap against s16snap is the stride alone (with M-LSD's labels, more
#            stride-16 fine steps were measured on the CPU: no gain)
# Others that ran: s16l25 (M-LSD's labels, loss.line_coef 25), procs16l25 and procs16 (procedural
# scenes alone; procs16 with 1500 steps is the shipped fine stage, tools/train_letr_photo.sh's
# second run).
# STEPS fine steps per arm (default: what fits BUDGET seconds at the H200's measured rate), then
# eval letr per arm (held-out procedural scenes;
# the labelled photos when .eval_data/wireframe_tiny/test.json is there) on the GPU.
# OUTDIR gets MODEL_<arm>.h5, fine8_log.txt and fine8_eval.txt.
# Environment: ARMS, STEPS, BUDGET [240] training seconds (the limit is BUDGET + 60), BATCH [8], THREADS
# [4] per arm, DEVICE [cuda], EVAL_PROC [procedural:200:1000:427x320], EVAL_PHOTOS
# [.eval_data/wireframe_tiny/test.json; empty: none]. A dry run on a CPU: DEVICE=cpu STEPS=2
# BUDGET=200 EVAL_PROC=procedural:2:1000:427x320 EVAL_PHOTOS=.
# What ran (2026-11-30, docs/decisions.md): STEPS=800 BUDGET=300, 220 s of training; then
# ARMS="s16l25 procs16l25 procs16" STEPS=1000 BUDGET=280 (3 arms at 3.9 steps/s each) and
# ARMS=procs16 STEPS=1500 BUDGET=200 (one arm: 6.3 steps/s, 219 s).
set -euo pipefail

here="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$here"
INIT=.photo_data/letr_coarse_init.h5
PHOTOS=.photo_data/photos.txt
SNAPPED=.photo_data/photos_snap.txt   # the same photos; its own label cache (photos_snap.txt.mlsd.h5)

# label_caches TMP: both label caches, one after the other (the arms read them at the same time;
# a cache that is already current is only read).
label_caches() {
    cp "$PHOTOS" "$SNAPPED"
    "$GLIMPSE" data export --data "mlsd:$PHOTOS" --out "$1_a" >/dev/null
    "$GLIMPSE" data export --data "mlsd-snapped:$SNAPPED" --out "$1_b" >/dev/null
    rm -rf "$1_a" "$1_b"
}

prepare() {
    GLIMPSE="${GLIMPSE:-build/app/glimpse}"
    [ -f "$PHOTOS" ] || { echo "letr_fine8.sh: no $PHOTOS (tools/photo_data.py build)" >&2; exit 1; }
    /usr/bin/python3 - resources/letr_demo.h5 "$INIT" <<'EOF'
import json, os, sys, h5py
src, dst = sys.argv[1], sys.argv[2]
# LETR's names: letr.* is the coarse stage; the fine stage's transformer and heads are unprefixed
fine = ("transformer", "input_proj", "class_embed", "lines_embed")
with h5py.File(src, "r") as a, h5py.File(dst + ".new", "w") as b:
    for k, v in a.attrs.items(): b.attrs[k] = v
    a.copy("meta", b)
    cfg = json.loads(b["meta"].attrs["config"])
    cfg["stages"] = "coarse"
    b["meta"].attrs["config"] = json.dumps(cfg)
    params = b.create_group("params")
    kept = [k for k in a["params"] if k.split(".")[0] not in fine]
    for k in kept: a.copy(a["params"][k], params, name=k)
os.replace(dst + ".new", dst)
print(f"{dst}: {len(kept)} tensors kept, the fine stage's removed, stages 'coarse'")
EOF
    label_caches /tmp/fine8_export
    ls -l "$INIT" "$PHOTOS.mlsd.h5" "$SNAPPED.mlsd.h5"
}

# config ARM FINE_LEVEL STEPS -> $WORK/ARM/config.json
config() {
    mkdir -p "$WORK/$1"
    FINE_LEVEL=$2 STEPS=$3 BATCH=$BATCH LINE_COEF=$(line_coef "$1") python3 - resources/letr_photo_train.json "$WORK/$1/config.json" "$INIT" <<'EOF'
import json, os, sys
c = json.load(open(sys.argv[1]))
c["model"]["fine_level"] = int(os.environ["FINE_LEVEL"])
c.update(coarse_steps=0, fine_steps=int(os.environ["STEPS"]), batch_size=int(os.environ["BATCH"]),
         val_every=0, checkpoint_every=100, init=sys.argv[3])
c.setdefault("loss", {})["line_coef"] = float(os.environ["LINE_COEF"])
json.dump(c, open(sys.argv[2], "w"), indent=1)
EOF
}
# An arm's name says what it changes: s8 / s16 the fine stage's stride, "snap" snapped labels,
# "proc" procedural scenes only (exact labels, no photos), "l<N>" loss.line_coef N (default 5).
level() { case "$1" in *s16*) echo 4 ;; *) echo 3 ;; esac; }
data() { case "$1" in *proc*) echo "procedural:100000:1:427x320" ;;
                      *snap*) echo "mix:procedural:100000:1:427x320+mlsd-snapped:$SNAPPED" ;;
                      *) echo "mix:procedural:100000:1:427x320+mlsd:$PHOTOS" ;; esac; }
line_coef() { local c; c=$(sed -n 's/.*l\([0-9][0-9]*\).*/\1/p' <<<"$1"); echo "${c:-5}"; }
# train ARM LIMIT_SECONDS [glimpse args]: the arm's run in $WORK/ARM/run (SIGINT at the limit: a checkpoint)
train() {
    local arm=$1 limit=$2
    shift 2
    OMP_WAIT_POLICY=PASSIVE timeout -s INT "$limit" "$GLIMPSE" train letr --config "$WORK/$arm/config.json" \
        --data "$(data "$arm")" --out "$WORK/$arm/run" --threads "$THREADS" --device "$DEVICE" "$@"
}

run() {
    BUILD="$(cd "$1" && pwd)"
    mkdir -p "$2"
    OUTDIR="$(cd "$2" && pwd)"
    GLIMPSE="$BUILD/app/glimpse"
    BUDGET="${BUDGET:-240}"
    BATCH="${BATCH:-8}"
    THREADS="${THREADS:-4}"
    DEVICE="${DEVICE:-cuda}"
    WORK="${WORK:-/tmp/letr_fine8}"
    EVAL_PROC="${EVAL_PROC:-procedural:200:1000:427x320}"
    EVAL_PHOTOS="${EVAL_PHOTOS-.eval_data/wireframe_tiny/test.json}"
    local arms=(${ARMS:-s8 s8snap s16snap}) start a pids
    [ -x "$GLIMPSE" ] || { echo "letr_fine8.sh: $GLIMPSE is not built" >&2; exit 1; }
    for f in "$INIT" "$PHOTOS" "$SNAPPED"; do [ -f "$f" ] || { echo "letr_fine8.sh: no $f (prepare, then carry .photo_data)" >&2; exit 1; }; done
    exec > >(tee "$OUTDIR/fine8_log.txt") 2>&1
    rm -rf "$WORK"; mkdir -p "$WORK"
    start=$(date +%s)
    echo "== $(date -u) letr_fine8.sh: $DEVICE, $(nproc) cores, budget ${BUDGET}s, batch $BATCH, $THREADS threads per arm"
    command -v nvidia-smi >/dev/null && nvidia-smi -L || true
    # 0. The label caches (carried; made here when they are not, one at a time).
    label_caches "$WORK/export"
    # 1. The step count: STEPS, or what fits BUDGET at the rate measured on the H200 on 2026-11-30
    #    (three arms side by side, 3.9 steps of 8 per second each). A probe that read the trainer's
    #    images/s after a few steps was tried first: it counts the start-up, read 4 instead of 31
    #    images/s, and the first call trained 109 steps in 35 s of its 270.
    local steps="${STEPS:-$(python3 -c "print(max(int(0.85 * $BUDGET * 3.9), 1))")}"
    pids=()
    echo "== $(( $(date +%s) - start ))s: $steps fine steps of $BATCH per arm"
    # 2. The arms, side by side, under a hard limit (SIGINT: checkpoint.h5, which loadLetr reads).
    for a in "${arms[@]}"; do
        config "$a" "$(level "$a")" "$steps"
        ( train "$a" $((BUDGET + 60)) 2>&1 | tr '\r' '\n' | awk -v a="$a" '/ [0-9]*00\/[0-9]+ fine|rror|stopped|saved|done/ {print a ": " $0}' ) &
        pids+=($!)
    done
    wait "${pids[@]}" || true
    echo "== $(( $(date +%s) - start ))s: training done"
    # 3. Evaluation on the device, every layer, with the LSD and M-LSD rows.
    {
        for a in "${arms[@]}"; do
            local m="$WORK/$a/run/model.h5"
            [ -f "$m" ] || m="$WORK/$a/run/checkpoint.h5"
            [ -f "$m" ] || { echo "## $a: no model"; continue; }
            cp "$m" "$OUTDIR/MODEL_$a.h5"
            echo "## $a ($m): held-out procedural scenes"
            "$GLIMPSE" eval letr --checkpoint "$m" --data "$EVAL_PROC" --layers all --device "$DEVICE" 2>&1 || true
            if [ -n "$EVAL_PHOTOS" ] && [ -f "$EVAL_PHOTOS" ]; then
                echo "## $a: Wireframe 20 labelled photos, input 320 and 512"
                "$GLIMPSE" eval letr --checkpoint "$m" --data "$EVAL_PHOTOS" --layers all --device "$DEVICE" 2>&1 || true
                "$GLIMPSE" eval letr --checkpoint "$m" --data "$EVAL_PHOTOS" --layers all --device "$DEVICE" \
                    --short-side 512 --max-long-side 1024 2>&1 || true
            fi
        done
    } > "$OUTDIR/fine8_eval.txt"
    cat "$OUTDIR/fine8_eval.txt"
    echo "== $(date -u) done after $(( $(date +%s) - start ))s"
}

case "${1:-}" in
    prepare) prepare ;;
    run) [ $# -eq 3 ] || { sed -n '2,33p' "$0"; exit 2; }; run "$2" "$3" ;;
    *) sed -n '2,33p' "$0"; exit 2 ;;
esac
