#!/usr/bin/env bash
# Trains EfficientZero agents for the demo content (issue 52 part 3) on a many-core machine
# (docs/gpu.md): several seeds of one shooter and one maze side by side, one LibTorch thread
# each, within a fixed wall time; evaluates every run greedily and keeps the best run per game.
# The EfficientZero learner runs on the CPU (no --device for it yet); the evaluation uses the
# GPU when there is one (glimpse play --device cuda).
#
# usage: tools/gpu/agents.sh BUILD_DIR OUTDIR
#   BUILD_DIR  a build with BUILD_DIR/app/glimpse (tools/gpu/build_gpu.sh, or this machine's build)
#   OUTDIR     gets at most 3 files: SHOOTER.h5 and MAZE.h5 (the best run's model.h5 of each game)
#              and agents_summary.tar.gz (per run: train log tail, evaluation, runlog.h5 of the
#              two kept runs, summary.txt)
# Environment (defaults: the GPU call, 6 minutes of wall time, 12 processes):
#   SHOOTER=demon MAZE=pellets      the games
#   SHOOTER_SEEDS="0 1 2 3 4 5 6"   MAZE_SEEDS="0 1 2 3 4"   one process per seed
#   SHOOTER_STEPS=1200 MAZE_STEPS=1200   learner updates per run (the schedules span them)
#   TRAIN_S=255      wall seconds for training; a run still going then is stopped with SIGINT,
#                    which writes its checkpoint (model.h5 is also written every 100 updates)
#   EVAL_EPISODES=12 EVAL_S=75 EVAL_SIMS=16   greedy evaluation per run (1000-step episodes; a run
#                    whose evaluation is cut by EVAL_S has no score and is not kept)
#   DEVICE=auto      cuda when nvidia-smi sees a GPU, else cpu (evaluation only)
#   WORK=OUTDIR/../agents_work   where the runs go (not part of the output)
# Configs: tools/ez_study_shooter.json for the shooter, tools/ez_study.json for the maze
# (docs/rl.md "Learning figures"). Every run's model.h5 is a usable agent even when stopped early.
set -uo pipefail

here="$(cd "$(dirname "$0")/../.." && pwd)"
case "${1:-}" in -h|--help|"") sed -n '2,24p' "$0"; exit 0 ;; esac
BUILD="$(realpath "$1")"
OUT="${2:?usage: tools/gpu/agents.sh BUILD_DIR OUTDIR}"
GLIMPSE="$BUILD/app/glimpse"
[[ -x "$GLIMPSE" ]] || { echo "agents.sh: no $GLIMPSE" >&2; exit 1; }
mkdir -p "$OUT"
OUT="$(realpath "$OUT")"
WORK="${WORK:-$(dirname "$OUT")/agents_work}"
SHOOTER="${SHOOTER:-demon}"
MAZE="${MAZE:-pellets}"
SHOOTER_SEEDS="${SHOOTER_SEEDS:-0 1 2 3 4 5 6}"
MAZE_SEEDS="${MAZE_SEEDS:-0 1 2 3 4}"
SHOOTER_STEPS="${SHOOTER_STEPS:-1200}"
MAZE_STEPS="${MAZE_STEPS:-1200}"
TRAIN_S="${TRAIN_S:-255}"
EVAL_EPISODES="${EVAL_EPISODES:-12}"
EVAL_S="${EVAL_S:-75}"
EVAL_SIMS="${EVAL_SIMS:-16}"
DEVICE="${DEVICE:-auto}"
if [[ "$DEVICE" == auto ]]; then
    DEVICE=cpu
    command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && DEVICE=cuda
fi
mkdir -p "$WORK"
start=$(date +%s)
echo "agents.sh: $SHOOTER seeds [$SHOOTER_SEEDS] x $SHOOTER_STEPS, $MAZE seeds [$MAZE_SEEDS] x $MAZE_STEPS updates;" \
     "training ${TRAIN_S}s, evaluation on $DEVICE; runs in $WORK"

