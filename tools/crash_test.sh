#!/usr/bin/env bash
# Crash safety of `glimpse train` (docs/crash-safety.md): for LETR, CoaT and EfficientZero, kill
# the trainer with SIGKILL at random moments KILLS times and resume it each time, then let it
# finish. A follower (`glimpse info --follow`, the Training panel's RunFollower) reads the run
# log the whole time. After every kill:
#   * `glimpse info` reads the checkpoint and the run log (never unreadable);
#   * a run log left "running" is reported DEAD by `glimpse info` (heartbeat / pid);
#   * the resume starts (from the checkpoint, or from step 0 before the first one) and loses
#     at most one checkpoint interval: resumed step >= last step printed before the kill - interval.
# At the end: status finished, exactly one row per step in the main series (rows after the
# checkpoint were dropped on resume), no stale temp files, and the follower never failed.
#
# With --gui, the GUI also follows the run (glimpse --run LOG under xvfb-run) and must survive.
#
# usage: tools/crash_test.sh [--kills N] [--trainers letr,coat,ez] [--work DIR] [--glimpse BIN]
#                            [--max-delay S] [--seed N] [--gui]
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kills=20
trainers="letr,coat,ez"
work="${TMPDIR:-/tmp}/glimpse-crash-test"
glimpse="$here/build/app/glimpse"
max_delay=3.0
seed=$$
gui=0
while [ $# -gt 0 ]; do
    case "$1" in
    --kills) kills="$2"; shift 2 ;;
    --trainers) trainers="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --glimpse) glimpse="$2"; shift 2 ;;
    --max-delay) max_delay="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --gui) gui=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "crash_test.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ -x "$glimpse" ] || { echo "crash_test.sh: $glimpse is not built (cmake --build build --target glimpse)" >&2; exit 2; }
command -v script >/dev/null || { echo "crash_test.sh: needs script(1) (util-linux) for a progress line per step" >&2; exit 2; }
RANDOM=$seed
mkdir -p "$work"
# A private copy: a rebuild of build/app/glimpse during the test must not break it.
cp "$glimpse" "$work/glimpse.bin" && glimpse="$work/glimpse.bin"
echo "crash test: $kills kills per trainer, delays 0.1..$max_delay s (CoaT +1.5 s), seed $seed, work dir $work"

# Tiny configs that checkpoint often. interval = checkpoint interval in steps (updates for EZ).
cat >"$work/letr.json" <<'EOF'
{"model": {"backbone": "resnet10", "hidden_dim": 32, "nheads": 2, "dim_feedforward": 64,
 "coarse_enc_layers": 1, "coarse_dec_layers": 1, "num_queries": 8, "short_side": 64,
 "max_long_side": 128, "stages": "coarse"},
 "batch_size": 1, "coarse_steps": 300, "checkpoint_every": 4, "threads": 1, "val_every": 100, "val_images": 2,
 "augment": {"min_short_side": 56, "max_short_side": 72, "max_long_side": 128}}
EOF
cat >"$work/coat.json" <<'EOF'
{"model": {"variant": "custom", "embed_dims": [16, 16, 16, 16], "serial_depths": [1, 1, 1, 1],
 "mlp_ratios": [2, 2, 2, 2], "image_size": 32, "resize": 32},
 "batch_size": 8, "steps": 1000, "warmup_steps": 1, "eval_every": 100, "checkpoint_every": 5,
 "val_subset": 16, "train_subset": 256, "threads": 1}
EOF
cat >"$work/ez.json" <<'EOF'
{"steps": 2000, "num_envs": 2, "simulations": 2, "max_episode_steps": 25, "batch_size": 4, "min_replay": 30,
 "updates_per_env_step": 1.0, "checkpoint_interval": 10, "log_interval": 1, "warmup_steps": 2,
 "network": {"channels": 4, "lstm_hidden": 8, "reduced_channels_reward": 2, "reduced_channels_value": 2,
  "reduced_channels_policy": 2, "support_size": 10, "proj_hidden": 8, "proj_out": 8, "pred_hidden": 4,
  "reward_hidden": [8], "value_hidden": [8], "policy_hidden": [8]}}
EOF

