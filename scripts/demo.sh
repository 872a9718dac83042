#!/usr/bin/env bash
# The main job until the chief exists: generate Criteo-shaped data from a known
# model, then inspect and profile it. (The chief issue replaces this with
# `brook local`.)
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/chief/brook
OUT=${1:-/tmp/brook-demo}
rm -rf "$OUT"
$B data gen --out "$OUT" --train 200000 --test 50000 --shards 4 --seed 7
$B data inspect "$OUT"/test-*.tfrecord
$B data stats "$OUT"/train-*.tfrecord --schema-out "$OUT/schema.yaml"
# Counts are heavy-tailed: a held-out split legitimately exceeds the train
# split's max, so allow values up to 4x the observed range past either end.
$B data stats "$OUT"/test-*.tfrecord --check "$OUT/schema.yaml" --range-slack 4
