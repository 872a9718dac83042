#!/usr/bin/env bash
# Builds Brook's container images; what CI runs (it needs a container engine
# with BuildKit: Docker >= 23 or Podman/Buildah).
#
#   docker/build.sh [cpu|cuda|all]      (default: all)
#
# Tags <image>:<version> (CPU) and <image>:<version>-cuda, matching the
# chart's image.repository / image.tag / image.cudaTagSuffix.
#
# Environment:
#   BROOK_IMAGE     image repository (default: brook)
#   BROOK_VERSION   tag (default: the project VERSION in CMakeLists.txt)
#   BROOK_PUSH=1    push the tags after building
#   BROOK_JOBS      parallel compile jobs inside the build (default: 4)
#   CONTAINER_ENGINE  docker (default) or podman
#   DOCKER_BUILD_ARGS extra arguments for `build` (e.g. --platform linux/amd64)
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-all}
case "$what" in cpu|cuda|all) ;; *) echo "usage: $0 [cpu|cuda|all]" >&2; exit 2 ;; esac

engine=${CONTAINER_ENGINE:-docker}
if ! command -v "$engine" >/dev/null 2>&1; then
  echo "docker/build.sh: no container engine '$engine' on PATH" >&2
  exit 1
fi
image=${BROOK_IMAGE:-brook}
version=${BROOK_VERSION:-$(sed -n 's/^project(brook VERSION \([0-9][0-9.]*\).*/\1/p' CMakeLists.txt)}
if [[ -z "$version" ]]; then
  echo "docker/build.sh: cannot read the version from CMakeLists.txt; set BROOK_VERSION" >&2
  exit 1
fi
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
export DOCKER_BUILDKIT=1
read -r -a extra <<<"${DOCKER_BUILD_ARGS:-}"

build() {  # build <Dockerfile> <tag>
  echo "docker/build.sh: building $2 from $1"
  "$engine" build -f "$1" -t "$2" \
    --build-arg "BROOK_VERSION=$version" \
    --build-arg "BROOK_COMMIT=$commit" \
    --build-arg "BROOK_JOBS=${BROOK_JOBS:-4}" \
    "${extra[@]}" .
  # The image must start as its non-root user and print its version.
  "$engine" run --rm "$2" --version
  if [[ "${BROOK_PUSH:-0}" == 1 ]]; then "$engine" push "$2"; fi
}

tags=()
if [[ "$what" == cpu || "$what" == all ]]; then
  build docker/Dockerfile.cpu "$image:$version"
  tags+=("$image:$version")
fi
if [[ "$what" == cuda || "$what" == all ]]; then
  build docker/Dockerfile.cuda "$image:$version-cuda"
  tags+=("$image:$version-cuda")
fi
echo "docker/build.sh: built ${tags[*]}"
