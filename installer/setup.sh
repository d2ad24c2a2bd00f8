#!/usr/bin/env bash
# Glimpse set-up: installs the Debian packages Glimpse needs (idempotent, non-interactive),
# configures and builds in Release, then
#   setup.sh demo   launches the GUI on the built-in demo scene
#   setup.sh test   runs the whole test suite (ctest)
#   setup.sh build  only installs and builds
# Environment: BUILD_DIR (default build), JOBS (default: number of cores).
set -euo pipefail

mode="${1:-build}"
case "$mode" in demo|test|build) ;; *)
  echo "usage: $0 demo|test|build" >&2; exit 2 ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-$(nproc)}"

packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libgloo-dev libopenblas0-pthread libtcmalloc-minimal4
  qt6-base-dev qt6-base-dev-tools qt6-charts-dev qt6-svg-dev qt6-qpa-plugins libgl-dev
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers glslc libimgui-dev
  libopencv-dev libhdf5-dev nlohmann-json3-dev zlib1g-dev
  xvfb xauth libqt6opengl6-dev
  python3-torch python3-torchvision python3-h5py python3-numpy python3-pil
  opencv-doc
  dataset-fashion-mnist
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "glimpse setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then
    sudo=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  elif command -v sudo >/dev/null 2>&1 && [ -t 0 ]; then
    sudo=(sudo)
  else
    echo "glimpse setup: error: installing packages needs root. Run this script as root or" >&2
    echo "  with sudo available, or install them yourself: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "glimpse setup: all Debian packages present"
fi

echo "glimpse setup: configuring and building (Release) in $build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs"

case "$mode" in
  build) ;;
  demo)
    if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
      exec "$build/app/glimpse" --demo
    else
      echo "glimpse setup: no display; running the demo under Xvfb and saving a screenshot"
      xvfb-run -a -s "-screen 0 1280x1024x24" "$build/app/glimpse" --demo \
        --screenshot "$build/demo-screenshot.png"
    fi ;;
  test)
    cd "$build"
    ctest --output-on-failure -j "$jobs" --timeout 900 ;;
esac
