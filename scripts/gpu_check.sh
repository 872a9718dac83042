#!/usr/bin/env bash
# The CUDA backend's check, for a machine with an NVIDIA GPU, from binaries
# built here (scripts/gpu_bundle.sh writes .gpu/; the device tool carries
# it). Nothing is compiled there. In order, each step timed:
#   1. the machine: GPU, driver, compute capability, MIG mode; stops when the
#      driver is older than CUDA 13 needs (580);
#   2. the bundle: its libraries unpacked, `ldd` of every binary (stops on a
#      missing library);
#   3. every CUDA test in its own process (a sticky CUDA error must not fail
#      the tests after it and be blamed on them), each with its gtest JSON
#      (tolerances, TF32/BF16 errors); a failure is rerun with
#      CUDA_LAUNCH_BLOCKING=1 and under compute-sanitizer when there;
#   4. `brook trainer` on synthetic data, --device cpu, cuda and cuda with
#      --gemm-math tf32, /metrics scraped while each CUDA one runs; eval AUC
#      and loss must agree with the CPU's;
#   5. `brook bench trainer --device cpu,cuda` (one command, same data:
#      examples/s, GPU idle share from CUDA events, PS bytes/s), then tf32.
# Everything lands in $OUT (at most 8 files, as the device tool returns):
# summary.txt machine.txt ldd.txt tests.json tests.log trainer.json
# trainer.log bench.txt, each written as its step goes, so a run cut short
# keeps what it had. Exits non-zero if any CUDA test failed, was skipped,
# not run or is missing, exited non-zero, or a step failed. Every process has
# a time limit and the whole stays inside BROOK_GPU_CHECK_BUDGET seconds
# (default 540, under the device tool's 600 a command): steps that would
# start past it are skipped, and that is a failure.
#
#   device run: carry [".gpu"], command "OUT=$OUT bash scripts/gpu_check.sh"
#   here: BROOK_GPU_CHECK_NO_GPU=1 bash scripts/gpu_check.sh   # GPU steps
#     skipped: the CUDA tests must SKIP, the CPU parts run; times the rest
#   scripts/gpu_check.sh --print-filter   # the gtest filter of step 3
set -uo pipefail
cd "$(dirname "$0")/.."

readonly FILTER='Cuda/BackendTest.*:CudaParity*:CudaGemmMathTest.*:CudaLargeTest.*:BackendLoaderTest.*'
# The tests step 3 must find: a change to the suite changes this on purpose.
readonly EXPECTED_TESTS=32
if [ "${1:-}" = "--print-filter" ]; then
  echo "$FILTER"
  exit 0
fi

