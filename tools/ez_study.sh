#!/usr/bin/env bash
# Issue 7's learning study (docs/rl.md "Learning figures"): EfficientZero on arcade games,
# several seeds each, every run stopped after a fixed CPU wall-clock budget, then evaluated on
# 32 episodes with `glimpse play`. Prints, per game, the mean and 95% confidence interval (Student
# t over seeds) of the per-seed mean normalized score ((score - random) / (scripted - random)),
# and of the raw return.
#
# usage: tools/ez_study.sh [--summarize]
#   --summarize   only aggregate the eval.txt files already in $OUT (no training)
# Environment (defaults in brackets):
#   GLIMPSE   the glimpse binary [build/app/glimpse]
#   OUT       study directory; run g-s goes to $OUT/g-s [runs/ez_study]
#   GAMES     games [pellets alien breakout demon]
#   SEEDS     seeds [0 1 2 3 4]
#   MINUTES   wall-clock minutes per training run (stopped with SIGINT: final checkpoint)
#             [30; 180 with BUDGET=long, the issue's 3 hours per run]
#   STEPS     learner updates, the schedule's horizon (lr, temperature, beta) [per BUDGET]
#   BUDGET    the per-game updates when STEPS is not set [study]:
#             study  the first study (docs/rl.md "Learning figures"): 2000, demon 6000;
#             long   the eight-game table (docs/rl.md "All eight games"): demon 22000, alien 16000,
#                    sub 16000, heist 16000, invaders 10000, painter 4000, pellets and breakout
#                    2000
#   CONFIG    train config JSON [per game: tools/ez_study_shooter.json for invaders, demon and
#             breakout, tools/ez_study.json for the mazes and sub (its discount of 0.997, docs/rl.md
#             "Heist and sub again"); with BUDGET=long, sub takes tools/ez_study_uniform.json (the
#             same with uniform replay, docs/rl.md "Sub and heist with uniform replay") and heist
#             tools/ez_study_heist.json (uniform replay, lr 0.02 -> 0.002, docs/rl.md "Heist at a
#             lower learning rate")]
#   THREADS   LibTorch threads per run [1]
#   EPISODES  evaluation episodes per run [32]
#   SIMS      evaluation MCTS simulations [the config's "simulations", else 16]
#   NICE      niceness of every process [10]
# A run whose eval.txt exists is skipped and one whose training ended (finished, or stopped by
# the time limit) is only evaluated, so an interrupted study continues where it stopped. A run
# interrupted mid-training (Ctrl-C on this script, which stops the trainer at its next update
# and exits 3, or a killed shell or machine) resumes from its checkpoint with what is left of
# its MINUTES ($OUT/g-s.segments keeps the account); one killed before its first checkpoint is
# moved aside ($OUT/g-s.interrupted-DATE) and trained again from scratch.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
GLIMPSE="${GLIMPSE:-$here/build/app/glimpse}"
OUT="${OUT:-runs/ez_study}"
GAMES="${GAMES:-pellets alien breakout demon}"
SEEDS="${SEEDS:-0 1 2 3 4}"
if [[ "${BUDGET:-study}" == long ]]; then MINUTES="${MINUTES:-180}"; else MINUTES="${MINUTES:-30}"; fi
STEPS="${STEPS:-}"
CONFIG="${CONFIG:-}"
THREADS="${THREADS:-1}"
EPISODES="${EPISODES:-32}"
NICE="${NICE:-10}"
summarize_only=0
case "${1:-}" in
    --summarize) summarize_only=1 ;;
    "") ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    *) echo "ez_study.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
case "${BUDGET:-study}" in
    study|long) ;;
    *) echo "ez_study.sh: BUDGET is study or long, not '${BUDGET}'" >&2; exit 2 ;;
esac

