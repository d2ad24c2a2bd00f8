#!/usr/bin/env bash
# Trains the procedural-scene LETR model (resnet10, from scratch) that shipped as
# resources/letr_demo.h5 until 2026-11-29 (issue 19, docs/decisions.md "LETR training recipe");
# the shipped model is now tools/train_letr_photo.sh's. On procedural scenes, in two stages:
#   1. resources/letr_demo_train.json: short side 192, 16000 coarse + 6000 fine steps, with
#      the dense auxiliary maps and query denoising (the backbone learns from scratch);
#   2. resources/letr_demo_hires.json: short side 320, started from stage 1's checkpoint
#      (--init), 16400 coarse steps (lr 1e-4, 1e-5 from step 13200) + 4000 fine steps,
#      backbone batch norm frozen, only layer3 and
#      layer4 trained (backbone_train_from), quality-aware class target, weight averaging
#      (ema_decay), the backbone's layers in bfloat16 where the processor has it (bf16_backbone),
#      position in the encoder's values (position_in_values), and fine lines that correct the
#      coarse ones (fine_lines "refine"); its images reach the model at exactly the size the
#      held-out ones do (no crops, no scale jitter).
#      (A third stage at 448 did worse than these longer phases at 320 in as much time.)
# Each stage runs RANKS processes of one thread (data-parallel, docs/distributed.md). A stage
# that was interrupted resumes; a finished one is skipped. At the end OUT/model.h5 is the model.
#
# usage: tools/train_letr_demo.sh [OUT]            (default OUT: runs/letr_demo)
# Environment: GLIMPSE [build/app/glimpse], RANKS [2], PORT [29650] (the ranks' rendezvous,
# 127.0.0.1), NICE [0], STAGE1 [unset]: a stage-1 checkpoint to start stage 2 from instead of
# training stage 1 (e.g. OUT/stage1/checkpoint.h5 of an earlier run),
# DEVICE [cpu]: cuda or cuda:N trains each stage in one process on that GPU (RANKS must be 1;
# a CUDA build, docs/gpu.md).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
GLIMPSE="${GLIMPSE:-$here/build/app/glimpse}"
OUT="${1:-runs/letr_demo}"
RANKS="${RANKS:-2}"
PORT="${PORT:-29650}"
NICE="${NICE:-0}"
DEVICE="${DEVICE:-cpu}"
DATA="procedural:100000:1:256x192"

[ -x "$GLIMPSE" ] || { echo "train_letr_demo.sh: $GLIMPSE is not built" >&2; exit 1; }
case "$RANKS" in ''|*[!0-9]*|0) echo "train_letr_demo.sh: RANKS must be a positive integer" >&2; exit 2;; esac
if [ "$DEVICE" != cpu ] && [ "$RANKS" != 1 ]; then
    echo "train_letr_demo.sh: DEVICE=$DEVICE trains in one process: set RANKS=1" >&2
    exit 2
fi
mkdir -p "$OUT"

# stage NAME CONFIG [glimpse options...]: one stage, resumed when it has a checkpoint.
stage() {
    local name="$1" config="$2" dir="$OUT/$1"
    shift 2
    if [ -f "$dir/model.h5" ]; then
        echo "== $name: done ($dir/model.h5)"
        return
    fi
    echo "== $name: $config -> $dir ($RANKS ranks, $DEVICE)"
    local args=(train letr --config "$here/resources/$config" --data "$DATA" --out "$dir" --threads 1 --resume
                --device "$DEVICE" "$@")
    if [ "$RANKS" = 1 ]; then
        OMP_WAIT_POLICY=PASSIVE nice -n "$NICE" "$GLIMPSE" "${args[@]}"
    else
        local pids=() r
        for ((r = 1; r < RANKS; ++r)); do
            OMP_WAIT_POLICY=PASSIVE nice -n "$NICE" "$GLIMPSE" "${args[@]}" --master-addr 127.0.0.1 \
                --master-port "$PORT" --world-size "$RANKS" --rank "$r" > "$dir.rank$r.log" 2>&1 &
            pids+=($!)
        done
        OMP_WAIT_POLICY=PASSIVE nice -n "$NICE" "$GLIMPSE" "${args[@]}" --master-addr 127.0.0.1 \
            --master-port "$PORT" --world-size "$RANKS" --rank 0
        for p in "${pids[@]}"; do wait "$p"; done
    fi
    # Stopped early (Ctrl-C: the ranks write a checkpoint and exit 0): do not start the next stage.
    if [ ! -f "$dir/model.h5" ]; then
        echo "train_letr_demo.sh: $name stopped before its last step; run the script again to resume it" >&2
        exit 3
    fi
}

# The stages in one compound command: bash parses it whole before running it, so editing this
# file while a stage trains (hours) cannot change what the running script does next.
{
    if [ -n "${STAGE1:-}" ]; then
        [ -f "$STAGE1" ] || { echo "train_letr_demo.sh: STAGE1=$STAGE1 does not exist" >&2; exit 1; }
        echo "== stage1: taken from $STAGE1"
        init1="$STAGE1"
    else
        stage stage1 letr_demo_train.json
        init1="$OUT/stage1/checkpoint.h5"
    fi
    stage stage2 letr_demo_hires.json --init "$init1"
    cp "$OUT/stage2/model.h5" "$OUT/model.h5.tmp" && mv "$OUT/model.h5.tmp" "$OUT/model.h5"
    echo "== $OUT/model.h5: evaluate with"
    echo "   $GLIMPSE eval letr --checkpoint $OUT/model.h5 --data procedural:200:1000:256x192 --layers all"
    exit 0
}
