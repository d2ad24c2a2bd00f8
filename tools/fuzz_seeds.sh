#!/usr/bin/env bash
# Regenerates the seed corpora fuzz/corpus/<target>/ (docs/fuzzing.md). Everything is written by
# Glimpse itself: build-asan/fuzz/glimpse_fuzz_seeds (checkpoints, traces, run logs, episodes,
# images, a video, idx files, configs, dataset specs) plus the replay fixtures of
# tests/fixtures/make_replay_fixtures.py (Minari files, PNG+CSV label files, a version-1 episode).
#   tools/fuzz_seeds.sh [BUILD_DIR]      (default build-asan; needs cmake --build --preset asan --target fuzz_all)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
seeds=$build/fuzz/glimpse_fuzz_seeds
[ -x "$seeds" ] || { echo "fuzz_seeds.sh: $seeds missing; build the asan preset's fuzz_all target first" >&2; exit 1; }
out=fuzz/corpus
rm -rf "$out"
mkdir -p "$out"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$seeds" "$out"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/fixtures/make_replay_fixtures.py "$tmp/fx" > /dev/null
mkdir -p $out/fuzz_import_minari $out/fuzz_import_frames $out/fuzz_h5_info
cp "$tmp/fx/minari/data/main_data.hdf5" $out/fuzz_import_minari/minari.hdf5
cp "$tmp/fx/minari_grey/main_data.hdf5" $out/fuzz_import_minari/minari_grey.hdf5
for d in frames frames_bad_action frames_short_row; do
  cp "$tmp/fx/$d/labels.txt" "$out/fuzz_import_frames/$d.txt"
done
cp "$tmp/fx/episode_v1.h5" $out/fuzz_episode/episode_v1.h5
# glimpse info / File > Open: one file of each kind.
cp $out/fuzz_checkpoint_coat/coat.h5 $out/fuzz_trace/constellation.h5 $out/fuzz_runlog/live.h5 \
   $out/fuzz_episode/grey.h5 $out/fuzz_h5_info/ 2>/dev/null || true
cp $out/fuzz_import_minari/minari_grey.hdf5 $out/fuzz_h5_info/

# Seeds must stay small: report the sizes, and fail above 2 MiB in all.
du -sh $out/* | sort -h
total=$(du -sb $out | cut -f1)
echo "total: $total bytes"
[ "$total" -lt $((2 * 1024 * 1024)) ] || { echo "fuzz_seeds.sh: the corpora exceed 2 MiB" >&2; exit 1; }
