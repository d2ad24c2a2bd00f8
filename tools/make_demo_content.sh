#!/usr/bin/env bash
# Makes the demo content that ships in resources/demo/ (issue 52 part 3; `glimpse --demo`, the
# Demo menu, app/demo/demo_menu.h):
#   demon_agent.h5, alien_agent.h5         EfficientZero agents of one shooter and one maze
#   demon_episode.h5, alien_episode.h5     one greedy episode of each, recorded by `glimpse play
#                                          --record` (frames, observations, root visits, the root
#                                          children's Q and prior, the network's value, policy and
#                                          value prefix; the agent beside it, so the replay viewer
#                                          loads it and checks the world model against the game)
#   worldmodel.md                          `glimpse eval worldmodel` on both episodes (the agent
#                                          against an untrained network)
#   xtra_finetune/runlog.h5, config.json   the run log of one short XTRA finetuning run with its
#                                          task-weight curves (and the config it ran with)
#
# usage: tools/make_demo_content.sh            (from the repository root; resumes: finished
#                                               stages are skipped, a killed training resumes)
# Environment:
#   GLIMPSE   glimpse binary [build/app/glimpse]
#   WORK      scratch directory [runs/demo_content]
#   AGENTS    a folder with demon.h5 / alien.h5 models to ship instead of training them here
#             (e.g. runs of tools/ez_study.sh); the training stage is then skipped
#   DEMON_SEED=0 DEMON_STEPS=22000  ALIEN_SEED=0 ALIEN_STEPS=16000   the agents' training
#             (tools/ez_study_shooter.json and tools/ez_study.json, docs/rl.md "Learning figures":
#             about an hour each on one core)
#   STAGES    the stages to run [agents record worldmodel xtra] (each skips what it finished)
#   NICE [15]  THREADS [1]  EPISODE_SEED [1000000]  SIMULATIONS [16]
#   XTRA_STEPS [120]  the finetuning run's learner updates (the sizes below are for a loaded
#             2-core machine: minutes, not hours; the task weights are re-measured every 20
#             updates after a 20-update warm-up)
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
case "${1:-}" in -h|--help) sed -n '2,30p' "$0"; exit 0 ;; esac
GLIMPSE="$(realpath "${GLIMPSE:-$here/build/app/glimpse}")"
WORK="${WORK:-runs/demo_content}"
mkdir -p "$WORK"
WORK="$(realpath "$WORK")"
DEST="$here/resources/demo"
AGENTS="${AGENTS:-}"
DEMON_SEED="${DEMON_SEED:-0}"
DEMON_STEPS="${DEMON_STEPS:-22000}"
ALIEN_SEED="${ALIEN_SEED:-0}"
ALIEN_STEPS="${ALIEN_STEPS:-16000}"
NICE="${NICE:-15}"
THREADS="${THREADS:-1}"
EPISODE_SEED="${EPISODE_SEED:-1000000}"
SIMULATIONS="${SIMULATIONS:-16}"
XTRA_STEPS="${XTRA_STEPS:-120}"
STAGES=" ${STAGES:-agents record worldmodel xtra} "
stage() { [[ "$STAGES" == *" $1 "* ]]; }
mkdir -p "$DEST"
g() { nice -n "$NICE" "$GLIMPSE" "$@"; }
finished() { [[ -f "$1" ]] && tr '\r' '\n' <"$1" | grep -qE '^finished'; }

# --- 1. the agents ---------------------------------------------------------------------------
agent() {   # GAME SEED STEPS CONFIG DISCOUNT
    local game=$1 seed=$2 steps=$3 config=$4 run="$WORK/$1_s$2"
    if [[ -n "$AGENTS" ]]; then
        [[ -f "$AGENTS/$game.h5" ]] || { echo "make_demo_content: no $AGENTS/$game.h5" >&2; exit 1; }
        cp "$AGENTS/$game.h5" "$DEST/.${game}_agent.h5.tmp"
    else
        if ! finished "$run.log"; then
            echo "training $game (seed $seed, $steps updates) in $run ..."
            g train efficientzero --env "$game" --seed "$seed" --steps "$steps" --config "$here/tools/$config" \
                --out "$run" --threads "$THREADS" >>"$run.log" 2>&1
        fi
        cp "$run/model.h5" "$DEST/.${game}_agent.h5.tmp"
    fi
    mv "$DEST/.${game}_agent.h5.tmp" "$DEST/${game}_agent.h5"
}
if stage agents; then
    agent demon "$DEMON_SEED" "$DEMON_STEPS" ez_study_shooter.json
    agent alien "$ALIEN_SEED" "$ALIEN_STEPS" ez_study.json
fi

