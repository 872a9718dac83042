#!/usr/bin/env bash
# Usage: run_fuzzers.sh BUILD_DIR SECONDS
# For each fuzzer: replay its seed corpus (corpus/NAME/ plus what
# make_seeds_NAME.py writes; must not crash), then fuzz for SECONDS with a
# scratch corpus seeded from it (NAME.dict as the dictionary, if present).
# Fuzzers run side by side, BROOK_FUZZ_JOBS at a time (default: one per
# core; libFuzzer is single-threaded), each with the same SECONDS; their
# reports print in name order. Any crash fails the run and leaves the
# reproducer under BUILD_DIR/fuzz-artifacts/.
set -euo pipefail
build=$1
seconds=${2:-30}
jobs_max=${BROOK_FUZZ_JOBS:-$(nproc)}
here=$(cd "$(dirname "$0")" && pwd)
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
rm -f "$artifacts"/*.rc "$artifacts"/*.report  # a previous run's

# fuzz_one NAME BIN: prints NAME's report; returns non-zero on a failure.
fuzz_one() {
  local name=$1 bin=$2 fail=0 seeds scratch
  seeds=$(mktemp -d)
  cp -r "$here/corpus/$name"/. "$seeds"/ 2>/dev/null || true
  if [[ -f "$here/make_seeds_$name.py" ]]; then
    python3 "$here/make_seeds_$name.py" "$seeds" "$here/../../../shared/data"
  fi
  scratch=$(mktemp -d)
  cp -r "$seeds"/. "$scratch"/
  local dict=()
  [[ -f "$here/$name.dict" ]] && dict=(-dict="$here/$name.dict")
  echo "--- $name: replay $(ls "$seeds" | wc -l) seeds, then fuzz ${seconds}s"
  if ! "$bin" -runs=0 "$seeds" >"$artifacts/$name.replay.log" 2>&1; then
    echo "FAILED: $name corpus replay"; tail -30 "$artifacts/$name.replay.log"; fail=1
  fi
  if ! "$bin" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
       "${dict[@]}" -artifact_prefix="$artifacts/$name-" "$scratch" \
       >"$artifacts/$name.fuzz.log" 2>&1; then
    echo "FAILED: $name fuzzing"; tail -40 "$artifacts/$name.fuzz.log"; fail=1
  else
    # libFuzzer's summary: runs, coverage (cov: edges, ft: features), exec/s.
    grep -E "^#[0-9]+[[:space:]]+DONE" "$artifacts/$name.fuzz.log" | tail -1 || true
    tail -1 "$artifacts/$name.fuzz.log"
  fi
  rm -rf "$scratch" "$seeds"
  return $fail
}

names=()
for bin in "$build"/tests/fuzz/*_fuzzer; do
  name=$(basename "$bin" _fuzzer)
  names+=("$name")
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
  # Each job leaves its report and its status in files: a status reaped by
  # `wait -n` above is gone.
  (
    rc=0
    fuzz_one "$name" "$bin" >"$artifacts/$name.report" 2>&1 || rc=$?
    echo "$rc" >"$artifacts/$name.rc"
  ) &
done
wait
fail=0
for name in "${names[@]}"; do
  cat "$artifacts/$name.report"
  [[ "$(cat "$artifacts/$name.rc" 2>/dev/null)" == 0 ]] || fail=1
done
exit $fail
