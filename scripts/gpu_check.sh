#!/usr/bin/env bash
# The CUDA backend's checks, for a machine with an NVIDIA GPU (CI has none,
# so there every CUDA test SKIPs). Builds only what the checks need in
# build-gpu (BROOK_CUDA=ON, warnings as errors), then runs:
#   - the backend op suite on the CUDA backend (Cuda/BackendTest.*),
#   - CPU-vs-CUDA whole-step parity (CudaParity*), the fast GEMM modes,
#   - the loader tests,
#   - `brook trainer` on synthetic data with --device cpu and --device cuda
#     (with /metrics on: cuBLAS, loaded through the plugin, must not break
#     the exposer), synchronous (--staleness 0: the same run every time on
#     one device), whose eval AUC and train loss must agree.
# Any failure, or any of these tests SKIPPED, exits non-zero. An estimated 3-4
# minutes on 16 cores, mostly the build. Needs the Debian packages of NOTES.md.
# Usage: scripts/gpu_check.sh [build dir]   (BROOK_JOBS=N caps the build)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
JOBS=${BROOK_JOBS:-$(nproc)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

nvidia-smi
cmake -S . -B "$B" -G Ninja -DBROOK_CUDA=ON -DBROOK_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  >"$T/cmake.log" || { cat "$T/cmake.log"; exit 1; }
time ninja -C "$B" -j"$JOBS" brook_backend_cuda brook_trainer_tests brook

"$B/tests/brook_trainer_tests" \
  --gtest_filter='Cuda/BackendTest.*:CudaParity*:CudaGemmMathTest.*:BackendLoaderTest.*' \
  | tee "$T/tests.log"
if grep -q '^\[  SKIPPED \]' "$T/tests.log"; then
  echo "gpu_check: CUDA tests were SKIPPED on a machine that should have a GPU" >&2
  exit 1
fi

"$B/bin/brook" data gen --out "$T/ctr" --train 20000 --test 5000 --shards 2 --seed 7 >/dev/null
{
  echo "model: {type: dlrm, embedding_dim: 16, bottom: [64], top: [128, 64], dropout: 0.1}"
  echo "sparse:"; for i in $(seq 26); do echo "  - {feature: C$i}"; done
  echo "dense:"; for i in $(seq 13); do echo "  - {feature: I$i, transform: log1p}"; done
} >"$T/dlrm.yaml"
for device in cpu cuda; do
  "$B/bin/brook" trainer --device "$device" --local-ps 1 --spec "$T/ctr/feature_spec.yaml" \
    --model "$T/dlrm.yaml" --data "$T/ctr/train-*.tfrecord" --eval-data "$T/ctr/test-*.tfrecord" \
    --batch-size 512 --staleness 0 --metrics-listen 127.0.0.1:0 | tail -n 1 >"$T/$device.json"
done
python3 - "$T/cpu.json" "$T/cuda.json" <<'PY'
import json, sys
cpu, cuda = (json.load(open(p)) for p in sys.argv[1:])
print("brook trainer, DLRM on synthetic data: cpu", cpu["eval"], "\ncuda", cuda["eval"])
ok = (abs(cpu["eval"]["auc"] - cuda["eval"]["auc"]) < 0.01 and
      abs(cpu["train_mean_loss"] - cuda["train_mean_loss"]) < 0.02 * cpu["train_mean_loss"])
sys.exit(0 if ok else "gpu_check: cpu and cuda training disagree")
PY
echo "gpu_check: all CUDA checks passed"
