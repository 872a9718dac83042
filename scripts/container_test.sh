#!/usr/bin/env bash
# The CPU image, built and run with a container engine from Debian packages:
#   1. a Debian bookworm base made here (debootstrap --variant=minbase from
#      the apt mirror this machine uses, `podman import`: no registry image);
#   2. docker/Dockerfile.cpu's runtime stage, unchanged, built on it with
#      podman, its build stage replaced by the locally built `brook` (strip
#      + the Debian packages owning its libraries, exactly as that stage
#      computes them): no compile inside the container;
#   3. a smoke job in one container, as the chart runs its pods (user 10001,
#      read-only root filesystem, a tmpfs /tmp): `brook local` with the smoke
#      job the image ships, a chief, a PS and a trainer as processes inside.
#   scripts/container_test.sh            (docker/README.md: timings, CI)
# Exit 0 passed, 1 failed, 77 SKIPPED (the reason printed: no podman or
# debootstrap, not root, or podman cannot start a container here).
# Environment: BROOK_BINARY (default build/bin/brook); BROOK_TOOLS_DIR
# (default ~/.cache/brook-tools: the base rootfs tarball is cached there);
# BROOK_CONTAINER_MIRROR (default: the first Debian URI in /etc/apt/sources*).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tools=${BROOK_TOOLS_DIR:-$HOME/.cache/brook-tools}/container
binary=${BROOK_BINARY:-$repo/build/bin/brook}
suite=bookworm
# Imported under a tag no registry has, so nothing is ever pulled for it.
base_tag=bookworm-brook-debootstrap
base=docker.io/library/debian:$base_tag
image=localhost/brook:container-test
start=$SECONDS

skip() { echo "container_test: SKIPPED: $*"; exit 77; }
fail() { echo "container_test: FAIL: $*"; exit 1; }
step() { echo "container_test: $* ($((SECONDS - start)) s)"; }

command -v podman >/dev/null || skip "podman is not installed (apt-get install podman runc debootstrap)"
command -v debootstrap >/dev/null || skip "debootstrap is not installed (apt-get install debootstrap)"
[[ $(id -u) == 0 ]] || skip "needs root (debootstrap, and podman storing the base image)"
[[ -x "$binary" ]] || fail "no brook binary at $binary (build it, or set BROOK_BINARY)"

# crun (podman's default) refuses hosts with hybrid cgroups v1+v2 ("cgroups
# in hybrid mode not supported"); runc runs there.
runtime=()
if command -v runc >/dev/null; then runtime=(--runtime runc); fi
# Podman raises RLIMIT_NOFILE / NPROC to its defaults in every container;
# where this process' hard limits are lower (a container host) that is
# EPERM. Ask for what the host allows.
nofile=$(ulimit -Hn); [[ "$nofile" == unlimited || "$nofile" -gt 65536 ]] && nofile=65536
nproc=$(ulimit -Hu); [[ "$nproc" == unlimited || "$nproc" -gt 4096 ]] && nproc=4096
limits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")