NO_GPU=${BROOK_GPU_CHECK_NO_GPU:-0}
BUDGET=${BROOK_GPU_CHECK_BUDGET:-540}
OUT=${OUT:-$(mktemp -d /tmp/gpu-check-out.XXXXXX)}
case "$OUT" in /*) ;; *) OUT="$OLDPWD/$OUT" ;; esac  # relative to the caller, not the repo
if ! mkdir -p "$OUT" 2>/dev/null || ! { : >"$OUT/summary.txt"; } 2>/dev/null; then
  echo "gpu_check: cannot write to OUT=$OUT" >&2
  exit 1
fi
if ! [[ "$BUDGET" =~ ^[0-9]+$ ]]; then
  echo "gpu_check: FAIL: BROOK_GPU_CHECK_BUDGET=$BUDGET: want whole seconds" | tee -a "$OUT/summary.txt" >&2
  exit 1
fi
G=${BROOK_GPU_BUNDLE:-.gpu}
W=$(mktemp -d /tmp/gpu-check.XXXXXX)
trap 'rm -rf "$W"; pkill -P $$ 2>/dev/null' EXIT
FAILED=0
T0=$(date +%s)
STEP_T=$T0
# Seconds left of the budget (never below 1).
left() {
  local l=$((BUDGET - ($(date +%s) - T0)))
  echo $((l > 1 ? l : 1))
}
# A time limit for one process: `want` seconds, or what is left if less.
limit() {
  local l
  l=$(left)
  echo $(($1 < l ? $1 : l))
}
over_budget() { [ $(($(date +%s) - T0)) -ge "$BUDGET" ]; }
# How a process run under `timeout N` ended, for a FAIL line: rc seconds.
ended() {
  case "$1" in
    124 | 137) echo "killed after $2 s: its time limit" ;;
    *) echo "exit $1" ;;
  esac
}
say() { echo "gpu_check: $*" | tee -a "$OUT/summary.txt"; }
fail() {
  say "FAIL: $*"
  FAILED=1
}
step() {
  local now
  now=$(date +%s)
  say "--- $1 (previous step $((now - STEP_T)) s, $((now - T0)) s in all)"
  STEP_T=$now
}
bundle_line=$( { tr '\n' ';' <"$G/BUNDLE"; } 2>/dev/null || echo none)
say "out: $OUT; budget ${BUDGET} s; bundle: $bundle_line"
if head=$(git rev-parse --short HEAD 2>/dev/null) && [ -f "$G/BUNDLE" ] &&
  ! grep -q "^commit $head\b" "$G/BUNDLE"; then
  say "note: the bundle was built from another commit than this checkout's ($head)"
fi

step "1. machine"
if [ "$NO_GPU" = 1 ]; then
  say "no GPU here (BROOK_GPU_CHECK_NO_GPU=1): GPU steps skipped, CUDA tests must SKIP" |
    tee "$OUT/machine.txt"
else
  if ! nvidia-smi --query-gpu=name,driver_version,compute_cap,mig.mode.current,memory.total \
    --format=csv >"$OUT/machine.txt" 2>&1; then
    cat "$OUT/machine.txt"
    fail "nvidia-smi failed: no usable GPU or driver"
    exit 1
  fi
  nvidia-smi >>"$OUT/machine.txt" 2>&1
  head -2 "$OUT/machine.txt" | tee -a "$OUT/summary.txt"
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
  if ! [[ "${driver%%.*}" =~ ^[0-9]+$ ]]; then
    fail "nvidia-smi reports no readable driver version (\"$driver\")"
    exit 1
  fi
  if [ "${driver%%.*}" -lt 580 ]; then
    fail "driver $driver is older than CUDA 13's runtime and cuBLAS need (580 or newer)"
    exit 1
  fi
  if nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader | grep -q Enabled; then
    say "MIG is enabled: the tests see a MIG slice, not the whole GPU"
  fi
fi

step "2. bundle"
if [ ! -f "$G/deps.tar.gz" ]; then
  fail "no bundle at $G: run scripts/gpu_bundle.sh here and carry .gpu"
  exit 1
fi
if ! tar -xzf "$G/deps.tar.gz" -C "$W" 2>"$W/tar.err"; then
  cat "$W/tar.err" | head -5 | tee -a "$OUT/summary.txt"
  fail "$G/deps.tar.gz failed to unpack: rebuild the bundle (scripts/gpu_bundle.sh)"
  exit 1
fi
LIBS="$W/deps"
for cuda in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$cuda" ] && LIBS="$LIBS:$cuda"; done
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
BINS=("$G/bin/brook" "$G/tests/brook_trainer_tests" "$G/lib/libbrook_backend_cuda.so")
ldd "${BINS[@]}" >"$OUT/ldd.txt" 2>&1
if grep -q 'version .GLIBCXX\|version .GCC\|libstdc++.so.6 => not found\|libgcc_s.so.1 => not found' \
  "$OUT/ldd.txt"; then
  say "this machine's libstdc++ is older than the build's: using the bundled one"
  export LD_LIBRARY_PATH="$W/deps-fallback:$LD_LIBRARY_PATH"
  ldd "${BINS[@]}" >"$OUT/ldd.txt" 2>&1
fi
grep -E 'not found' "$OUT/ldd.txt" | sort -u >"$W/missing.txt"
if [ -s "$W/missing.txt" ]; then
  head -20 "$W/missing.txt" | tee -a "$OUT/summary.txt"
  fail "$(wc -l <"$W/missing.txt") libraries missing (above; ldd.txt has all)"
  exit 1
fi
TESTS="$G/tests/brook_trainer_tests"
BROOK="$G/bin/brook"

step "3. CUDA tests, one process each"
mkdir -p "$W/json" "$W/logs"
timeout "$(limit 60)" "$TESTS" --gtest_list_tests --gtest_filter="$FILTER" >"$W/list.txt" 2>&1 ||
  { cp "$W/list.txt" "$OUT/tests.log"; fail "listing the CUDA tests failed (tests.log)"; }
python3 - "$W/list.txt" >"$W/names.txt" <<'PY'
import sys
suite = None
for line in open(sys.argv[1]):
    if not line.strip() or line.startswith("Running main"):
        continue
    if not line.startswith(" "):
        suite = line.strip()
    else:
        print(suite + line.split("#")[0].strip())
PY
found=$(wc -l <"$W/names.txt")
[ "$found" -eq "$EXPECTED_TESTS" ] ||
  fail "$found CUDA tests listed, $EXPECTED_TESTS expected (a test lost, or update EXPECTED_TESTS)"
# The tests get at most 60% of the budget; each at most 120 s; the first
# three failures are rerun (blocking, then under compute-sanitizer).
TESTS_END=$(($(date +%s) + BUDGET * 6 / 10))
: >"$OUT/tests.log"
i=0
reruns=0
while read -r name; do
  i=$((i + 1))
  now=$(date +%s)
  if [ "$now" -ge "$TESTS_END" ]; then
    echo "===== $name: not run (the tests' share of the budget is spent)" >>"$OUT/tests.log"
    continue
  fi
  t=$((TESTS_END - now < 120 ? TESTS_END - now : 120))
  timeout -k 5 "$t" "$TESTS" --gtest_filter="$name" --gtest_output="json:$W/json/$i.json" \
    >"$W/logs/$i.log" 2>&1
  rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "----- $(ended "$rc" "$t")" >>"$W/logs/$i.log"; fi
  if [ "$rc" -ne 0 ] && [ "$NO_GPU" != 1 ] && [ "$reruns" -lt 3 ]; then
    reruns=$((reruns + 1))
    # Where the fault really was: synchronous launches name the kernel.
    echo "----- rerun with CUDA_LAUNCH_BLOCKING=1" >>"$W/logs/$i.log"
    CUDA_LAUNCH_BLOCKING=1 timeout -k 5 "$(limit 120)" "$TESTS" --gtest_filter="$name" \
      >>"$W/logs/$i.log" 2>&1
    if command -v compute-sanitizer >/dev/null; then
      echo "----- rerun under compute-sanitizer" >>"$W/logs/$i.log"
      timeout -k 5 "$(limit 120)" compute-sanitizer --tool memcheck "$TESTS" \
        --gtest_filter="$name" >>"$W/logs/$i.log" 2>&1
    fi
  fi
  echo "$rc" >"$W/logs/$i.rc"
  { echo "===== $name (exit $rc)"; tail -c 20000 "$W/logs/$i.log"; } >>"$OUT/tests.log"
done <"$W/names.txt"
python3 - "$W" "$OUT" "$NO_GPU" <<'PY' | tee -a "$OUT/summary.txt"
import json, os, sys
w, out, no_gpu = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
names = [l.strip() for l in open(os.path.join(w, "names.txt"))]
counts = {"passed": 0, "failed": 0, "skipped": 0, "not run": 0, "missing": 0}
merged, bad = [], []
for i, name in enumerate(names, 1):
    try:
        rc = int(open(os.path.join(w, "logs", f"{i}.rc")).read())
    except Exception:
        counts["missing"] += 1
        bad.append(f"{name}: not run (out of time)")
        continue
    try:
        report = json.load(open(os.path.join(w, "json", f"{i}.json")))
        case = report["testsuites"][0]["testsuite"][0]
    except Exception:
        counts["missing"] += 1
        bad.append(f"{name}: no result, exit {rc} (crashed or timed out; tests.log)")
        continue
    case["exit_code"] = rc
    merged.append(case)
    status, result = case.get("status"), case.get("result")
    if case.get("failures"):
        counts["failed"] += 1
        bad.append(f"{name}: failed")
    elif status != "RUN" or result not in ("COMPLETED", "SKIPPED"):
        counts["not run"] += 1  # a DISABLED_ test, a filter that matched nothing
        bad.append(f"{name}: not run ({status}/{result})")
    elif rc != 0:
        counts["failed"] += 1  # passed, then crashed (teardown, a sticky CUDA error)
        bad.append(f"{name}: exit {rc} after its result")
    elif result == "SKIPPED":
        counts["skipped"] += 1
        # Without a GPU the CUDA tests skip by design; the loader's and
        # the tolerance checker's own tests must still pass.
        if not no_gpu or not ("cuda" in name.lower() and "Tolerance" not in name):
            bad.append(f"{name}: SKIPPED")
    else:
        counts["passed"] += 1
json.dump({"tests": merged, "counts": counts}, open(os.path.join(out, "tests.json"), "w"), indent=1)
print("CUDA tests:", ", ".join(f"{v} {k}" for k, v in counts.items()))
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "CUDA tests (tests.json, tests.log)"

step "4. brook trainer, cpu then cuda (fp32, tf32), /metrics scraped during the cuda runs"
: >"$OUT/trainer.log"
lim=$(limit 120)
timeout -k 5 "$lim" "$BROOK" data gen --out "$W/ctr" --train 60000 --test 10000 --shards 2 \
  --seed 7 >>"$OUT/trainer.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "brook data gen: $(ended "$rc" "$lim") (trainer.log)"
{
  echo "model: {type: dlrm, embedding_dim: 16, bottom: [64], top: [128, 64], dropout: 0.1}"
  echo "sparse:"
  for f in $(seq 26); do echo "  - {feature: C$f}"; done
  echo "dense:"
  for f in $(seq 13); do echo "  - {feature: I$f, transform: log1p}"; done
} >"$W/dlrm.yaml"
runs="cpu cuda cuda-tf32"
[ "$NO_GPU" = 1 ] && runs="cpu"
for run in $runs; do
  if over_budget; then
    fail "out of time before the trainer run $run"
    continue
  fi
  device=${run%-tf32}
  math=fp32
  [ "$run" != "$device" ] && math=tf32
  lim=$(limit 150)
  timeout -k 5 "$lim" "$BROOK" trainer --device "$device" --gemm-math "$math" --local-ps 1 \
    --spec "$W/ctr/feature_spec.yaml" \
    --model "$W/dlrm.yaml" --data "$W/ctr/train-*.tfrecord" \
    --eval-data "$W/ctr/test-*.tfrecord" --batch-size 512 --staleness 0 \
    --metrics-listen 127.0.0.1:0 >"$W/$run.out" 2>"$W/$run.err" &
  pid=$!
  # Scrape /metrics while it trains: cuBLAS (through the plugin) beside the
  # exposer, NVML read from the scrape's thread.
  scrapes=0
  while kill -0 "$pid" 2>/dev/null; do
    port=$(grep -o 'metrics on 127.0.0.1:[0-9]*' "$W/$run.out" 2>/dev/null | head -1 | sed 's/.*://')
    if [ -n "$port" ] && python3 - "$port" >"$W/$run.metrics.new" 2>/dev/null <<'PY'; then
import sys, urllib.request
print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode())
PY
      mv "$W/$run.metrics.new" "$W/$run.metrics"
      scrapes=$((scrapes + 1))
    fi
    sleep 0.2
  done
  wait "$pid"
  rc=$?
  [ "$rc" -eq 0 ] ||
    fail "brook trainer --device $device --gemm-math $math: $(ended "$rc" "$lim") (trainer.log)"
  {
    echo "===== $run: $scrapes scrapes of /metrics while training"
    tail -n 40 "$W/$run.err"
    grep -E '^brook_trainer_gpu' "$W/$run.metrics" 2>/dev/null | head -20
  } >>"$OUT/trainer.log"
  tail -n 1 "$W/$run.out" >"$W/$run.json"
  if [ "$device" = cuda ] && [ "$scrapes" -eq 0 ]; then
    fail "no /metrics scrape answered while the CUDA trainer ($run) ran"
  elif [ "$device" = cuda ] && ! grep -q '^brook_trainer_gpu_memory_total_bytes' "$W/$run.metrics"; then
    fail "the CUDA trainer's /metrics ($run) has no brook_trainer_gpu_* series"
  elif [ "$device" = cuda ] && ! grep -q '^brook_trainer_gpu_busy_seconds_total' "$W/$run.metrics"; then
    fail "the CUDA trainer's /metrics ($run) has no brook_trainer_gpu_busy_seconds_total"
  fi
done
python3 - "$W" "$OUT" $runs <<'PY' | tee -a "$OUT/summary.txt"
import json, os, sys
w, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {}
for d in names:
    try:
        runs[d] = json.load(open(os.path.join(w, d + ".json")))
    except Exception as e:
        print(f"trainer {d}: no JSON result ({e})")
        sys.exit(1)
json.dump(runs, open(os.path.join(out, "trainer.json"), "w"), indent=1)
for d, r in runs.items():
    print(f"trainer {d}: eval {r.get('eval')}, train mean loss {r.get('train_mean_loss')}")
# Synchronous (--staleness 0) runs of one seed: the CPU's repeat exactly (1
# or 2 threads alike); the GPU's differ by float reassociation (cuBLAS,
# atomics in the pooling backward), which training then amplifies, TF32's by
# input rounding too. Calibrated on the CPU (2026-12-06, this data, seeds
# 1-5): AUC 0.667-0.674, train loss 0.5458-0.5495 (0.7%) from seed to seed,
# the most a run-to-run difference can grow to. The bounds sit just past that
# range: a correct GPU never fails them; a wrong kernel moves AUC by 0.05+.
bounds = {"cuda": (0.01, 0.015), "cuda-tf32": (0.015, 0.025)}  # AUC, relative loss
ok = True
for name, (auc_tol, loss_tol) in bounds.items():
    if name not in runs:
        continue
    cpu, other = runs["cpu"], runs[name]
    d_auc = abs(cpu["eval"]["auc"] - other["eval"]["auc"])
    d_loss = abs(cpu["train_mean_loss"] - other["train_mean_loss"]) / cpu["train_mean_loss"]
    agree = d_auc < auc_tol and d_loss < loss_tol
    ok &= agree
    print(f"cpu vs {name}: |dAUC| {d_auc:.4f} (< {auc_tol}), relative |dloss| {d_loss:.4f} "
          f"(< {loss_tol}): {'agree' if agree else 'DISAGREE'}")
sys.exit(0 if ok else 1)
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "trainer runs (trainer.json, trainer.log)"

step "5. brook bench trainer"
# One command runs cpu and cuda on the same generated data (examples/s, PS
# bytes/s, the GPU idle share from CUDA events); a second the tf32 GEMMs.
: >"$OUT/bench.txt"
benches="cpu,cuda:fp32 cuda:tf32"
BENCH_EXAMPLES=100000
[ "$NO_GPU" = 1 ] && benches="cpu:fp32"
for bench in $benches; do
  devices=${bench%:*}
  math=${bench#*:}
  if over_budget; then
    fail "out of time before the bench of --device $devices --gemm-math $math"
    continue
  fi
  echo "===== --device $devices --gemm-math $math" >>"$OUT/bench.txt"
  out="$W/bench-${devices/,/-}-$math.txt"
  lim=$(limit 200)
  timeout -k 5 "$lim" "$BROOK" bench trainer --device "$devices" --gemm-math "$math" \
    --examples "$BENCH_EXAMPLES" --batch-size 512 --models dlrm --json >"$out" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] ||
    fail "brook bench trainer --device $devices --gemm-math $math: $(ended "$rc" "$lim") (bench.txt)"
  cat "$out" >>"$OUT/bench.txt"
  # Every device has both trainer figures, every example trained once, shares
  # in [0, 1], PS traffic both ways, the GEMM math asked for, and a GPU idle
  # share on cuda (none on the cpu). A bad or missing figure is named.
  python3 - "$out" "$devices" "$math" "$BENCH_EXAMPLES" 512 <<'PY' | tee -a "$OUT/summary.txt"
import json, math as m, sys
path, devices, math = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
examples, batch = int(sys.argv[4]), int(sys.argv[5])
label = f"bench --device {sys.argv[2]} --gemm-math {math}"
text = open(path, errors="replace").read()
start = text.rfind("\n{\n")
try:
    result = json.loads(text[start + 1:]) if start >= 0 else None
except ValueError:
    result = None
if not isinstance(result, dict):
    print(f"{label}: no JSON figures (bench.txt)")
    sys.exit(1)
bad = []
def number(where, v, lo=None, hi=None):
    """v if a finite number (not a boolean) within [lo, hi], else None and a complaint."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not m.isfinite(v):
        bad.append(f"{where} = {json.dumps(v)}: not a number")
        return None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        bad.append(f"{where} = {v}: outside [{lo}, {hi}]")
        return None
    return v
def get(obj, key, where):
    if not isinstance(obj, dict) or key not in obj:
        bad.append(f"{where}.{key}: missing")
        return None
    return obj[key]
if result.get("gemm_math") != math:
    bad.append(f"gemm_math = {json.dumps(result.get('gemm_math'))}, asked for {math}")
dlrm = get(get(get(result, "models", "result"), "dlrm", "models"), "devices", "models.dlrm")
for device in devices:
    d = get(dlrm, device, "models.dlrm.devices")
    if d is None:
        continue
    compute = number(f"{device}.compute_alone_examples_per_second",
                     get(d, "compute_alone_examples_per_second", device), lo=1e-9)
    for key in ("in_process", "grpc"):
        where = f"{device}.{key}"
        r = get(d, key, device)
        if r is None:
            continue
        fields = {f: get(r, f, where) for f in (
            "examples_per_second", "of_ceiling", "examples", "steps", "input_wait_share",
            "ps_wait_share", "compute_share", "ps_pull_bytes_per_second",
            "ps_push_bytes_per_second", "gpu_idle_share")}
        eps = number(f"{where}.examples_per_second", fields["examples_per_second"], lo=1e-9)
        if fields["examples"] != examples:
            bad.append(f"{where}.examples = {json.dumps(fields['examples'])}, not {examples}")
        if fields["steps"] != -(-examples // batch):
            bad.append(f"{where}.steps = {json.dumps(fields['steps'])}, not {-(-examples // batch)}")
        shares = {s: number(f"{where}.{s}", fields[s], 0, 1.01)
                  for s in ("input_wait_share", "ps_wait_share", "compute_share")}
        pull = number(f"{where}.ps_pull_bytes_per_second", fields["ps_pull_bytes_per_second"], lo=1)
        push = number(f"{where}.ps_push_bytes_per_second", fields["ps_push_bytes_per_second"], lo=1)
        idle = fields["gpu_idle_share"]
        if device == "cpu":
            if idle is not None:
                bad.append(f"{where}.gpu_idle_share = {json.dumps(idle)} on the cpu")
        else:
            idle = number(f"{where}.gpu_idle_share", idle, 0, 1)
        if eps is None or None in shares.values() or pull is None or push is None:
            continue
        idle_text = "-" if idle is None else f"{100 * idle:.1f}%"
        of = number(f"{where}.of_ceiling", fields["of_ceiling"], lo=0) or 0
        print(f"bench {device} {math} {key}: {eps:.0f} examples/s ({100 * of:.0f}% of its "
              f"ceiling; compute alone {compute or 0:.0f}), PS wait "
              f"{100 * shares['ps_wait_share']:.1f}%, GPU idle {idle_text}, from/to PS "
              f"{pull / 1e6:.1f}/{push / 1e6:.1f} MB/s")
for b in bad:
    print(f"{label}: bad figure: {b}")
sys.exit(1 if bad else 0)
PY
  [ "${PIPESTATUS[0]}" -eq 0 ] ||
    fail "brook bench trainer --device $devices --gemm-math $math: figures (above, bench.txt)"
done

step "done"
if [ "$FAILED" -ne 0 ]; then
  say "some checks FAILED (above)"
  exit 1
fi
say "all checks passed$([ "$NO_GPU" = 1 ] && echo ' (no GPU: the CUDA parts were skipped)')"
