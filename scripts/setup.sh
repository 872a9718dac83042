#!/usr/bin/env bash
# Installs every build and test dependency Brook needs on Debian bookworm.
# Idempotent: packages already present are not reinstalled; apt-get update runs
# only when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git clang libclang-rt-14-dev clang-format
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost-dev librocksdb-dev prometheus-cpp-dev libgtest-dev libgmock-dev
  libbenchmark-dev libyaml-cpp-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  libzstd-dev libsnappy-dev liblz4-dev libbz2-dev libabsl-dev libspdlog-dev
  libeigen3-dev
  python3 python3-numpy python3-sklearn prometheus openssl iproute2 nftables
)
# The container test (scripts/container_test.sh) builds the CPU image with
# podman on a debootstrap base; runc because crun refuses hybrid cgroups.
CONTAINER_PACKAGES=(podman runc debootstrap)

missing=()
for p in "${PACKAGES[@]}" "${CONTAINER_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # podman's recommends (its network and storage helpers) are what it runs with.
  $SUDO apt-get install -y -qq "${CONTAINER_PACKAGES[@]}" >/dev/null
else
  echo "setup: all packages present"
fi