if [[ $summarize_only == 0 ]]; then
    [[ -x "$GLIMPSE" ]] || { echo "ez_study.sh: no glimpse binary at $GLIMPSE (set GLIMPSE)" >&2; exit 1; }
    config_for() {  # the study's config for game $1
        if [[ -n "$CONFIG" ]]; then echo "$CONFIG"; return; fi
        case "${BUDGET:-study}:$1" in
            long:sub) echo "$here/tools/ez_study_uniform.json" ;;
            long:heist) echo "$here/tools/ez_study_heist.json" ;;
            *:invaders|*:demon|*:breakout) echo "$here/tools/ez_study_shooter.json" ;;
            *) echo "$here/tools/ez_study.json" ;;
        esac
    }
    steps_for() {  # the study's number of updates for game $1
        if [[ -n "$STEPS" ]]; then echo "$STEPS"; return; fi
        case "${BUDGET:-study}:$1" in
            study:demon) echo 6000 ;;
            study:*) echo 2000 ;;
            long:demon) echo 22000 ;;
            long:alien) echo 16000 ;;
            long:invaders) echo 10000 ;;
            long:sub) echo 16000 ;;
            long:heist) echo 16000 ;;
            long:painter) echo 4000 ;;
            *) echo 2000 ;;
        esac
    }
    # Wall-clock accounting: $run.segments holds "start EPOCH" when a sitting of training starts
    # and "end EPOCH REASON" when it ends (finished: the run reached its updates; budget: its
    # MINUTES ran out; stopped: anything else, e.g. Ctrl-C). A sitting that a killed shell or a lost
    # machine left open is closed at the train log's last write (the trainer writes a progress
    # line every few seconds), so an interrupted run resumes from its checkpoint (the trainer's
    # state.h5) with what is left of its budget, and no time is counted twice.
    close_open_sitting() {  # $1: the run
        local last end
        last="$(tail -n 1 "$1.segments")"
        [[ "$last" == start\ * ]] || return 0
        end="$(stat -c %Y "$1.train.log" 2>/dev/null || echo "${last#start }")"
        ((end >= ${last#start })) || end="${last#start }"
        echo "end $end killed" >>"$1.segments"
    }
    used_seconds() {  # $1: the run; seconds of training in its closed sittings
        awk '$1 == "start" {s = $2} $1 == "end" {t += $2 - s} END {print t + 0}' "$1.segments"
    }
    log_ends() {  # $1: the run, $2: finished or stopped; a sitting of its trainer ended so
        [[ -f "$1/model.h5" && -f "$1.train.log" ]] && tr '\r' '\n' <"$1.train.log" | grep -q "^$2: "
    }
    mkdir -p "$OUT"
    for g in $GAMES; do
        for s in $SEEDS; do
            run="$OUT/$g-$s"
            config="$(config_for "$g")"
            [[ -f "$config" ]] || { echo "ez_study.sh: no train config at $config (set CONFIG)" >&2; exit 1; }
            sims="${SIMS:-$(grep -o '"simulations"[^,}]*' "$config" | grep -o '[0-9]\+' || true)}"
            sims="${sims:-16}"
            [[ -f "$run/eval.txt" ]] && { echo "$run: evaluated already, skipped"; continue; }
            # One study process per run: a second one (another shell, the same command twice)
            # leaves it alone. The trainer inherits the lock, so it holds while a run trains.
            exec {lock}>"$run.lock"
            if ! flock -n "$lock"; then
                echo "$run: being trained by another process (it holds $run.lock), skipped"
                exec {lock}>&-
                continue
            fi
            budget=$((MINUTES * 60)) used=0 todo=new
            if log_ends "$run" finished; then
                todo=trained
            elif [[ -f "$run.segments" ]]; then
                close_open_sitting "$run"
                used="$(used_seconds "$run")"
                if grep -q ' budget$' "$run.segments" || ((used >= budget)); then
                    todo=trained
                elif [[ -f "$run/state.h5" ]]; then
                    todo=resume
                fi
            elif log_ends "$run" stopped; then
                todo=trained   # a run from before the accounting: a stop was its time limit
            fi
            if [[ $todo == trained ]]; then
                echo "$run: trained already, evaluating"
            else
                if [[ $todo == new && -e "$run" ]]; then
                    # Killed before its first checkpoint, or without accounting: its budget is
                    # unknown, so it starts again from scratch.
                    old="$run.interrupted-$(date +%Y%m%d-%H%M%S)"
                    mv "$run" "$old"
                    [[ -f "$run.train.log" ]] && mv "$run.train.log" "$old.train.log"
                    [[ -f "$run.segments" ]] && mv "$run.segments" "$old.segments"
                    echo "$run: interrupted run moved to $old; training again from scratch"
                    used=0
                fi
                [[ $todo == new ]] && rm -f "$run.train.log" "$run.segments"
                left=$((budget - used))
                if [[ $todo == resume ]]; then
                    echo "$run: resuming from its checkpoint, $left s of its $MINUTES min left ($(date +%H:%M:%S))"
                else
                    echo "$run: training for $MINUTES min ($(date +%H:%M:%S))"
                fi
                echo "start $(date +%s)" >>"$run.segments"
                # timeout sends SIGINT at the limit: the trainer stops at the next update and writes
                # its checkpoint. Ctrl-C (or TERM, HUP) on this script is passed on the same way.
                interrupted=0
                timeout -s INT "$left" nice -n "$NICE" "$GLIMPSE" train efficientzero --env "$g" \
                    --seed "$s" --steps "$(steps_for "$g")" --config "$config" --out "$run" \
                    --threads "$THREADS" >>"$run.train.log" 2>&1 &
                child=$!
                trap 'interrupted=1; kill -INT "$child" 2>/dev/null || true' INT TERM HUP
                while :; do
                    rc=0
                    wait "$child" || rc=$?
                    kill -0 "$child" 2>/dev/null || break   # else a signal cut the wait short
                done
                trap - INT TERM HUP
                if ((rc == 124)); then reason=budget
                elif ((rc == 0)) && log_ends "$run" finished; then reason=finished
                else reason=stopped
                fi
                echo "end $(date +%s) $reason" >>"$run.segments"
                if [[ $reason == stopped ]]; then
                    if [[ $interrupted == 1 || ($rc == 0 && -f "$run/state.h5") ]]; then
                        echo "$run: stopped before its budget ran out; its checkpoint is kept, and the same" \
                            "command resumes it" >&2
                        exit 3
                    fi
                    echo "$run: training failed (exit $rc), see $run.train.log" >&2
                    exit 1
                fi
            fi
            if [[ ! -f "$run/model.h5" ]]; then
                echo "$run: no model.h5 (training failed?), see $run.train.log" >&2
                exit 1
            fi
            nice -n "$NICE" "$GLIMPSE" play --checkpoint "$run/model.h5" --env "$g" --episodes "$EPISODES" \
                --simulations "$sims" --threads "$THREADS" >"$run/eval.tmp" 2>/dev/null
            mv "$run/eval.tmp" "$run/eval.txt"
            grep -E "^return|^normalized" "$run/eval.txt" | sed "s|^|$run: |"
            exec {lock}>&-
        done
    done
fi

# Aggregate: per game, mean and 95% CI (Student t, n - 1 degrees of freedom) over seeds.
echo
echo "game      seeds  normalized score (mean +- 95% CI)   return (mean +- 95% CI)   per seed normalized"
for g in $GAMES; do
    vals="" rets=""
    for s in $SEEDS; do
        f="$OUT/$g-$s/eval.txt"
        [[ -f "$f" ]] || continue
        vals+=" $(awk '/^normalized score:/ {gsub(",", "", $4); print $4}' "$f")"
        rets+=" $(awk '/^return:/ {print $3}' "$f")"
    done
    echo "$g" "$vals" "|" "$rets" | awk '
        function t975(df) {  # Student t quantiles, 97.5%
            split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228", t, " ")
            return df <= 10 ? t[df] : 1.96
        }
        function ci(a, n,   i, m, v) {
            m = 0; for (i = 1; i <= n; i++) m += a[i]; m /= n
            v = 0; for (i = 1; i <= n; i++) v += (a[i] - m) ^ 2
            if (n < 2) return sprintf("%8.3f             ", m)
            return sprintf("%8.3f +- %-8.3f", m, t975(n - 1) * sqrt(v / (n - 1)) / sqrt(n))
        }
        {
            n = 0; k = 0; side = 0; list = ""
            for (i = 2; i <= NF; i++) {
                if ($i == "|") { side = 1; continue }
                if (side == 0) { x[++n] = $i; list = list " " $i } else r[++k] = $i
            }
            if (n == 0) { printf "%-9s %5d  (no evaluated runs)\n", $1, 0; next }
            printf "%-9s %5d  %s             %s      %s\n", $1, n, ci(x, n), ci(r, k), list
        }'
done