# --- 2. one recorded greedy episode of each (the checkpoint named relative: beside it) ---------
for game in demon alien; do
    stage record || break
    rec="$WORK/record_$game"
    rm -rf "$rec"
    ( cd "$DEST" && g play --checkpoint "${game}_agent.h5" --env "$game" --episodes 1 --seed "$EPISODE_SEED" \
        --simulations "$SIMULATIONS" --threads "$THREADS" --record "$rec" ) | tee "$WORK/record_$game.txt"
    cp "$rec/episode_0000.h5" "$DEST/.${game}_episode.h5.tmp"
    mv "$DEST/.${game}_episode.h5.tmp" "$DEST/${game}_episode.h5"
done

# --- 3. the world model against the game, the agent beside an untrained network ---------------
stage worldmodel && {
    echo "# The world model checked against the game (glimpse eval worldmodel, made by tools/make_demo_content.sh)"
    for spec in demon:0.97 alien:0.997; do
        game=${spec%%:*}
        echo
        echo "## $game"
        echo
        ( cd "$DEST" && g eval worldmodel "${game}_episode.h5" --discount "${spec#*:}" --markdown --threads "$THREADS" )
    done
} >"$WORK/worldmodel.md" && cp "$WORK/worldmodel.md" "$DEST/worldmodel.md"
stage xtra || { ls -la "$DEST"; exit 0; }

# --- 4. a short XTRA finetuning run (docs/xtra.md): offline data of two shooters and a maze
# (the scripted player, epsilon 0 / 0.5), small teachers, a distilled student, then finetuning
# on shared:demon with adaptive task weights --------------------------------------------------
X="$WORK/xtra"
mkdir -p "$X"
NET='"network": {"channels": 8, "lstm_hidden": 16, "reduced_channels_reward": 4, "reduced_channels_value": 4, "reduced_channels_policy": 4, "support_size": 20, "proj_hidden": 32, "proj_out": 32, "pred_hidden": 16, "reward_hidden": [16], "value_hidden": [16], "policy_hidden": [16]}'
echo "{\"num_envs\": 4, \"simulations\": 8, \"max_episode_steps\": 200, \"batch_size\": 16, \"min_replay\": 200, \"checkpoint_interval\": 50, \"log_interval\": 5, \"warmup_steps\": 10, \"lr\": 0.05, \"lr_final\": 0.005, $NET}" >"$X/teacher.json"
SRC=""
for game in invaders breakout pellets; do
    [[ -f "$X/data_$game.h5" ]] || g data offline --env "$game" --policy scripted --epsilon 0,0.5 --steps 2000 --envs 4 \
        --max-episode-steps 250 --out "$X/data_$game.h5" >"$X/data_$game.log" 2>&1
    finished "$X/t_$game.log" || g train efficientzero --env "$game" --steps 60 --config "$X/teacher.json" \
        --out "$X/t_$game" --threads "$THREADS" >>"$X/t_$game.log" 2>&1
    SRC+="${SRC:+, }{\"dataset\": \"$X/data_$game.h5\", \"teacher\": \"$X/t_$game/model.h5\"}"
done
echo "{\"sources\": [$SRC], \"steps\": 60, \"batch_size\": 24}" >"$X/pretrain.json"
finished "$X/student.log" || g train xtra-pretrain --config "$X/pretrain.json" --out "$X/student" --threads "$THREADS" \
    >>"$X/student.log" 2>&1
echo "{\"env\": \"shared:demon\", \"steps\": $XTRA_STEPS, \"seed\": 0, \"num_envs\": 4, \"simulations\": 8, \"batch_size\": 16, \"min_replay\": 200, \"max_episode_steps\": 200, \"checkpoint_interval\": 20, \"log_interval\": 1, \"warmup_steps\": 5, \"td_steps\": 10, \"discount\": 0.97, \"init\": \"$X/student/model.h5\", \"xtra\": {\"sources\": [$SRC], \"weights\": \"adaptive\", \"offline_batch_size\": 8, \"task_weights\": {\"cycle\": 20, \"window\": 5, \"threshold\": 0.1, \"warmup\": 20}}}" >"$X/finetune.json"
finished "$X/finetune.log" || g train xtra --config "$X/finetune.json" --out "$X/finetune" --threads "$THREADS" \
    >>"$X/finetune.log" 2>&1
mkdir -p "$DEST/xtra_finetune"
cp "$X/finetune/runlog.h5" "$DEST/xtra_finetune/.runlog.h5.tmp" && mv "$DEST/xtra_finetune/.runlog.h5.tmp" "$DEST/xtra_finetune/runlog.h5"
sed "s|$X/||g" "$X/finetune.json" >"$DEST/xtra_finetune/config.json"
ls -la "$DEST" "$DEST/xtra_finetune"
