#!/usr/bin/env bash
# XTRA study (issue 20, docs/xtra.md "Study"): pretrain on three shooters, finetune (a) on the
# fourth shooter and (b) on a maze, against EfficientZero from scratch, pretraining without
# concurrent finetuning, and concurrent finetuning with constant weights; every variant gets the
# same learner-update (hence environment-step) budget and wall-clock limit, then 32 greedy
# evaluation episodes with `glimpse play`. Prints per target and variant the mean and 95% CI
# (Student t over seeds) of the return and the normalized score.
#
# usage: tools/xtra_study.sh [--summarize]
# Environment (defaults in brackets):
#   GLIMPSE   glimpse binary [build/app/glimpse]
#   OUT       study directory [runs/xtra_study]
#   SOURCES   pretraining games [invaders sub breakout]
#   TARGETS   finetuning games [demon pellets]
#   VARIANTS  [scratch pretrained constant xtra]
#   SEEDS     finetuning seeds [0 1 2]
#   TEACHER_STEPS  updates of each teacher (EfficientZero on its game, seed 0) [2000]
#   TEACHERS  teachers to use instead of training them, as "game=RUN_DIR ..." (finished
#             EfficientZero runs, e.g. the long-budget runs of tools/ez_study.sh BUDGET=long; the
#             run's replay becomes the game's dataset) or "game=AGENT.h5 ..." (a trained agent,
#             e.g. resources/demo/demon_agent.h5; its dataset is DATA_STEPS transitions of its own
#             play, epsilon-greedy over DATA_EPSILON, the mixed-quality data of 5.7.6) []
#   DATA_STEPS [12000]  DATA_EPSILON [0,0.25,0.5,1]   the datasets of agent teachers
#   JOBS      finetuning runs side by side (one LibTorch thread each with THREADS=1) [1]
#   PRE_STEPS      distillation updates [3000]
#   STEPS     finetuning updates per run [2000]
#   MINUTES   wall-clock limit per training run (SIGINT: final checkpoint) [30]
#   THREADS   LibTorch threads per run [1];  NICE  niceness [10];  EPISODES [32]
#   OFFLINE_BATCH  positions of each offline task per update [32]
#   CYCLE WINDOW WARMUP  the task weights' cycle T, window N and warm-up, in updates [200 20 200]
#   RECORD    finetuning runs record a self-play episode every RECORD updates [500] (RUN/episodes,
#             shown with the task weights in force by the replay viewer)
# Teachers are EfficientZero runs of the source games (tools/ez_study_shooter.json); each
# teacher's replay buffer is its game's offline dataset (glimpse data offline --from-run), i.e.
# what the agent played from its first random moves to the end, as the dissertation's datasets
# hold trajectories of checkpoints from early to late training (5.7.6). Finished steps are
# skipped, so an interrupted study continues.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
GLIMPSE="${GLIMPSE:-$here/build/app/glimpse}"
OUT="${OUT:-runs/xtra_study}"
SOURCES="${SOURCES:-invaders sub breakout}"
TARGETS="${TARGETS:-demon pellets}"
VARIANTS="${VARIANTS:-scratch pretrained constant xtra}"
SEEDS="${SEEDS:-0 1 2}"
TEACHER_STEPS="${TEACHER_STEPS:-2000}"
TEACHERS="${TEACHERS:-}"
PRE_STEPS="${PRE_STEPS:-3000}"
STEPS="${STEPS:-2000}"
MINUTES="${MINUTES:-30}"
THREADS="${THREADS:-1}"
NICE="${NICE:-10}"
EPISODES="${EPISODES:-32}"
DATA_STEPS="${DATA_STEPS:-12000}"
DATA_EPSILON="${DATA_EPSILON:-0,0.25,0.5,1}"
JOBS="${JOBS:-1}"
RECORD="${RECORD:-500}"
OFFLINE_BATCH="${OFFLINE_BATCH:-32}"
CYCLE="${CYCLE:-200}"
WINDOW="${WINDOW:-20}"
WARMUP="${WARMUP:-200}"
case "${1:-}" in
    --summarize) summarize_only=1 ;;
    "") summarize_only=0 ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    *) echo "xtra_study.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