# Per trainer: command (without --resume), checkpoint and run log names, interval, main series, total.
setup() {
    local t="$1" out="$work/$1"
    case "$t" in
    letr) cmd=("$glimpse" train letr --config "$work/letr.json" --data procedural:8:1:64x64 --out "$out")
          ckpt="$out/checkpoint.h5"; log="$out/run.h5"; interval=4; series="loss/total"; total=300; slow=0 ;;
    coat) cmd=("$glimpse" train coat --config "$work/coat.json" --data fashion-mnist --out "$out")
          ckpt="$out/checkpoint.h5"; log="$out/run.h5"; interval=5; series="loss/train"; total=1000
          slow=1.5 ;;   # reading Fashion-MNIST takes a while before the first step
    ez)   cmd=("$glimpse" train efficientzero --config "$work/ez.json" --env breakout --threads 1 --out "$out")
          ckpt="$out/state.h5"; log="$out/runlog.h5"; interval=10; series="loss"; total=2000; slow=0 ;;
    *) echo "crash_test.sh: unknown trainer $t (letr, coat, ez)" >&2; exit 2 ;;
    esac
}

rand_delay() { awk -v r="$RANDOM" -v hi="$(awk -v m="$max_delay" -v s="$slow" 'BEGIN { print m + s }')" 'BEGIN { srand(r); printf "%.2f", 0.1 + rand() * (hi - 0.1) }'; }
# The last "N/TOTAL" the progress bar printed (a tty makes it print every step).
last_step() { tr '\r' '\n' <"$1" | grep -oE '\] [0-9]+/[0-9]+' | tail -1 | sed -E 's/\] ([0-9]+)\/.*/\1/'; }
# The step a run started from: "resuming at step N", or 0 ("no checkpoint yet" or a new run).
start_step() {
    local s
    s=$(tr '\r' '\n' <"$1" | grep -oE 'resuming at step [0-9]+' | head -1 | grep -oE '[0-9]+$')
    echo "${s:-0}"
}
rows_of() { "$glimpse" info "$1" 2>/dev/null | grep -oE " $2 \([0-9]+ rows\)" | head -1 | grep -oE '[0-9]+' | head -1; }

# Starts the trainer on a pty (script -c) so the progress bar prints every step; sets pid.
start_trainer() {
    local logfile="$1"; shift
    local line
    line=$(printf '%q ' "$@")
    script -qfec "exec $line" /dev/null >"$logfile" 2>&1 &
    spid=$!
    pid=""
    for _ in $(seq 1 100); do
        pid=$(pgrep -P "$spid" | head -1)
        [ -n "$pid" ] && break
        sleep 0.02
    done
}

