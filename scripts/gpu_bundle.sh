#!/usr/bin/env bash
# Builds here what scripts/gpu_check.sh runs on a GPU machine, so its
# minutes of device time go to the GPU, not to a compiler: `brook`, the
# trainer test binary and the CUDA plugin (nvcc is on these machines, see
# ../shared/NOTES.md), stripped, in the layout the plugin loader expects
# (bin/ and tests/ beside lib/), plus every shared library they need that
# the GPU machine's image lacks (it is not Debian: no gRPC, RocksDB, absl).
# glibc and CUDA's own libraries are left to that machine; libstdc++ and
# libgcc_s go in deps-fallback/, used there only if its own are older.
#
#   bash scripts/gpu_bundle.sh [BUILD_DIR]   # default build/ (BROOK_CUDA=AUTO builds the plugin)
#   then: device run, carry [".gpu"], command "bash scripts/gpu_check.sh"
#
# Writes .gpu/ (git-ignored); fails if it would not travel (the device tool
# carries 64 MiB with the working tree).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
G=.gpu
JOBS=${BROOK_JOBS:-$(nproc)}
targets=$(ninja -C "$B" -t targets all 2>/dev/null || true)
if ! grep -q '^brook_backend_cuda: phony' <<<"$targets"; then
  echo "gpu_bundle: $B builds no CUDA plugin; configure it with -DBROOK_CUDA=ON (nvcc: /usr/local/cuda/bin)" >&2
  exit 1
fi
start=$(date +%s)
ninja -C "$B" -j"$JOBS" brook brook_trainer_tests brook_backend_cuda
built=$(($(date +%s) - start))

rm -rf "$G"
mkdir -p "$G/bin" "$G/tests" "$G/lib" "$G/stage/deps" "$G/stage/deps-fallback"
strip -o "$G/bin/brook" "$B/bin/brook"
strip -o "$G/tests/brook_trainer_tests" "$B/tests/brook_trainer_tests"
strip --strip-unneeded -o "$G/lib/libbrook_backend_cuda.so" "$B/lib/libbrook_backend_cuda.so"

# Every library the three need, resolved here, minus glibc's and CUDA's.
ldd "$B/bin/brook" "$B/tests/brook_trainer_tests" "$B/lib/libbrook_backend_cuda.so" |
  awk '/=> \// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|libresolv|libutil)\.so|ld-linux|/libcuda\.so|/libcudart|/libcublas|/libnvidia' |
  while read -r lib; do
    case "$(basename "$lib")" in
      libstdc++.so.*|libgcc_s.so.*) cp -L "$lib" "$G/stage/deps-fallback/" ;;
      *) cp -L "$lib" "$G/stage/deps/" ;;
    esac
  done
tar -C "$G/stage" -czf "$G/deps.tar.gz" deps deps-fallback
rm -rf "$G/stage"
{
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with local changes)')"
  echo "built $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), nvcc $(
    /usr/local/cuda/bin/nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  echo "cuda tests $("$B/tests/brook_trainer_tests" --gtest_list_tests \
    --gtest_filter="$(bash scripts/gpu_check.sh --print-filter)" | grep -c '^  ')"
} >"$G/BUNDLE"
size=$(du -sb "$G" | cut -f1)
echo "gpu_bundle: $G is $((size / 1024 / 1024)) MiB (build step $built s); $(cat "$G/BUNDLE" | tr '\n' ';')"
if [ "$size" -gt $((48 * 1024 * 1024)) ]; then
  echo "gpu_bundle: $G is over 48 MiB: with the working tree it would not travel (64 MiB)" >&2
  exit 1
fi