run() { timeout -s INT "$((MINUTES * 60))" nice -n "$NICE" "$GLIMPSE" "$@"; }
finished() { [[ -f "$1" ]] && tr '\r' '\n' <"$1" | grep -qE '^(finished|stopped)'; }

if [[ $summarize_only == 0 ]]; then
    [[ -x "$GLIMPSE" ]] || { echo "xtra_study.sh: no glimpse binary at $GLIMPSE (set GLIMPSE)" >&2; exit 1; }
    mkdir -p "$OUT"
    sources_json=""
    for g in $SOURCES; do
        t="$OUT/teacher-$g"
        given=""
        for kv in $TEACHERS; do
            [[ $kv == *=* ]] || { echo "xtra_study.sh: TEACHERS entry '$kv' is not game=RUN_DIR" >&2; exit 2; }
            [[ ${kv%%=*} == "$g" ]] && given="${kv#*=}"
        done
        if [[ -n "$given" && -f "$given" ]]; then
            # A trained agent: the dataset is its own epsilon-greedy play.
            [[ -f "$OUT/data-$g.h5" ]] ||
                "$GLIMPSE" data offline --env "$g" --policy agent --checkpoint "$given" --epsilon "$DATA_EPSILON" \
                    --steps "$DATA_STEPS" --seed 0 --threads "$THREADS" --out "$OUT/data-$g.h5" | tail -1
            sources_json+="${sources_json:+, }{\"dataset\": \"$OUT/data-$g.h5\", \"teacher\": \"$given\"}"
            continue
        elif [[ -n "$given" ]]; then
            [[ -f "$given/model.h5" && -f "$given/state.h5" ]] ||
                { echo "xtra_study.sh: teacher run '$given' for $g has no model.h5 and state.h5" >&2; exit 1; }
            t="$given"
        elif ! finished "$t.log"; then
            echo "$t: training the teacher ($(date +%H:%M:%S))"
            rm -rf "$t"
            run train efficientzero --env "$g" --seed 0 --steps "$TEACHER_STEPS" \
                --config "$here/tools/ez_study_shooter.json" --out "$t" --threads "$THREADS" >"$t.log" 2>&1 || true
            finished "$t.log" || { echo "$t: failed, see $t.log" >&2; exit 1; }
        fi
        [[ -f "$OUT/data-$g.h5" ]] || "$GLIMPSE" data offline --from-run "$t" --out "$OUT/data-$g.h5" | tail -1
        sources_json+="${sources_json:+, }{\"dataset\": \"$OUT/data-$g.h5\", \"teacher\": \"$t/model.h5\"}"
    done
    student="$OUT/student"
    if ! finished "$student.log"; then
        echo "{\"sources\": [$sources_json], \"steps\": $PRE_STEPS, \"batch_size\": 96}" >"$OUT/pretrain.json"
        echo "$student: distilling ($(date +%H:%M:%S))"
        rm -rf "$student"
        run train xtra-pretrain --config "$OUT/pretrain.json" --out "$student" --threads "$THREADS" >"$student.log" 2>&1 || true
        [[ -f "$student/model.h5" ]] || { echo "$student: failed, see $student.log" >&2; exit 1; }
    fi
    base=$(sed 's/}$//' "$here/tools/ez_study_shooter.json")
    # One finetuning run and its evaluation (a run already evaluated is skipped).
    finetune() {
        local target=$1 s=$2 v=$3 r="$OUT/$1-$3-$2"
        [[ -f "$r/eval.txt" ]] && { echo "$r: evaluated already"; return 0; }
        if ! finished "$r.log"; then
            rm -rf "$r"
            echo "$r: training ($(date +%H:%M:%S))"
            run train xtra --config "$OUT/$target-$v.json" --seed "$s" --steps "$STEPS" --out "$r" \
                --threads "$THREADS" >"$r.log" 2>&1 || true
        fi
        [[ -f "$r/model.h5" ]] || { echo "$r: failed, see $r.log" >&2; return 1; }
        nice -n "$NICE" "$GLIMPSE" play --checkpoint "$r/model.h5" --env "shared:$target" --episodes "$EPISODES" \
            --simulations 16 --threads "$THREADS" >"$r/eval.tmp" 2>/dev/null
        mv "$r/eval.tmp" "$r/eval.txt"
        grep -E "^return|^normalized" "$r/eval.txt" | sed "s|^|$r: |"
    }
    failed=0 running=0
    for target in $TARGETS; do
        for v in $VARIANTS; do
            case $v in
                scratch) extra='' ;;
                pretrained) extra=", \"init\": \"$student/model.h5\"" ;;
                constant | xtra)
                    w=$([[ $v == xtra ]] && echo adaptive || echo constant)
                    extra=", \"init\": \"$student/model.h5\", \"xtra\": {\"sources\": [$sources_json], \"weights\": \"$w\", \"offline_batch_size\": $OFFLINE_BATCH, \"task_weights\": {\"cycle\": $CYCLE, \"window\": $WINDOW, \"threshold\": 0.1, \"warmup\": $WARMUP}}" ;;
                *) echo "xtra_study.sh: unknown variant $v" >&2; exit 2 ;;
            esac
            echo "$base, \"env\": \"shared:$target\", \"record_interval\": $RECORD$extra}" >"$OUT/$target-$v.json"
        done
        # Seeds outer, variants inner: a study cut short still has as many seeds of every variant.
        for s in $SEEDS; do
            for v in $VARIANTS; do
                if ((running >= JOBS)); then
                    wait -n || failed=1
                    running=$((running - 1))
                fi
                finetune "$target" "$s" "$v" &
                running=$((running + 1))
            done
        done
    done
    while ((running > 0)); do
        wait -n || failed=1
        running=$((running - 1))
    done
    ((failed == 0)) || { echo "xtra_study.sh: some runs failed (see above)" >&2; exit 1; }
