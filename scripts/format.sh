#!/usr/bin/env bash
# Formats Brook's C++/CUDA sources with clang-format and the repository's .clang-format.
# Usage: scripts/format.sh            rewrite every tracked source in place
#        scripts/format.sh --check    list the files that would change, with a diff of the
#                                     first few; exit 1 if there are any, 0 if none
set -euo pipefail
cd "$(dirname "$0")/.."

CHECK=0
case "${1:-}" in
  "") ;;
  --check) CHECK=1 ;;
  *) echo "usage: scripts/format.sh [--check]" >&2; exit 2 ;;
esac

CLANG_FORMAT=""
for candidate in clang-format-14 clang-format; do
  if command -v "$candidate" >/dev/null; then CLANG_FORMAT=$candidate; break; fi
done
if [[ -z $CLANG_FORMAT ]]; then
  echo "format.sh: neither clang-format-14 nor clang-format is on PATH;" \
    "scripts/setup.sh installs it (Debian package clang-format)" >&2
  exit 2
fi
# .clang-format was tuned with 14 (Debian bookworm); other versions break some lines
# differently, so a --check failure with them may not be a real one.
version=$("$CLANG_FORMAT" --version | grep -oE '[0-9]+(\.[0-9]+)+' | head -1)
if [[ ${version%%.*} != 14 ]]; then
  echo "format.sh: warning: $CLANG_FORMAT is version $version, .clang-format expects 14" >&2
fi

# Tracked sources only: build trees, the fuzz corpus and generated protobuf code are not
# written by hand.
mapfile -t files < <(git ls-files -- '*.h' '*.cc' '*.cu' '*.cuh' |
  grep -vE '^(build[^/]*/|tests/fuzz/corpus/|proto/)')
JOBS=${BROOK_JOBS:-$(nproc)}

if ((!CHECK)); then
  printf '%s\0' "${files[@]}" | xargs -0 -n 16 -P "$JOBS" "$CLANG_FORMAT" -i --style=file
  echo "format.sh: formatted ${#files[@]} files"
  exit 0
fi

mapfile -t changed < <(printf '%s\0' "${files[@]}" |
  xargs -0 -n 1 -P "$JOBS" bash -c '"$0" --style=file "$1" | cmp -s - "$1" || echo "$1"' \
    "$CLANG_FORMAT" | sort)
if ((${#changed[@]} == 0)); then
  echo "format.sh: all ${#files[@]} files are formatted"
  exit 0
fi
printf '%s\n' "${changed[@]}"
for f in "${changed[@]:0:3}"; do
  "$CLANG_FORMAT" --style=file "$f" | diff -u --label "$f" --label "$f (formatted)" "$f" - |
    head -n 30 || true
done
echo "format.sh: ${#changed[@]} of ${#files[@]} files are not formatted;" \
  "scripts/format.sh rewrites them" >&2
exit 1
