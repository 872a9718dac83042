#!/usr/bin/env bash
# The main job: `brook local` with no job file runs the built-in demo on one
# machine -- generate 3M Criteo-shaped examples from a known ground-truth
# model, start a chief, two PS shards and two trainers as processes on
# 127.0.0.1, train DeepFM through the chief (work-unit leases, checkpoints,
# eval, export), and print the test AUC beside the Bayes-optimal AUC.
# A few minutes on 2 cores; ~2 GB of data under the work directory.
# Usage: scripts/demo.sh [WORK_DIR] [more `brook local` flags]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/brook-demo}
shift || true
rm -rf "$OUT"
exec build/bin/brook local --work-dir "$OUT" "$@"
