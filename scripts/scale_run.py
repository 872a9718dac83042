#!/usr/bin/env python3
"""A run at recommender scale on one machine (BENCHMARKS.md, issue 27).

Generates Criteo-shaped data whose 26 categorical features have cardinality
up to 1e9 (Zipf), enough examples to create --target-rows distinct rows, and
trains DeepFM on it with one `brook trainer` through two `brook ps` processes
with --data-dir under --memory-limit (well below the rows' size: RocksDB holds
the rest). Meanwhile it samples the RSS of every process. Then it measures a
checkpoint of all rows (a PS writes its restart point) and a restore (both PS
killed and restarted on their data dirs), and prints the figures: rows,
examples/s, AUC beside the Bayes-optimal AUC, the tier's hit ratio, RSS over
time, checkpoint and restore GB/s. --small runs the same model with every row
in memory on a smaller id space, for the examples/s to compare with.

  python3 scripts/scale_run.py --brook build/bin/brook --work /data/scale \\
      [--examples 6e6] [--zipf 0.9] [--memory-limit 2GiB] [--json out.json]
"""
import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request


def log(msg):
    print(time.strftime("%H:%M:%S"), msg, flush=True)


class Sampler(threading.Thread):
    """RSS of named processes every `period` seconds: rows of (t, name, MiB)."""

    def __init__(self, period=2.0):
        super().__init__(daemon=True)
        self.period, self.procs, self.rows, self.stop = period, {}, [], threading.Event()
        self.metrics_urls, self.breakdown = {}, []
        self.t0 = time.time()

    def watch(self, name, pid, metrics_url=None):
        self.procs[name] = pid
        if metrics_url:
            self.metrics_urls[name] = metrics_url

    def sample_breakdown(self, t):
        """Where a PS's memory goes: rows (as counted against the limit), the
        tables' index and headers, RocksDB by kind, and the rest of the RSS."""
        for name, url in list(self.metrics_urls.items()):
            try:
                m = scrape(url)
            except OSError:
                continue
            row = {"t": t, "name": name,
                   "rss": metric_sum(m, "process_resident_memory_bytes"),
                   "rows_charged": metric_sum(m, "brook_ps_memory_used_bytes"),
                   "tables": metric_sum(m, "brook_ps_table_memory_bytes{")}
            for kind in ("block_cache", "memtables", "table_readers"):
                row["rocksdb_" + kind] = metric_sum(m, "brook_ps_rocksdb_memory_bytes{",
                                                    f'kind="{kind}"')
            self.breakdown.append(row)

    def run(self):
        n = 0
        while not self.stop.wait(self.period):
            n += 1
            if n % 5 == 0:
                self.sample_breakdown(round(time.time() - self.t0, 1))
            for name, pid in list(self.procs.items()):
                try:
                    with open(f"/proc/{pid}/status") as f:
                        kb = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
                    self.rows.append((round(time.time() - self.t0, 1), name, kb / 1024))
                except (OSError, AttributeError):
                    pass

    def summary(self):
        by = {}
        for t, name, mib in self.rows:
            by.setdefault(name, []).append((t, mib))
        out = {}
        for row in self.breakdown:  # the breakdown at each PS's largest RSS
            best = out.setdefault(row["name"], {}).get("at_max_rss")
            if best is None or row["rss"] > best["rss"]:
                out[row["name"]]["at_max_rss"] = {k: (round(v / 2**20, 1) if k not in ("t", "name") else v)
                                                  for k, v in row.items() if k != "name"}
        for name, series in by.items():
            mibs = [m for _, m in series]
            # RSS at each tenth of the process's life: flat or growing?
            marks = [series[int(i * (len(series) - 1) / 10)][1] for i in range(11)]
            out.setdefault(name, {}).update({"max_mib": max(mibs), "last_mib": mibs[-1],
                                             "deciles_mib": [round(m) for m in marks]})
        return out


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    metrics = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name_labels, value = line.rsplit(" ", 1)
        metrics[name_labels] = float(value)
    return metrics


def metric_sum(metrics, prefix, label=""):
    return sum(v for k, v in metrics.items() if k.startswith(prefix) and label in k)


