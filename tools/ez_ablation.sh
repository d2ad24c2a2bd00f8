#!/usr/bin/env bash
# Issue 52's lever ablation (docs/rl.md "Lever ablation"): the study protocol of
# tools/ez_study.sh (train, then 32 greedy evaluation episodes) run once per arm and seed, where
# an arm is the base config with some keys replaced (tools/ez_ablation.json). Prints one row per
# arm: normalized score and return, mean +- 95% CI over seeds, and the difference to the
# baseline arm's mean.
#
# usage: tools/ez_ablation.sh [--summarize]
# Environment (defaults in brackets):
#   GAME      the game [pellets]
#   ARMS      arms to run, names of tools/ez_ablation.json [all of them]
#   SEEDS     seeds [0 1 2]
#   BASE      base train config [tools/ez_study.json]
#   OUT       ablation directory; arm A, seed s goes to $OUT/A/GAME-s [runs/ez_ablation]
#   STEPS, MINUTES, THREADS, EPISODES, NICE, GLIMPSE: as tools/ez_study.sh [STEPS 2000]
# Two instances with disjoint ARMS use two cores. A finished run is skipped, so an interrupted
# ablation continues where it stopped.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
GAME="${GAME:-pellets}"
SEEDS="${SEEDS:-0 1 2}"
BASE="${BASE:-$here/tools/ez_study.json}"
OUT="${OUT:-runs/ez_ablation}"
ARMS_FILE="$here/tools/ez_ablation.json"
export STEPS="${STEPS:-2000}"
summarize_only=0
case "${1:-}" in
    --summarize) summarize_only=1 ;;
    "") ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "ez_ablation.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
command -v python3 >/dev/null || { echo "ez_ablation.sh: needs python3" >&2; exit 1; }
[[ -f "$BASE" ]] || { echo "ez_ablation.sh: no base config at $BASE (set BASE)" >&2; exit 1; }
all_arms="$(python3 -c 'import json,sys; print(" ".join(k for k in json.load(open(sys.argv[1])) if not k.startswith("_")))' "$ARMS_FILE")"
ARMS="${ARMS:-$all_arms}"
for a in $ARMS; do
    [[ " $all_arms " == *" $a "* ]] || { echo "ez_ablation.sh: unknown arm '$a' (arms: $all_arms)" >&2; exit 2; }
done

if [[ $summarize_only == 0 ]]; then
    mkdir -p "$OUT/configs"
    for a in $ARMS; do
        cfg="$OUT/configs/$a.json"
        # The arm's config: the base with the arm's keys replaced ("network" and "loss_weights"
        # are merged key by key).
        python3 - "$BASE" "$ARMS_FILE" "$a" >"$cfg.tmp" <<'EOF'
import json, sys
base = json.load(open(sys.argv[1]))
arm = json.load(open(sys.argv[2]))[sys.argv[3]]
for k, v in arm.items():
    if isinstance(v, dict) and isinstance(base.get(k), dict):
        base[k] = {**base[k], **v}
    else:
        base[k] = v
print(json.dumps(base, indent=1))
EOF
        mv "$cfg.tmp" "$cfg"
        echo "== arm $a: $(tr -d '\n' <"$cfg" | tr -s ' ')"
        OUT="$OUT/$a" GAMES="$GAME" SEEDS="$SEEDS" CONFIG="$cfg" "$here/tools/ez_study.sh" | grep -v '^$' | grep -v '^game ' || true
    done
fi

# Summary: per arm, mean +- 95% CI over seeds of the normalized score and of the return.
echo
printf "%-20s %5s  %-22s %-22s %s\n" arm seeds "normalized (mean +- CI)" "return (mean +- CI)" "vs baseline (normalized)"
base_mean=""
for a in baseline $all_arms; do
    [[ $a == baseline && -n "$base_mean" ]] && continue
    vals="" rets=""
    for s in $SEEDS; do
        f="$OUT/$a/$GAME-$s/eval.txt"
        [[ -f "$f" ]] || continue
        vals+=" $(awk '/^normalized score:/ {gsub(",", "", $4); print $4}' "$f")"
        rets+=" $(awk '/^return:/ {print $3}' "$f")"
    done
    [[ -n "$vals" ]] || continue
    line="$(echo "$vals | $rets" | awk -v base="${base_mean:-none}" '
        function t975(df) {
            split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228", t, " ")
            return df <= 10 ? t[df] : 1.96
        }
        function ci(a, n,   i, m, v) {
            m = 0; for (i = 1; i <= n; i++) m += a[i]; m /= n; mean = m
            v = 0; for (i = 1; i <= n; i++) v += (a[i] - m) ^ 2
            if (n < 2) return sprintf("%.3f", m)
            return sprintf("%.3f +- %.3f", m, t975(n - 1) * sqrt(v / (n - 1)) / sqrt(n))
        }
        {
            n = 0; k = 0; side = 0
            for (i = 1; i <= NF; i++) {
                if ($i == "|") { side = 1; continue }
                if (side == 0) x[++n] = $i; else r[++k] = $i
            }
            nc = ci(x, n); nm = mean; rc = ci(r, k)
            d = base == "none" ? "-" : sprintf("%+.3f", nm - base)
            printf "%d\t%s\t%s\t%s\t%.6f\n", n, nc, rc, d, nm
        }')"
    IFS=$'\t' read -r n nc rc d nm <<<"$line"
    [[ $a == baseline ]] && base_mean="$nm"
    printf "%-20s %5s  %-22s %-22s %s\n" "$a" "$n" "$nc" "$rc" "$d"
done
