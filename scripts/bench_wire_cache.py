#!/usr/bin/env python3
"""Wire precision and the trainer's row cache, end to end over real processes.

Generates Criteo-shaped data (Zipf ids), then for each variant starts two
fresh `brook ps` processes on 127.0.0.1 and trains DeepFM with one
`brook trainer --ps A,B` for one epoch, and prints per variant the test AUC,
examples/s, payload bytes per example (pull / push) and the cache's hit
ratio, beside the first variant's. Variants run in the order given, once
per repeat, alternating (A B C A B C), so a machine that slows down mid-run
shows in the spread instead of in one variant; repeat i trains with seed
i + 1, so the AUC spread of one variant over repeats is the seed noise a
difference between variants must clear (BENCHMARKS.md, issue 27).

  python3 scripts/bench_wire_cache.py --brook build/bin/brook [--examples 500000]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

VARIANTS = {
    "fp32": [],
    "bf16": ["--wire", "bf16"],
    "fp16": ["--wire", "fp16"],
    "fp32+cache": ["--cache-rows", "200000"],
    "bf16+cache": ["--wire", "bf16", "--cache-rows", "200000"],
}


def start_ps(brook, index, shards, log):
    proc = subprocess.Popen(
        [brook, "ps", "--listen", "127.0.0.1:0", "--metrics-listen", "", "--shard-index",
         str(index), "--num-shards", str(shards)],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while time.time() < deadline:
        log.flush()
        with open(log.name) as f:
            m = re.search(r"listening on (127\.0\.0\.1:\d+)", f.read())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            sys.exit(f"brook ps exited: see {log.name}")
        time.sleep(0.1)
    proc.kill()
    sys.exit("brook ps did not report its address in 20 s")


def run_variant(args, data, name, flags, seed):
    procs, addrs = [], []
    logs = []
    try:
        for i in range(2):
            log = open(os.path.join(args.work, f"ps-{name}-{i}.log"), "w")
            logs.append(log)
            p, a = start_ps(args.brook, i, 2, log)
            procs.append(p)
            addrs.append(a)
        cmd = [args.brook, "trainer", "--ps", ",".join(addrs),
               "--spec", os.path.join(data, "feature_spec.yaml"),
               "--model", os.path.join(args.source, "examples/criteo/deepfm.yaml"),
               "--data", os.path.join(data, "train-*"),
               "--eval-data", os.path.join(data, "test-*"),
               "--batch-size", "256", "--epochs", "1", "--seed", str(seed),
               "--embedding-optimizer", "adam", "--embedding-lr", "0.003",
               "--dense-lr", "0.003", "--staleness", str(args.staleness),
               "--metrics-listen", ""] + flags
        if "--cache-rows" in flags:
            cmd += ["--cache-refresh-steps", str(args.refresh)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            sys.exit(f"{name}: trainer failed:\n{out.stderr[-3000:]}")
        line = [l for l in out.stdout.splitlines() if l.startswith("{")][-1]
        return json.loads(line)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
        for log in logs:
            log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--brook", default="build/bin/brook", help="the brook binary")
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository (for examples/criteo/deepfm.yaml)")
    ap.add_argument("--examples", type=int, default=500000, help="training examples to generate")
    ap.add_argument("--cardinality-max", default="1e6", help="brook data gen --cardinality-max")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma-separated, from: " + ", ".join(VARIANTS))
    ap.add_argument("--repeats", type=int, default=2, help="runs of each variant (seeds 1..N)")
    ap.add_argument("--refresh", type=int, default=2, help="--cache-refresh-steps of +cache")
    ap.add_argument("--staleness", type=int, default=0,
                    help="0: synchronous, so a run is a function of its variant and seed")
    ap.add_argument("--work", default="",
                    help="keep data and logs here (default: a temporary dir, removed on success)")
    ap.add_argument("--json", default="", help="write the results here")
    args = ap.parse_args()
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        ap.error(f"--variants: unknown {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    args.brook = os.path.abspath(args.brook)
    own_work = not args.work
    args.work = args.work or tempfile.mkdtemp(prefix="brook-wire-cache-")
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "data")
    ok = False
    try:
        # Data made with other arguments is made again, not reused.
        gen = [args.brook, "data", "gen", "--out", data, "--train", str(args.examples), "--test",
               str(max(args.examples // 10, 10000)), "--shards", "2", "--cardinality-max",
               args.cardinality_max, "--seed", "3"]
        marker = os.path.join(args.work, "data.args")
        made = open(marker).read() if os.path.exists(marker) else ""
        if made != " ".join(gen[2:]) or not os.path.exists(os.path.join(data, "feature_spec.yaml")):
            shutil.rmtree(data, ignore_errors=True)
            subprocess.run(gen, check=True, capture_output=True)
            with open(marker, "w") as f:
                f.write(" ".join(gen[2:]))
        with open(os.path.join(data, "ground_truth.json")) as f:
            bayes = json.load(f)["test"]["bayes_auc"]
        results = {n: [] for n in names}
        for repeat in range(args.repeats):
            for n in names:
                r = run_variant(args, data, n, VARIANTS[n], seed=repeat + 1)
                results[n].append(r)
                print(f"{n}: auc {r['eval']['auc']:.4f} examples/s "
                      f"{r['examples'] / r['wall_seconds']:.0f} bytes/example "
                      f"{r['ps_payload_bytes_per_example']} cache {r.get('cache')}", flush=True)
        base = results[names[0]]
        base_auc = sum(r["eval"]["auc"] for r in base) / len(base)
        base_rate = sum(r["examples"] / r["wall_seconds"] for r in base) / len(base)
        print(f"\nBayes-optimal test AUC {bayes}")
        print("| variant | test AUC (mean) | vs " + names[0] + " | AUC by seed | examples/s | vs " +
              names[0] + " | pull / push bytes per example | cache hit ratio |")
        print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
        for n in names:
            rs = results[n]
            auc = sum(r["eval"]["auc"] for r in rs) / len(rs)
            by_seed = " / ".join(f"{r['eval']['auc']:.4f}" for r in rs)
            rate = sum(r["examples"] / r["wall_seconds"] for r in rs) / len(rs)
            b = rs[0]["ps_payload_bytes_per_example"]
            hit = rs[0].get("cache", {}).get("hit_ratio")
            print(f"| {n} | {auc:.4f} | {auc - base_auc:+.4f} | {by_seed} | {rate:.0f} | "
                  f"{rate / base_rate:.2f}x "
                  f"| {b['pull']:.0f} / {b['push']:.0f} | "
                  f"{'—' if hit is None else f'{hit:.3f}'} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"bayes_auc": bayes, "results": results}, f)
        ok = True
    finally:
        if own_work and ok:
            shutil.rmtree(args.work, ignore_errors=True)
        elif own_work:
            print(f"logs and data kept in {args.work}", file=sys.stderr)


if __name__ == "__main__":
    main()