mirror=${BROOK_CONTAINER_MIRROR:-}
if [[ -z "$mirror" ]]; then
  mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}')
  [[ -n "$mirror" ]] || mirror=$(awk '/^deb / && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
fi
[[ -n "$mirror" ]] || fail "no Debian mirror in /etc/apt/sources*: set BROOK_CONTAINER_MIRROR"

# 1. The base image.
mkdir -p "$tools"
rootfs_tar="$tools/$suite-minbase.tar"
if ! podman image exists "$base"; then
  if [[ ! -f "$rootfs_tar" ]]; then
    step "debootstrap --variant=minbase $suite from $mirror"
    root=$(mktemp -d "$tools/rootfs.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$tools/debootstrap.log" 2>&1 ||
      fail "debootstrap failed: $(tail -5 "$tools/debootstrap.log")"
    # What the official slim images drop: apt lists and caches.
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
    tar -C "$root" --numeric-owner -cf "$rootfs_tar.partial" . && mv "$rootfs_tar.partial" "$rootfs_tar"
    rm -rf "$root"
    trap - EXIT
  fi
  step "podman import $rootfs_tar as $base"
  podman import --change 'CMD ["/bin/bash"]' "$rootfs_tar" "$base" >"$tools/import.log" 2>&1 ||
    fail "podman import: $(tail -5 "$tools/import.log")"
fi
if ! out=$(podman "${runtime[@]}" run --rm "${limits[@]}" --network host "$base" /bin/true 2>&1); then
  skip "podman cannot run a container here: $out"
fi
step "base image $base runs"

# 2. Dockerfile.cpu's runtime stage over a stand-in build stage.
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/out" "$ctx/examples/smoke"
strip --strip-unneeded -o "$ctx/out/brook" "$binary"
# The Debian packages owning every shared library the binary loads, as the
# build stage computes them (a library's path, or the file it links to),
# in one dpkg call: one per library takes ~1 s each.
libs=$(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
# shellcheck disable=SC2046  # one word per path
(dpkg -S $(for lib in $libs; do echo "$lib"; readlink -f "$lib"; done | sort -u) 2>/dev/null || true) |
  cut -d: -f1 | tr -d ' ' | tr ',' '\n' | sort -u >"$ctx/out/runtime-packages"
[[ -s "$ctx/out/runtime-packages" ]] || fail "dpkg -S found no package for the libraries of $binary"
cp "$repo/examples/smoke/job.yaml" "$ctx/examples/smoke/job.yaml"
{
  echo 'ARG DEBIAN_TAG'
  echo 'FROM debian:${DEBIAN_TAG} AS build'
  echo 'COPY out /out'
  sed -n '/^FROM .* AS runtime$/,$p' "$repo/docker/Dockerfile.cpu"
} >"$ctx/Containerfile"
grep -q '^FROM .* AS runtime$' "$ctx/Containerfile" || fail "docker/Dockerfile.cpu has no 'FROM ... AS runtime' stage"
step "podman build (Dockerfile.cpu runtime stage; $(wc -l <"$ctx/out/runtime-packages") runtime packages)"
if ! podman build "${runtime[@]}" "${limits[@]}" --network host --pull=never \
    --build-arg "DEBIAN_TAG=$base_tag" --build-arg "BROOK_COMMIT=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" \
    -f "$ctx/Containerfile" -t "$image" "$ctx" >"$ctx/build.log" 2>&1; then
  fail "podman build: $(tail -20 "$ctx/build.log")"
fi
step "built $image ($(podman image inspect --format '{{.Size}}' "$image") bytes)"

# 3. The smoke job inside, as the chart's pods run.
run=(podman "${runtime[@]}" run --rm "${limits[@]}" --network host --read-only
     --tmpfs /tmp:rw,size=512m,mode=1777 --user 10001:10001 --cap-drop ALL
     --security-opt no-new-privileges)
user=$("${run[@]}" --entrypoint /usr/bin/id "$image" -u) || fail "id in the image"
[[ "$user" == 10001 ]] || fail "the image runs as uid $user, want 10001"
version=$("${run[@]}" "$image" --version) || fail "brook --version in the image"
step "image runs as uid 10001: $version"
if ! out=$("${run[@]}" "$image" local /usr/share/brook/smoke/job.yaml --ps 1 --trainers 1 \
    --work-dir /tmp/brook-local --cpu-threads 1 --timeout-minutes 5 2>&1); then
  fail "brook local with the smoke job in the container: $(echo "$out" | tail -30)"
fi
echo "$out" | tail -5
echo "$out" | grep -q SUCCEEDED || fail "the smoke job did not report SUCCEEDED: $(echo "$out" | tail -30)"
step "passed: the smoke job ran in the container (chief, PS and trainer)"
