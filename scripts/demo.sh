#!/usr/bin/env bash
# The main job until the chief exists (the chief issue replaces this with
# `brook local`): generate Criteo-shaped data from a known model, inspect and
# profile it; then a small cluster on this machine: two `brook ps` shards
# (durable data dirs, ports picked at run time) and a `brook trainer` that
# trains Wide & Deep on UCI Adult against them and reports test metrics.
# (Checkpoints are driven by the chief; see the PS Checkpoint RPC.)
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/chief/brook
OUT=${1:-/tmp/brook-demo}
rm -rf "$OUT"
mkdir -p "$OUT"

$B data gen --out "$OUT/ctr" --train 200000 --test 50000 --shards 4 --seed 7
$B data inspect "$OUT"/ctr/test-*.tfrecord
$B data stats "$OUT"/ctr/train-*.tfrecord --schema-out "$OUT/ctr/schema.yaml"
# Counts are heavy-tailed: a held-out split legitimately exceeds the train
# split's max, so allow values up to 4x the observed range past either end.
$B data stats "$OUT"/ctr/test-*.tfrecord --check "$OUT/ctr/schema.yaml" --range-slack 4

# UCI Adult as TFRecord.
for split in train test; do
  $B data convert --schema adult --shards 2 --prefix "$split" --out "$OUT/adult/$split" \
    ../shared/data/adult/adult.$split.csv
done

# Two PS shards; each prints "brook ps listening on HOST:PORT metrics on ...".
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait || true; }
trap cleanup EXIT
ADDRS=()
for i in 0 1; do
  $B ps --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --shard-index $i --num-shards 2 \
    --data-dir "$OUT/ps$i" > "$OUT/ps$i.out" &
  PIDS+=($!)
done
for i in 0 1; do
  for _ in $(seq 100); do
    grep -q 'listening on' "$OUT/ps$i.out" 2>/dev/null && break
    sleep 0.1
  done
  ADDRS+=("$(awk '/listening on/ {print $5}' "$OUT/ps$i.out")")
done
echo "PS shards: ${ADDRS[*]}"

$B trainer --ps "${ADDRS[0]},${ADDRS[1]}" \
  --spec "$OUT/adult/train/feature_spec.yaml" --model examples/adult/wide_deep.yaml \
  --data "$OUT/adult/train/train-*.tfrecord" --eval-data "$OUT/adult/test/test-*.tfrecord" \
  --epochs 4 --batch-size 128 --dense-lr 0.003 --embedding-lr 0.1 | tee "$OUT/eval.json"
python3 - "$OUT/eval.json" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
auc = r["eval"]["auc"]
print(f"Wide & Deep on UCI Adult: test AUC {auc:.4f} over {r['eval']['examples']} examples")
sys.exit(0 if auc >= 0.91 else 1)
PY
