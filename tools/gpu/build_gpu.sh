#!/usr/bin/env bash
# On a GPU server (docs/gpu.md): builds the headless Glimpse (glimpse_core + the commands, no Qt,
# Vulkan or ImGui) against the CUDA LibTorch bundled with the machine's PyTorch and the static
# OpenCV that tools/gpu/prepare_opencv.sh made (third_party/opencv-min, carried with the tree).
#
# usage: tools/gpu/build_gpu.sh [BUILD_DIR]        (default: build-gpu)
# Environment: PYTHON (default python3), OPENCV (the prepared prefix), JOBS (default nproc),
#              CUDA_ARCH (default 90: H100 / H200)
set -euo pipefail

here="$(cd "$(dirname "$0")/../.." && pwd)"
case "${1:-}" in -h|--help) sed -n '2,9p' "$0"; exit 0 ;; esac
BUILD="${1:-$here/build-gpu}"
PYTHON="${PYTHON:-python3}"
OPENCV="${OPENCV:-$here/third_party/opencv-min}"
JOBS="${JOBS:-$(nproc)}"
CUDA_ARCH="${CUDA_ARCH:-90}"

torch_prefix=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
cuda=$("$PYTHON" -c 'import torch; print(torch.version.cuda or "")')
echo "LibTorch: $torch_prefix (torch $("$PYTHON" -c 'import torch; print(torch.__version__)'), CUDA ${cuda:-none})"
[[ -f "$OPENCV/lib/cmake/opencv4/OpenCVConfig.cmake" ]] ||
    { echo "build_gpu.sh: no OpenCV at $OPENCV (run tools/gpu/prepare_opencv.sh on the build machine and carry it)" >&2; exit 1; }
# PyTorch's LibTorch has Gloo inside; where it lacks Gloo's headers, the copy of Debian's that
# prepare_opencv.sh carried beside OpenCV.
gloo=()
torch_root=$("$PYTHON" -c 'import torch, os; print(os.path.dirname(torch.__file__))')
if [[ ! -f "$torch_root/include/gloo/config.h" && -f "$OPENCV/../gloo-include/gloo/config.h" ]]; then
    gloo=(-DGLIMPSE_GLOO_INCLUDE="$(realpath "$OPENCV/../gloo-include")")
fi
generator=()
keep_going=(-- -k)
command -v ninja >/dev/null && generator=(-G Ninja) && keep_going=(-- -k 0)
cmake -S "$here" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DGLIMPSE_HEADLESS=ON \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DOpenCV_DIR="$OPENCV/lib/cmake/opencv4" \
    -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" "${gloo[@]}"
# -k 0: every failing file reported in one pass (a GPU session's minutes are few).
cmake --build "$BUILD" -j "$JOBS" "${keep_going[@]}"
"$BUILD/app/glimpse" --version