summary=()
failures=0
for t in ${trainers//,/ }; do
    setup "$t"
    out="$work/$t"
    rm -rf "$out"
    mkdir -p "$out"
    "$glimpse" info --follow "$log" --interval 0.1 --timeout 3600 >"$work/$t.follower.log" 2>&1 &
    follower=$!
    guipid=""
    unreadable=0; early=0; resumes_ok=0; max_lost=0; dead_missed=0; before_first=0; bad=()
    prev_start=0
    echo "== $t: ${cmd[*]}"
    for k in $(seq 1 "$kills"); do
        args=("${cmd[@]}")
        [ "$k" -gt 1 ] && args+=(--resume)
        tlog="$work/$t.attempt$k.log"
        start_trainer "$tlog" "${args[@]}"
        delay=$(rand_delay)
        sleep "$delay"
        if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
            wait "$spid" 2>/dev/null
            bad+=("attempt $k ended before the kill after $delay s: $(tr '\r' '\n' <"$tlog" | grep -v '^\[' | tail -2 | tr '\n' ' ')")
            continue
        fi
        kill -KILL "$pid"
        wait "$spid" 2>/dev/null
        started=$(start_step "$tlog")
        if [ "$k" -gt 1 ] && ! grep -qE "resuming at step|no checkpoint yet" "$tlog"; then
            # Killed while starting up, before it read the checkpoint: nothing to judge yet.
            early=$((early + 1))
        elif [ "$k" -gt 1 ]; then
            # The resume of the previous kill: did it start where it should?
            if grep -q "no checkpoint yet" "$tlog"; then before_first=$((before_first + 1)); fi
            lost=$((prev_last - started))
            [ "$lost" -lt 0 ] && lost=0
            [ "$lost" -gt "$max_lost" ] && max_lost=$lost
            if [ "$lost" -le "$interval" ] && grep -qE "resuming at step|no checkpoint yet" "$tlog"; then
                resumes_ok=$((resumes_ok + 1))
            else
                bad+=("resume $((k - 1)): started at $started, last step before the kill $prev_last (interval $interval)")
            fi
        fi
        last=$(last_step "$tlog")
        [ -n "$last" ] && prev_last=$last
        [ "$k" -eq 1 ] && prev_last=${last:-0}
        # Every file must stay readable, and a "running" log must read as dead.
        for f in "$ckpt" "$log"; do
            [ -e "$f" ] || continue
            if ! "$glimpse" info "$f" >"$work/$t.info.txt" 2>&1; then
                unreadable=$((unreadable + 1))
                bad+=("after kill $k: $f unreadable: $(tail -1 "$work/$t.info.txt")")
            fi
        done
        if [ -e "$log" ] && "$glimpse" info "$log" 2>/dev/null | grep -q 'status = "running"'; then
            "$glimpse" info "$log" 2>/dev/null | grep -q "run: DEAD" || {
                dead_missed=$((dead_missed + 1)); bad+=("after kill $k: $log still reads as running"); }
        fi
        kill -0 "$follower" 2>/dev/null || bad+=("the follower exited after kill $k: $(tail -1 "$work/$t.follower.log")")
        if [ "$gui" = 1 ] && [ -z "$guipid" ] && [ -e "$log" ]; then
            setsid xvfb-run -a "$glimpse" --run "$log" >"$work/$t.gui.log" 2>&1 &
            guipid=$!
        fi
        if [ -n "$guipid" ] && ! kill -0 "$guipid" 2>/dev/null; then
            bad+=("the GUI following $log exited after kill $k: $(tail -2 "$work/$t.gui.log" | tr '\n' ' ')"); guipid=""
        fi
        printf '  kill %2d after %5s s at step %5s (started at %s)\n' "$k" "$delay" "$prev_last" "$started"
    done
    # The last resume runs to the end.
    tlog="$work/$t.final.log"
    start_trainer "$tlog" "${cmd[@]}" --resume
    wait "$spid"
    rc=$?
    started=$(start_step "$tlog")
    lost=$((prev_last - started)); [ "$lost" -lt 0 ] && lost=0
    [ "$lost" -gt "$max_lost" ] && max_lost=$lost
    if [ "$lost" -le "$interval" ]; then resumes_ok=$((resumes_ok + 1)); else
        bad+=("final resume: started at $started, last step before the kill $prev_last"); fi
    grep -q "no checkpoint yet" "$tlog" && before_first=$((before_first + 1))
    [ "$rc" -eq 0 ] || bad+=("final run exited with $rc: $(tr '\r' '\n' <"$tlog" | tail -2 | tr '\n' ' ')")
    status=$("$glimpse" info "$log" 2>/dev/null | grep -oE '^  status = "[a-z]+"' | grep -oE '[a-z]+"$' | tr -d '"')
    [ "$status" = finished ] || bad+=("final status '$status', expected finished")
    rows=$(rows_of "$log" "$series")
    [ "$rows" = "$total" ] || bad+=("$series has ${rows:-?} rows, expected $total (one per step)")
    tmp=$(find "$out" -name '*.tmp-*' | wc -l)
    [ "$tmp" -eq 0 ] || bad+=("$tmp stale temp files left in $out")
    # The follower ends by itself once it has seen "finished".
    for _ in $(seq 1 100); do kill -0 "$follower" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$follower" 2>/dev/null; then
        kill "$follower"; bad+=("the follower did not see the run finish")
    fi
    wait "$follower"; frc=$?
    [ "$frc" -eq 0 ] || bad+=("follower failed ($frc): $(grep -m1 -E 'ERROR|TIMEOUT' "$work/$t.follower.log")")
    dead_seen=$(grep -c "status dead" "$work/$t.follower.log")
    if [ -n "$guipid" ]; then
        if kill -0 "$guipid" 2>/dev/null; then kill -TERM -- "-$guipid" 2>/dev/null; wait "$guipid" 2>/dev/null
        else bad+=("the GUI following $log exited: $(tail -2 "$work/$t.gui.log" | tr '\n' ' ')"); fi
    fi
    resumes=$((kills - early))
    summary+=("$(printf '%-6s %6s %12s %16s %18s %10s %12s %14s' "$t" "$kills" "$resumes_ok/$resumes" "$max_lost (<= $interval)" "$before_first" "$unreadable" "$dead_missed" "$dead_seen")")
    if [ "${#bad[@]}" -gt 0 ]; then
        failures=$((failures + ${#bad[@]}))
        printf '  FAIL %s\n' "${bad[@]}"
    fi
done

echo
printf '%-6s %6s %12s %16s %18s %10s %12s %14s\n' trainer kills "resumes ok" "max steps lost" "resumed from 0" unreadable "dead missed" "follower deads"
printf '%s\n' "${summary[@]}"
if [ "$failures" -gt 0 ]; then
    echo "crash test FAILED ($failures problems above)"
    exit 1
fi
echo "crash test passed"
