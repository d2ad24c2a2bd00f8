#!/usr/bin/env bash
# Runs the libFuzzer targets (docs/fuzzing.md) and prints one table row per target.
#   tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default: 60 s, every target)
#   tools/fuzz.sh -runs=N [TARGET...]                    (N executions per target instead)
# Environment: BUILD (default build-asan), FUZZ_OUT (default /tmp/glimpse-fuzz: working corpora,
# logs, crash/leak/timeout artifacts; outside the tree), JOBS (targets run at once, default 1),
# TABLE_ONLY=1 (print the table of the last run only),
# TIMEOUT (seconds an input may run before it counts as a hang, default 10; the HDF5 targets
# hangs are inside libhdf5, finding 8, and a lower value wastes less time on them),
# FORK=1 (libFuzzer's fork mode with -ignore_crashes etc.: keeps fuzzing after a finding, e.g.
# a crash inside libhdf5 that Glimpse cannot fix; every finding is still saved as an artifact).
# The seed corpora fuzz/corpus/<target>/ are read, never written; new inputs go to FUZZ_OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
limit=${1:-60}
shift || true
build=${BUILD:-build-asan}
out=$(realpath -m "${FUZZ_OUT:-/tmp/glimpse-fuzz}")
build=$(realpath -m "$build")
jobs=${JOBS:-1}
if [ $# -gt 0 ]; then targets=("$@"); else
  mapfile -t targets < <(ls fuzz/fuzz_*.cpp | xargs -n1 basename | sed 's/\.cpp$//')
fi
if [[ $limit == -runs=* ]]; then budget=$limit; else budget=-max_total_time=$limit; fi

# Options every run needs (docs/fuzzing.md "Sanitizer options").
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tools/sanitizer/lsan.supp:print_suppressions=0}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1   # one thread per target: JOBS decides the parallelism

maxlen() {   # the largest input worth mutating, per target
  case $1 in
    fuzz_config_json|fuzz_data_spec|fuzz_wireframe|fuzz_import_frames|fuzz_idx) echo 4096 ;;
    fuzz_image) echo 16384 ;;
    fuzz_video) echo 32768 ;;
    *) echo 131072 ;;   # HDF5 files: the seeds are a few KB to ~100 KB
  esac
}

# HDF5 targets: libhdf5 leaks a few blocks on nearly every corrupt input (suppressed, see
# tools/sanitizer/lsan.supp), so libFuzzer's per-input leak check ran a full LeakSanitizer scan
# after almost every execution (13x slower). They fuzz with -detect_leaks=0; afterwards every
# input of the working corpus is replayed once with the per-input leak check on (leakcheck below),
# so a leak of ours on any path the fuzzer reached is still reported with its input.
is_hdf5() {
  case $1 in
    fuzz_checkpoint_*|fuzz_trace|fuzz_runlog|fuzz_episode|fuzz_h5_info|fuzz_import_minari|fuzz_rl_dataset) return 0 ;;
    *) return 1 ;;
  esac
}

run_one() {
  local t=$1 bin=$build/fuzz/$1
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t" "$out/logs"
  if [ ! -x "$bin" ]; then echo "$t: $bin missing" > "$out/logs/$t.log"; return; fi
  local before; before=$(ls "$out/artifacts/$t" | wc -l)
  local fork=""
  [ "${FORK:-0}" = 1 ] && fork="-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1"
  local leaks=""
  is_hdf5 "$t" && leaks="-detect_leaks=0"
  "$bin" "$out/corpus/$t" "$root/fuzz/corpus/$t" $budget $fork $leaks -max_len="$(maxlen "$t")" -timeout="${TIMEOUT:-10}" \
    -rss_limit_mb=3072 -malloc_limit_mb=3072 -artifact_prefix="$out/artifacts/$t/" -print_final_stats=1 \
    > "$out/logs/$t.log" 2>&1
  local rc=$?
  if [ $rc = 0 ] && [ -n "$leaks" ]; then   # leakcheck: replay the corpus, leak check per input
    "$bin" "$out/corpus/$t" "$root/fuzz/corpus/$t" -runs=0 -max_len="$(maxlen "$t")" -timeout=10 \
      -rss_limit_mb=3072 -malloc_limit_mb=3072 -artifact_prefix="$out/artifacts/$t/" \
      > "$out/logs/$t.leakcheck.log" 2>&1
    rc=$?
  fi
  echo "$rc" > "$out/logs/$t.rc"
  echo "$before" > "$out/logs/$t.before"
}
export -f run_one maxlen is_hdf5
export build out budget root FORK TIMEOUT
# TABLE_ONLY=1: print the table of the last run in FUZZ_OUT without fuzzing.
[ "${TABLE_ONLY:-0}" = 1 ] || printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}'

printf '%-32s %12s %8s %6s %6s %8s %5s  %s\n' target executions exec/s crash leak timeout oom "new artifacts"
status=0
for t in "${targets[@]}"; do
  log=$out/logs/$t.log
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" 2>/dev/null | awk '{print $2}' | tail -1)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" 2>/dev/null | awk '{print $2}' | tail -1)
  if [ -z "$execs" ]; then   # fork mode: "#N: cov: .. exec/s: R oom/timeout/crash: a/b/c time: Ts"
    line=$(grep -E '^#[0-9]+: cov:' "$log" 2>/dev/null | tail -1)
    execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<< "$line")
    secs=$(grep -oE ' time: [0-9]+' <<< "$line" | awk '{print $2}')
    [ -n "$execs" ] && [ "${secs:-0}" -gt 0 ] && rate=$((execs / secs))
  fi
  new=$(ls -t "$out/artifacts/$t" 2>/dev/null | head -n $(( $(ls "$out/artifacts/$t" 2>/dev/null | wc -l) - $(cat "$out/logs/$t.before" 2>/dev/null || echo 0) )) | tr '\n' ' ')
  c() { ls "$out/artifacts/$t" 2>/dev/null | grep -c "^$1-" ; }
  printf '%-32s %12s %8s %6s %6s %8s %5s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$(c crash)" "$(c leak)" "$(c timeout)" "$(c oom)" "$new"
  rc=$(cat "$out/logs/$t.rc" 2>/dev/null || echo 1)
  [ "$rc" = 0 ] || status=1
done
echo "logs: $out/logs   artifacts: $out/artifacts   (counts are all artifacts so far; 'new' this run)"
exit $status
