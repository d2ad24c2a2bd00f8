#!/bin/bash
# Interleaved CPU benchmarks of Glimpse against the official code on the same machine
# (docs/performance.md): ours, official, ours, official, ... then the medians of the CPU times
# (on a shared machine the wall clock measures the other users; CPU time of the process does
# not) and the load average.
#
#   tools/perf/bench_vs_official.sh letr LETR_CHECKOUT [ROUNDS] [extra glimpse bench letr options]
#   tools/perf/bench_vs_official.sh coat COAT_CHECKOUT [ROUNDS] [BATCH] [extra glimpse bench coat options]
#
# One thread each (--threads 1; OPENBLAS_NUM_THREADS=1 for the official code). The official code
# runs with its defaults; OFFICIAL_ENV="OPENBLAS_CORETYPE=SkylakeX MALLOC_MMAP_MAX_=0
# MALLOC_TRIM_THRESHOLD_=2147483647" gives it the BLAS kernels and the kept memory Glimpse uses.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
glimpse=${GLIMPSE:-$here/../../build/app/glimpse}
model=$1; repo=$2; rounds=${3:-3}
shift 3 || shift $#
batch=1
if [ "$model" = coat ] && [ $# -gt 0 ]; then batch=$1; shift; fi
OFFICIAL_ENV=${OFFICIAL_ENV:-}
ours=(); official=()
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
for r in $(seq "$rounds"); do
  if [ "$model" = letr ]; then
    o=$("$glimpse" bench letr --backbone resnet50 --threads 1 --runs 1 --warmup 1 --no-record "$@" | \
        sed -n 's/.*forward .*(CPU time \([0-9.]*\) ms.*/\1/p')
    f=$(env $OFFICIAL_ENV /usr/bin/python3 "$here/official_bench.py" letr --repo "$repo" --runs 1 --warmup 1 | \
        sed -n 's/.*"cpu_ms": \([0-9.]*\).*/\1/p')
  else
    o=$("$glimpse" bench coat --variant coat_lite_tiny --threads 1 --batch "$batch" --runs 5 --warmup 2 "$@" | \
        sed -n 's/.*forward .*(CPU time \([0-9.]*\) ms.*/\1/p')
    f=$(env $OFFICIAL_ENV /usr/bin/python3 "$here/official_bench.py" coat --repo "$repo" --batch "$batch" --runs 5 --warmup 2 | \
        sed -n 's/.*"cpu_ms": \([0-9.]*\).*/\1/p')
  fi
  echo "round $r: glimpse $o ms, official $f ms CPU ($(cut -d' ' -f1-3 /proc/loadavg))"
  ours+=("$o"); official+=("$f")
done
mo=$(printf '%s\n' "${ours[@]}" | median); mf=$(printf '%s\n' "${official[@]}" | median)
echo "median CPU ms: glimpse $mo, official $mf, ratio $(awk -v a="$mo" -v b="$mf" 'BEGIN {printf "%.3f", a / b}')"
