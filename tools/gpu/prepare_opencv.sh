#!/usr/bin/env bash
# Builds the minimal static OpenCV Glimpse needs (core, imgproc, imgcodecs with PNG and JPEG,
# videoio with OpenCV's own MJPEG AVI backend) from Debian's source package of the installed
# libopencv-dev, for a machine that has LibTorch but no OpenCV C++ (a GPU server; docs/gpu.md).
# The static libjpeg, libpng and zlib it links are copied into the prefix, so the folder can be
# carried to another x86_64 Linux (glibc >= Debian 12's 2.36) and found there with
# -DOpenCV_DIR=PREFIX/lib/cmake/opencv4.
#
# usage: tools/gpu/prepare_opencv.sh [PREFIX]      (default: third_party/opencv-min)
# Environment: JOBS (default: nproc), WORK (download and build folder, default /tmp/glimpse-opencv)
set -euo pipefail

here="$(cd "$(dirname "$0")/../.." && pwd)"
PREFIX="$(realpath -m "${1:-$here/third_party/opencv-min}")"
WORK="${WORK:-/tmp/glimpse-opencv}"
JOBS="${JOBS:-$(nproc)}"
case "${1:-}" in -h|--help) sed -n '2,12p' "$0"; exit 0 ;; esac

# The installed OpenCV's Debian version, e.g. 4.6.0+dfsg-12: its orig tarball from Debian's mirror,
# checked against the sha256 in the source package's .dsc.
version=$(dpkg-query -W -f '${Version}' libopencv-dev)
upstream=${version%-*}
pool=http://deb.debian.org/debian/pool/main/o/opencv
orig="opencv_${upstream}.orig.tar.xz"
mkdir -p "$WORK"
cd "$WORK"
[[ -f "opencv_${version}.dsc" ]] || curl -fsSO "$pool/opencv_${version}.dsc"
[[ -f "$orig" ]] || curl -fsSO "$pool/$orig"
want=$(awk '/^Checksums-Sha256:/ {f = 1; next} f && $3 == "'"$orig"'" {print $1; exit}' "opencv_${version}.dsc")
got=$(sha256sum "$orig" | cut -d' ' -f1)
[[ -n "$want" && "$want" == "$got" ]] || { echo "prepare_opencv.sh: $orig: sha256 $got, the .dsc says '$want'" >&2; exit 1; }
src="$WORK/opencv-${upstream%+*}"
[[ -d "$src" ]] || tar xJf "$orig"

lib=/usr/lib/x86_64-linux-gnu
for a in libjpeg.a libpng16.a libz.a; do
    [[ -f "$lib/$a" ]] || { echo "prepare_opencv.sh: $lib/$a missing (apt-get install libjpeg62-turbo-dev libpng-dev zlib1g-dev)" >&2; exit 1; }
done
cmake -S "$src" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_LIST=core,imgproc,imgcodecs,videoio \
    -DBUILD_TESTS=OFF -DBUILD_PERF_TESTS=OFF -DBUILD_EXAMPLES=OFF -DBUILD_opencv_apps=OFF -DBUILD_JAVA=OFF \
    -DBUILD_opencv_python3=OFF -DOPENCV_GENERATE_PKGCONFIG=OFF -DBUILD_ZLIB=OFF -DBUILD_PNG=OFF -DBUILD_JPEG=OFF \
    -DWITH_PNG=ON -DWITH_JPEG=ON -DWITH_TIFF=OFF -DWITH_WEBP=OFF -DWITH_OPENEXR=OFF -DWITH_JASPER=OFF \
    -DWITH_OPENJPEG=OFF -DWITH_IMGCODEC_SUNRASTER=ON -DWITH_FFMPEG=OFF -DWITH_GSTREAMER=OFF -DWITH_V4L=OFF \
    -DWITH_1394=OFF -DWITH_GTK=OFF -DWITH_QT=OFF -DWITH_OPENGL=OFF -DWITH_VTK=OFF -DWITH_IPP=OFF -DWITH_ITT=OFF \
    -DWITH_OPENCL=OFF -DWITH_LAPACK=OFF -DWITH_EIGEN=OFF -DWITH_PROTOBUF=OFF -DWITH_ADE=OFF -DWITH_TBB=OFF \
    -DWITH_QUIRC=OFF -DBUILD_opencv_python2=OFF -DBUILD_opencv_python_bindings_generator=OFF -DPYTHON_DEFAULT_EXECUTABLE=/usr/bin/python3 \
    -DWITH_OPENMP=OFF -DWITH_CUDA=OFF -DWITH_VA=OFF -DWITH_VA_INTEL=OFF -DWITH_GDAL=OFF -DWITH_GDCM=OFF \
    -DJPEG_LIBRARY="$lib/libjpeg.a" -DPNG_LIBRARY="$lib/libpng16.a" -DZLIB_LIBRARY="$lib/libz.a" \
    >"$WORK/configure.log"
cmake --build "$WORK/build" -j "$JOBS" >"$WORK/build.log"
rm -rf "$PREFIX"
cmake --install "$WORK/build" >"$WORK/install.log"
# The codecs' static libraries beside OpenCV's, and the exported targets pointing there.
mkdir -p "$PREFIX/lib/deps"
cp "$lib/libjpeg.a" "$lib/libpng16.a" "$lib/libz.a" "$PREFIX/lib/deps/"
grep -rl "$lib/lib\(jpeg\|png16\|z\)\.a" "$PREFIX/lib/cmake" | while read -r f; do
    sed -i "s|$lib/libjpeg.a|\${_IMPORT_PREFIX}/lib/deps/libjpeg.a|g; s|$lib/libpng16.a|\${_IMPORT_PREFIX}/lib/deps/libpng16.a|g; s|$lib/libz.a|\${_IMPORT_PREFIX}/lib/deps/libz.a|g" "$f"
done
rm -rf "$PREFIX/share" "$PREFIX/bin"
# Gloo's headers beside it (libgloo-dev), for a LibTorch that has Gloo inside but not its headers.
if [[ -d /usr/include/gloo ]]; then
    rm -rf "$PREFIX/../gloo-include"
    mkdir -p "$PREFIX/../gloo-include"
    cp -r /usr/include/gloo "$PREFIX/../gloo-include/"
fi
echo "OpenCV ${upstream%+*} (static: core imgproc imgcodecs videoio) in $PREFIX: $(du -sh "$PREFIX" | cut -f1)"
echo "configure Glimpse with -DOpenCV_DIR=$PREFIX/lib/cmake/opencv4"