fi

echo
echo "target   variant     seeds  return (mean +- 95% CI)   normalized (mean +- 95% CI)   per seed return"
for target in $TARGETS; do
    for v in $VARIANTS; do
        rets="" norms=""
        for s in $SEEDS; do
            f="$OUT/$target-$v-$s/eval.txt"
            [[ -f "$f" ]] || continue
            rets+=" $(awk '/^return:/ {print $3}' "$f")"
            norms+=" $(awk '/^normalized score:/ {gsub(",", "", $4); print $4}' "$f")"
        done
        echo "$target $v $rets | $norms" | awk '
            function t975(df) { split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228", t, " ")
                                return df <= 10 ? t[df] : 1.96 }
            function ci(a, n,   i, m, v) {
                m = 0; for (i = 1; i <= n; i++) m += a[i]; m /= n
                v = 0; for (i = 1; i <= n; i++) v += (a[i] - m) ^ 2
                if (n < 2) return sprintf("%8.3f            ", m)
                return sprintf("%8.3f +- %-8.3f", m, t975(n - 1) * sqrt(v / (n - 1)) / sqrt(n)) }
            { n = 0; k = 0; side = 0; list = ""
              for (i = 3; i <= NF; i++) { if ($i == "|") { side = 1; continue }
                  if (side == 0) { x[++n] = $i; list = list " " $i } else y[++k] = $i }
              if (n == 0) { printf "%-8s %-11s %5d  (no evaluated runs)\n", $1, $2, 0; next }
              printf "%-8s %-11s %5d  %s   %s   %s\n", $1, $2, n, ci(x, n), ci(y, k), list }'
    done
done
