#!/usr/bin/env bash
# Configures and builds the "asan" preset (clang, AddressSanitizer + UndefinedBehaviorSanitizer,
# build-asan/) and runs the whole CTest suite under it (docs/fuzzing.md "Sanitized test suite").
#   tools/sanitize.sh [CTEST_ARGS...]     e.g. tools/sanitize.sh -L core   or   -R test_h5
# Environment: JOBS (build jobs, default 2), NO_BUILD=1 (run the tests only), CTEST_JOBS (default 1).
# The build runs under nice -n 19 so interactive work and other builds keep priority; a cold
# build takes about as long as the Release build. Exit status: ctest's.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if [ "${NO_BUILD:-0}" != 1 ]; then
  nice -n 19 cmake --preset asan > /dev/null || exit 1   # (re)applies the preset's cache values
  nice -n 19 cmake --build build-asan -j "${JOBS:-2}" || exit 1
fi

# Runtime options (why each one: docs/fuzzing.md "Sanitizer options"). Tests run under xvfb-run
# inherit them (xvfb-run passes the environment to the test).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:abort_on_error=1:detect_stack_use_after_return=0:strict_string_checks=0:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$root/tools/sanitizer/ubsan.supp}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tools/sanitizer/lsan.supp:print_suppressions=0}
# The Vulkan loader dlopens the lavapipe driver and unloads it when the instance goes; LSan then
# reports lavapipe's own still-referenced allocations as leaks from an "<unknown module>" at
# exit. Preloading the driver keeps it mapped (its memory stays reachable, nothing to report)
# without hiding any leak of ours (docs/fuzzing.md "Sanitized test suite").
lvp=$(ls /usr/lib/*/libvulkan_lvp.so 2>/dev/null | head -1)
[ -n "$lvp" ] && export LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}$lvp
cd build-asan
ctest --output-on-failure -j "${CTEST_JOBS:-1}" "$@"
