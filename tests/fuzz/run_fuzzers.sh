#!/usr/bin/env bash
# Usage: run_fuzzers.sh BUILD_DIR SECONDS
# For each fuzzer: replay its seed corpus (corpus/NAME/ plus what
# make_seeds_NAME.py writes; must not crash), then fuzz for SECONDS with a
# scratch corpus seeded from it (NAME.dict as the dictionary, if present).
# Any crash fails the run and leaves the reproducer under
# BUILD_DIR/fuzz-artifacts/.
set -euo pipefail
build=$1
seconds=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$build/fuzz-artifacts"
fail=0
for bin in "$build"/tests/fuzz/*_fuzzer; do
  name=$(basename "$bin" _fuzzer)
  seeds=$(mktemp -d)
  cp -r "$here/corpus/$name"/. "$seeds"/ 2>/dev/null || true
  if [[ -x "$here/make_seeds_$name.py" || -f "$here/make_seeds_$name.py" ]]; then
    python3 "$here/make_seeds_$name.py" "$seeds" "$here/../../../shared/data"
  fi
  scratch=$(mktemp -d)
  cp -r "$seeds"/. "$scratch"/
  dict=()
  [[ -f "$here/$name.dict" ]] && dict=(-dict="$here/$name.dict")
  echo "--- $name: replay $(ls "$seeds" | wc -l) seeds, then fuzz ${seconds}s"
  if ! "$bin" -runs=0 "$seeds" >"$build/fuzz-artifacts/$name.replay.log" 2>&1; then
    echo "FAILED: $name corpus replay"; tail -30 "$build/fuzz-artifacts/$name.replay.log"; fail=1
  fi
  if ! "$bin" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 "${dict[@]}" \
       -artifact_prefix="$build/fuzz-artifacts/$name-" "$scratch" \
       >"$build/fuzz-artifacts/$name.fuzz.log" 2>&1; then
    echo "FAILED: $name fuzzing"; tail -40 "$build/fuzz-artifacts/$name.fuzz.log"; fail=1
  else
    # libFuzzer's summary: runs, coverage (cov: edges, ft: features), exec/s.
    grep -E "^#[0-9]+[[:space:]]+DONE" "$build/fuzz-artifacts/$name.fuzz.log" | tail -1 || true
    tail -1 "$build/fuzz-artifacts/$name.fuzz.log"
  fi
  rm -rf "$scratch" "$seeds"
done
exit $fail