# --- training: one process per (game, seed), one thread each ---------------------------------
runs=()
pids=()
for spec in "$SHOOTER:$SHOOTER_STEPS:$here/tools/ez_study_shooter.json:$SHOOTER_SEEDS" \
            "$MAZE:$MAZE_STEPS:$here/tools/ez_study.json:$MAZE_SEEDS"; do
    IFS=: read -r game steps config seeds <<<"$spec"
    for s in $seeds; do
        run="$WORK/${game}_s$s"
        runs+=("$run")
        timeout -s INT -k 30 "$TRAIN_S" "$GLIMPSE" train efficientzero --env "$game" --seed "$s" --steps "$steps" \
            --out "$run" --config "$config" --threads 1 >"$run.train.log" 2>&1 &
        pids+=($!)
    done
done
# Until the evaluation has ranked them: seed runs' models as they come (a kill leaves agents).
keep_first() {   # GAME
    local m
    for m in "$WORK/$1"_s*/model.h5; do
        [[ -f "$m" ]] && { cp "$m" "$OUT/.$1.h5.tmp" && mv "$OUT/.$1.h5.tmp" "$OUT/$1.h5"; return; }
    done
}
while :; do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && break
    sleep 10
    [[ -f "$OUT/$SHOOTER.h5" ]] || keep_first "$SHOOTER"
    [[ -f "$OUT/$MAZE.h5" ]] || keep_first "$MAZE"
done
wait
echo "agents.sh: training done after $(( $(date +%s) - start )) s"
keep_first "$SHOOTER"
keep_first "$MAZE"

# --- evaluation: every run, greedy, side by side ---------------------------------------------
pids=()
for run in "${runs[@]}"; do
    [[ -f "$run/model.h5" ]] || continue
    game="$(basename "$run")"
    game="${game%_s*}"
    timeout -s INT -k 10 "$EVAL_S" "$GLIMPSE" play --checkpoint "$run/model.h5" --env "$game" \
        --episodes "$EVAL_EPISODES" --simulations "$EVAL_SIMS" --threads 1 --device "$DEVICE" >"$run.eval.txt" 2>&1 &
    pids+=($!)
done
wait
echo "agents.sh: evaluation done after $(( $(date +%s) - start )) s"

# --- the best run per game (mean evaluation return) -------------------------------------------
summary="$WORK/summary.txt"
{
    echo "run updates env_steps eval_mean eval_ci95 normalized"
    for run in "${runs[@]}"; do
        upd=$(grep -ao '^\(stopped\|finished\): [0-9]* updates' "$run.train.log" | tail -1 | grep -o '[0-9][0-9]*')
        env=$(grep -ao '[0-9]* environment steps' "$run.train.log" | tail -1 | grep -o '^[0-9]*')
        mean=$(sed -n 's/^return: mean \([-0-9.]*\) +- \([0-9.]*\).*/\1 \2/p' "$run.eval.txt" 2>/dev/null)
        norm=$(sed -n 's/^normalized score: mean \([-0-9.]*\).*/\1/p' "$run.eval.txt" 2>/dev/null)
        echo "$(basename "$run") ${upd:--} ${env:--} ${mean:-- -} ${norm:--}"
    done
} >"$summary"
cat "$summary"
best() {   # GAME -> the run with the highest evaluation mean
    awk -v g="$1_s" 'NR > 1 && index($1, g) == 1 && $4 != "-" { if (!f || $4 > m) { m = $4; r = $1; f = 1 } } END { print r }' "$summary"
}
keep=()
for game in "$SHOOTER" "$MAZE"; do
    b="$(best "$game")"
    if [[ -n "$b" ]]; then
        cp "$WORK/$b/model.h5" "$OUT/.$game.h5.tmp" && mv "$OUT/.$game.h5.tmp" "$OUT/$game.h5"
        echo "best $game: $b" >>"$summary"
        keep+=("$b/runlog.h5")
    fi
done
( cd "$WORK" && tar czf "$OUT/.agents_summary.tar.gz.tmp" summary.txt ./*.train.log ./*.eval.txt "${keep[@]}" 2>/dev/null ) &&
    mv "$OUT/.agents_summary.tar.gz.tmp" "$OUT/agents_summary.tar.gz"
ls -la "$OUT"
echo "agents.sh: finished after $(( $(date +%s) - start )) s"
