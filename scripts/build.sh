#!/usr/bin/env bash
# Configures and builds Brook into build/ (CMake + Ninja).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"${BROOK_JOBS:-$(nproc)}" brook
echo "built build/chief/brook"