class Ps:
    def __init__(self, args, index, sampler, name=""):
        self.args, self.index, self.sampler = args, index, sampler
        self.name = name or f"ps-{index}"  # what the RSS samples call it
        self.dir = os.path.join(args.work, f"ps-{index}")
        self.proc = None

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        logf = open(os.path.join(self.args.work, f"ps-{self.index}.log"), "a")
        offset = logf.tell()  # a restart appends: read only its own lines
        t0 = time.time()
        self.proc = subprocess.Popen(
            self.args.ps_wrapper.split() + [self.args.brook, "ps", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
             "--shard-index", str(self.index), "--num-shards", "2", "--data-dir",
             os.path.join(self.dir, "data"), "--memory-limit", self.args.memory_limit]
            + self.args.ps_flags.split(),
            stdout=logf, stderr=subprocess.STDOUT)
        deadline = time.time() + self.args.start_timeout
        while time.time() < deadline:
            with open(logf.name) as f:
                f.seek(offset)
                text = f.read()
            found = re.findall(r"listening on (127\.0\.0\.1:\d+) metrics on (127\.0\.0\.1:\d+)", text)
            if found:
                self.address, self.metrics = found[-1]
                break
            if self.proc.poll() is not None:
                sys.exit(f"PS {self.index} exited; see {logf.name}")
            time.sleep(0.2)
        else:
            sys.exit(f"PS {self.index} did not start in {self.args.start_timeout} s")
        self.started_seconds = time.time() - t0
        self.sampler.watch(self.name, self.proc.pid, f"http://{self.metrics}/metrics")
        return self

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brook", default="build/bin/brook")
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--work", required=True)
    ap.add_argument("--examples", default="6e6")
    ap.add_argument("--zipf", default="0.9")
    ap.add_argument("--cardinality", default="1e9")
    ap.add_argument("--memory-limit", default="2GiB", help="per PS (brook ps --memory-limit)")
    ap.add_argument("--batch-size", default="2048")
    ap.add_argument("--admission", type=int, default=0,
                    help="tables' admission_min_count: an id gets a row on its Nth push (0: first)")
    ap.add_argument("--ps-flags", default="", help="more `brook ps` flags, e.g. --rocksdb-cache-mib 64")
    ap.add_argument("--small", action="store_true",
                    help="every row in memory: --cardinality-max 1e5, no --memory-limit pressure")
    ap.add_argument("--ps-wrapper", default="", help="a command `brook ps` runs under, e.g. heaptrack")
    ap.add_argument("--start-timeout", type=float, default=1800)
    ap.add_argument("--json", default="")
    ap.add_argument("--restart-only", action="store_true",
                    help="only time a restart (both PS killed -9, then started) on --work's data dirs")
    args = ap.parse_args()
    args.brook = os.path.abspath(args.brook)
    if args.restart_only:
        sampler = Sampler()
        ps = [Ps(args, i, sampler).start() for i in range(2)]
        for p in ps:
            p.kill()
        t0 = time.time()
        restarted = [Ps(args, i, sampler).start() for i in range(2)]
        seconds = time.time() - t0
        for p in restarted:
            p.stop()
        print(json.dumps({"first_start_seconds": [p.started_seconds for p in ps],
                          "restart_seconds": seconds}))
        return
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "data")
    result = {"examples": float(args.examples), "zipf": args.zipf,
              "memory_limit": args.memory_limit, "small": args.small}
    if not os.path.exists(os.path.join(data, "feature_spec.yaml")):
        gen = [args.brook, "data", "gen", "--out", data, "--train", args.examples, "--test",
               "200000", "--shards", "16", "--seed", "7", "--zipf", args.zipf]
        if args.small:
            gen += ["--cardinality-max", "1e5"]
        else:
            gen += ["--cardinalities", ",".join([args.cardinality] * 26)]
        log("generating: " + " ".join(gen[1:]))
        t0 = time.time()
        subprocess.run(gen, check=True, stdout=subprocess.DEVNULL)
        result["gen_seconds"] = time.time() - t0
    with open(os.path.join(data, "ground_truth.json")) as f:
        result["bayes_auc"] = json.load(f)["test"]["bayes_auc"]
    # Rows the training creates: every distinct id of a categorical feature
    # gets a row in its deep table and one in its wide (first-order) table.
    cached = os.path.join(data, "scale_run_distinct.json")  # the count takes minutes
    if os.path.exists(cached):
        with open(cached) as f:
            distinct = json.load(f)["distinct_ids_estimate"]
    else:
        stats = subprocess.run([args.brook, "data", "stats", "--json"] +
                               sorted(glob.glob(os.path.join(data, "train-*.tfrecord"))),
                               check=True, capture_output=True, text=True)
        distinct = sum(f["distinct_estimate"] for f in json.loads(stats.stdout)["features"]
                       if f["name"].startswith("C"))
        with open(cached, "w") as f:
            json.dump({"distinct_ids_estimate": distinct}, f)
    result.update({"distinct_ids_estimate": distinct, "rows_created_estimate": 2 * distinct})
    log(f"{distinct / 1e6:.1f} M distinct ids (estimate): {2 * distinct / 1e6:.1f} M rows to create")

    sampler = Sampler()
    sampler.start()
    ps = [Ps(args, i, sampler).start() for i in range(2)]
    log("PS at " + ", ".join(p.address for p in ps))
    ckpt = os.path.join(args.work, "ckpt")
    job = os.path.join(args.work, "job.yaml")
    with open(job, "w") as f:
        f.write(f"""name: scale-run
data: {{train: {data}/train-*.tfrecord, eval: {data}/test-*.tfrecord}}
features: {data}/feature_spec.yaml
model_file: {args.source}/examples/criteo/deepfm.yaml
optimizer:
  embedding: {{type: adagrad, learning_rate: 0.05}}
  dense: {{type: adam, learning_rate: 0.003}}
training: {{batch_size: {args.batch_size}, epochs: 1, staleness: 2, seed: 1}}
tables: {{default: {{memory_budget: 64GiB, admission_min_count: {args.admission}}}}}
""")
    trainer = subprocess.Popen(
        [args.brook, "trainer", "--job", job, "--ps", ",".join(p.address for p in ps),
         "--metrics-listen", "127.0.0.1:0", "--retry-seconds", "600"],
        stdout=subprocess.PIPE, stderr=open(os.path.join(args.work, "trainer.log"), "w"),
        text=True)
    sampler.watch("trainer", trainer.pid)
    t0 = time.time()
    out, _ = trainer.communicate()
    result["train_wall_seconds"] = time.time() - t0
    if trainer.returncode != 0:
        sys.exit(f"trainer failed ({trainer.returncode}); see {args.work}/trainer.log")
    summary = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    result["trainer"] = summary
    result["examples_per_second"] = summary["examples"] / summary["wall_seconds"]
    result["auc"] = summary.get("eval", {}).get("auc")
    log(f"trained: {summary['examples']} examples, {result['examples_per_second']:.0f}/s, "
        f"AUC {result['auc']} (Bayes {result['bayes_auc']:.4f})")

    rows = cold = hot = cold_found = absent = 0.0
    for p in ps:
        m = scrape(f"http://{p.metrics}/metrics")
        rows += metric_sum(m, "brook_ps_table_rows{")
        cold += metric_sum(m, "brook_ps_table_cold_rows{")
        hot += metric_sum(m, "brook_ps_tier_lookups_total{", 'found="hot"')
        cold_found += metric_sum(m, "brook_ps_tier_lookups_total{", 'found="cold"')
        absent += metric_sum(m, "brook_ps_tier_lookups_total{", 'found="absent"')
    lookups = hot + cold_found + absent
    result.update({"rows": rows, "cold_rows": cold,
                   "tier_hot_ratio": hot / lookups if lookups else None,
                   "tier_lookups": {"hot": hot, "cold": cold_found, "absent": absent}})
    log(f"rows {rows:.0f} ({cold:.0f} in RocksDB); memory hit ratio {result['tier_hot_ratio']}")

    # Checkpoint of every row: a one-step standalone run of the same job with
    # a checkpoint section ends with a final checkpoint, for which every PS
    # also writes its restart point into its data dir (what a restart reads).
    with open(job, "a") as f:
        f.write(f"checkpoint: {{dir: {ckpt}, interval_seconds: 100000, keep: 1}}\n")
    t0 = time.time()
    r = subprocess.run([args.brook, "trainer", "--job", job, "--ps", ",".join(p.address for p in ps),
                        "--max-steps", "1", "--metrics-listen", ""],
                       capture_output=True, text=True)
    if r.returncode != 0:
        log("checkpoint run failed: " + r.stderr[-2000:])
    else:
        result["checkpoint_run_seconds"] = time.time() - t0
        m = [scrape(f"http://{p.metrics}/metrics") for p in ps]
        secs = [metric_sum(x, "brook_ps_last_checkpoint_seconds{") for x in m]
        size = [metric_sum(x, "brook_ps_last_checkpoint_bytes{") for x in m]
        result["checkpoint_seconds"] = max(secs)
        result["checkpoint_bytes"] = sum(size)
        log(f"checkpoint: {sum(size) / 1e9:.2f} GB in {max(secs):.1f} s per PS (slowest)")

    # Restore: kill -9 both PS, restart on their data dirs, time to serving.
    for p in ps:
        p.kill()
    t0 = time.time()
    restarted = [Ps(args, i, sampler, f"ps-{i}-restarted").start() for i in range(2)]
    result["restore_seconds"] = time.time() - t0
    result["restore_gb_per_second"] = (result.get("checkpoint_bytes", 0) / 1e9 /
                                       result["restore_seconds"])
    log(f"restart of both PS on their data dirs: {result['restore_seconds']:.1f} s")
    for p in restarted:
        p.stop()
    sampler.stop.set()
    result["rss"] = sampler.summary()
    with open(os.path.join(args.work, "rss.csv"), "w") as f:
        f.write("seconds,process,rss_mib\n")
        for t, name, mib in sampler.rows:
            f.write(f"{t},{name},{mib:.1f}\n")
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
