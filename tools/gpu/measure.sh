#!/usr/bin/env bash
# On a GPU server, after tools/gpu/build_gpu.sh: the GPU parity check and the timings that
# docs/gpu.md reports, each step's output in LOGDIR/<step>.log (and on the terminal).
#
# usage: tools/gpu/measure.sh [BUILD_DIR] [LOGDIR] [STEP ...]
#   BUILD_DIR  default build-gpu;  LOGDIR  default gpu-logs
#   STEP       any of: smi check bench train play (default: all)
# A step that fails is reported and the next one still runs; the exit status is 1 when any failed.
set -uo pipefail

here="$(cd "$(dirname "$0")/../.." && pwd)"
case "${1:-}" in -h|--help) sed -n '2,9p' "$0"; exit 0 ;; esac
BUILD="${1:-$here/build-gpu}"
LOG="${2:-$here/gpu-logs}"
shift 2 2>/dev/null || shift $#
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(smi check bench train play)
G="$BUILD/app/glimpse"
[ -x "$G" ] || { echo "measure.sh: $G is not built (tools/gpu/build_gpu.sh)" >&2; exit 1; }
mkdir -p "$LOG"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0

run() {   # run NAME COMMAND...: the command's output to the terminal and LOG/NAME.log
    local name="$1"
    shift
    echo "== $name: $*"
    local t0=$SECONDS
    "$@" 2>&1 | tee "$LOG/$name.log"
    local rc=${PIPESTATUS[0]}
    echo "== $name: exit $rc after $((SECONDS - t0)) s"
    [ "$rc" -eq 0 ] || failed=1
}

square_image() {   # square_image S: a procedural S x S scene, printed path
    "$G" data export --data "procedural:1:7:${1}x${1}" --out "$work/img$1" >/dev/null 2>&1 &&
        echo "$work/img$1/images/000000.png"
}

for s in "${steps[@]}"; do
    case "$s" in
    smi)
        run smi nvidia-smi
        ;;
    check)
        # fp32 parity, CPU against the GPU, on the same weights and inputs (LETR R50 with 1000
        # entities at 512 and at 1100, CoaT-Lite Tiny, the EfficientZero network).
        run check_device "$G" check device
        run check_device_1100 "$G" check device --only letr --size 1100
        ;;
    bench)
        declare -A img=()
        for size in 512 1100; do
            img[$size]="$(square_image "$size")" || { echo "measure.sh: data export failed" >&2; failed=1; continue; }
            # With the trace (what the inspector needs), then lines only in fp32, TF32 and bf16.
            run "bench_letr_cuda_${size}_trace" "$G" bench letr --device cuda --backbone resnet50 --queries 1000 \
                --image "${img[$size]}" --short-side "$size" --runs 20 --warmup 5
            for prec in fp32 tf32 bf16; do
                extra=(--autocast "$prec")
                [ "$prec" = tf32 ] && extra=(--tf32)
                run "bench_letr_cuda_${size}_$prec" "$G" bench letr --device cuda --backbone resnet50 --queries 1000 \
                    --image "${img[$size]}" --short-side "$size" --runs 20 --warmup 5 --no-record "${extra[@]}"
            done
        done
        for batch in 1 64; do
            run "bench_coat_cuda_b$batch" "$G" bench coat --variant coat_lite_tiny --device cuda --batch "$batch" \
                --runs 20 --warmup 5
            run "bench_coat_cuda_b${batch}_tf32" "$G" bench coat --variant coat_lite_tiny --device cuda --batch "$batch" \
                --runs 20 --warmup 5 --tf32
        done
        [ -n "${img[512]:-}" ] &&
            run bench_letr_cpu_512 "$G" bench letr --device cpu --backbone resnet50 --queries 1000 \
                --image "${img[512]}" --short-side 512 --runs 3 --warmup 1 --threads "$(nproc)"
        ;;
    train)
        # The procedural recipe's stage 2 on the GPU for 300 steps, from scratch: throughput
        # and a working loop (checkpoint, validation, resume on the CPU).
        run train_letr_cuda "$G" train letr --config "$here/resources/letr_demo_hires.json" \
            --data procedural:100000:1:256x192 --out "$work/train" --steps 300 --device cuda
        run train_letr_resume_cpu "$G" train letr --config "$here/resources/letr_demo_hires.json" \
            --data procedural:100000:1:256x192 --out "$work/train" --steps 302 --device cpu --resume
        ;;
    play)
        # EfficientZero's MCTS with batched inference on the GPU (an untrained network: the
        # speed does not depend on the weights).
        run ez_init "$G" train efficientzero --env breakout --steps 1 --min-replay 16 --out "$work/ez"
        run play_cuda "$G" play --checkpoint "$work/ez/model.h5" --env breakout --episodes 16 \
            --simulations 50 --max-episode-steps 200 --device cuda
        run play_cpu "$G" play --checkpoint "$work/ez/model.h5" --env breakout --episodes 16 \
            --simulations 50 --max-episode-steps 200 --device cpu --threads "$(nproc)"
        ;;
    *)
        echo "measure.sh: unknown step '$s'" >&2
        failed=1
        ;;
    esac
done
exit "$failed"
