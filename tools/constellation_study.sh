#!/usr/bin/env bash
# The ConstellationNet trend study (issue 54 part 4; docs/decisions.md "ConstellationNet trend on
# the composition family"): the ProtoNet baseline (single branch, no constellation modules) and
# ConstellationNet (multi-branch: constellation modules in branch 1, plain branch 2 with the
# prototypical loss; feature augmentation) trained with the same budget, data and seeds, then
# 600 5-way 1-shot and 5-shot episodes (15 queries) on the novel classes, 95% CIs, and a
# markdown table.
#
# usage: tools/constellation_study.sh [--out DIR] [--data SPEC] [--backbones conv4,resnet12]
#                                     [--seeds 0,1,2] [--models baseline,constellation,baseline-mb]
#                                     [--steps N] [--batch B] [--episodes E] [--jobs J]
#                                     [--glimpse BIN] [--no-eval] [--table-only]
#   --out DIR        runs and results (default runs/constellation_study): DIR/<backbone>/s<seed>/<model>/
#                    (run.h5, model.h5, eval.json, log.txt), DIR/table.md
#   --data SPEC      few-shot data spec (default composition: colour carries no class information)
#   --models M       baseline, constellation (default both) and the ablation baseline-mb (the
#                    multi-branch model without constellation modules: branch 2's prototypical
#                    loss without the modules)
#   --steps N        training steps per run (default 300), batch B (default 32) images per step
#   --episodes E     evaluation episodes per shot count (default 600)
#   --jobs J         runs at the same time (default 2), each with 1 thread under nice -n 19
#   --no-eval        train only (a later call without it evaluates the finished runs)
#   --table-only     only (re)write the table from the finished runs
# Finished runs (model.h5 + eval.json) are kept, an interrupted one resumes from its checkpoint,
# so the script can be stopped and started again. Every run uses the same recipe (AdamW, warmup
# + cosine, flip + pad-crop 4, docs/decisions.md "ConstellationNet training"); the evaluation
# episodes of a seed are the same for both models (eval fewshot --seed 1000 + seed).
#
# CPU budget (1 thread, 32x32, batch 32; CPU seconds measured on this 2-core EPYC VM, docs/
# decisions.md "ConstellationNet trend on the composition family"): Conv-4 baseline 0.08 s per
# step (300 steps: 25 s), Conv-4 ConstellationNet multi-branch 0.42 s per step (300 steps:
# 125 s); evaluation of 1200 episodes (each novel image's features computed once) 28 s and
# 49 s: the Conv-4 half of the default (3 seeds, 300 steps) is ~12 CPU-minutes. ResNet-12
# (widths 64-290) was not run here: budget it at 10-20x Conv-4 per step (--backbones conv4
# leaves it out).
set -euo pipefail

out=runs/constellation_study data=composition backbones=conv4,resnet12 seeds=0,1,2
models=baseline,constellation steps=300 batch=32 episodes=600 jobs=2 table_only=0 no_eval=0
bin="$(cd "$(dirname "$0")/.." && pwd)/build/app/glimpse"
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --backbones) backbones=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --episodes) episodes=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --glimpse) bin=$2; shift 2 ;;
    --no-eval) no_eval=1; shift ;;
    --table-only) table_only=1; shift ;;
    -h | --help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "constellation_study.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in steps batch episodes jobs; do
    case "${!v}" in '' | *[!0-9]*) echo "constellation_study.sh: --$v '${!v}' is not a positive integer" >&2; exit 2 ;; esac
    [ "${!v}" -gt 0 ] || { echo "constellation_study.sh: --$v must be > 0" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "constellation_study.sh: no glimpse binary at $bin (build it or give --glimpse)" >&2; exit 1; }
mkdir -p "$out"

# One run: train (or resume, or skip when finished), then evaluate once.
run_one() {
    local backbone=$1 seed=$2 model=$3
    local dir="$out/$backbone/s$seed/$model" warm=$((steps / 10))
    mkdir -p "$dir"
    exec 9>"$dir/.lock"
    if ! flock -n 9; then
        echo "$dir: another study process is running this run; skipped" >&2
        return 0
    fi
    if [ ! -f "$dir/model.h5" ]; then
        cat >"$dir/config.json" <<EOF
{"model": {"backbone": "$backbone", "clusters": 64, "image_size": 32}, "seed": $seed, "batch_size": $batch,
 "steps": $steps, "warmup_steps": $warm, "lr": 2e-3, "min_lr": 1e-5, "weight_decay": 5e-4,
 "augment": {"hflip": 0.5, "pad_crop": 4}, "val_every": 0, "val_episodes": 20, "final_episodes": 0,
 "checkpoint_every": 50}
EOF
        local flag=--baseline resume=
        [ "$model" = constellation ] && flag=--multi-branch
        [ "$model" = baseline-mb ] && flag="--baseline --multi-branch"
        [ -f "$dir/checkpoint.h5" ] && resume=--resume
        echo "[$(date -u +%H:%M:%S)] train $backbone seed $seed $model"
        /usr/bin/time -f "train cpu %U+%S s wall %e s" nice -n 19 "$bin" train constellation --data "$data" \
            --out "$dir" --config "$dir/config.json" $flag $resume --threads 1 >>"$dir/log.txt" 2>&1
    fi
    if [ "$no_eval" = 0 ] && [ ! -f "$dir/eval.json" ]; then
        echo "[$(date -u +%H:%M:%S)] eval $backbone seed $seed $model"
        OMP_NUM_THREADS=1 /usr/bin/time -f "eval cpu %U+%S s wall %e s" nice -n 19 "$bin" eval fewshot \
            --checkpoint "$dir/model.h5" --data "$data" --shots 1,5 --episodes "$episodes" \
            --seed $((1000 + seed)) --json "$dir/eval.json.tmp" >>"$dir/log.txt" 2>&1
        mv "$dir/eval.json.tmp" "$dir/eval.json"
    fi
    echo "[$(date -u +%H:%M:%S)] done $backbone seed $seed $model"
}

if [ "$table_only" = 0 ]; then
    running=0
    for backbone in ${backbones//,/ }; do
        for seed in ${seeds//,/ }; do
            for model in ${models//,/ }; do
                run_one "$backbone" "$seed" "$model" &
                running=$((running + 1))
                if [ "$running" -ge "$jobs" ]; then
                    wait -n || echo "constellation_study.sh: a run failed (see its log.txt)" >&2
                    running=$((running - 1))
                fi
            done
        done
    done
    while [ "$running" -gt 0 ]; do
        wait -n || echo "constellation_study.sh: a run failed (see its log.txt)" >&2
        running=$((running - 1))
    done
fi

python3 "$(dirname "$0")/constellation_study_table.py" "$out" "$data" "$steps" "$batch" >"$out/table.md.tmp"
mv "$out/table.md.tmp" "$out/table.md"
cat "$out/table.md"
