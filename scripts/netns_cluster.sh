#!/usr/bin/env bash
# A Brook cluster of hosts on this machine, for a person to try faults on:
# one network namespace per node (chief, PS shards, trainers, a client) on a
# private subnet, mutual TLS and a token. Needs root, iproute2 and nftables.
# Ctrl-C removes every namespace, link and process it made.
#   scripts/netns_cluster.sh [--ps N] [--trainers N] [--rate 1gbit] [--plaintext]
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/bin/brook ]] || { echo "netns_cluster: build first (bash scripts/build.sh)" >&2; exit 2; }
exec python3 tests/cluster/netns_cluster.py up --brook build/bin/brook "$@"
