#!/usr/bin/env python3
"""Examples/s of the demo model on a cluster of hosts, by link and size.

For 1, 2 and 4 PS shards, a cluster of network namespaces (netns_cluster.py,
mutual TLS and a token, as in the fault tests) with 4 trainer processes runs
the `brook local` demo's model (DeepFM, dim 8, [128, 64], batch 256,
staleness 2) with 1, 2 and 4 trainers over links shaped to 10 Gbit/s and
1 Gbit/s (tc tbf), and the same processes all on 127.0.0.1 in one namespace.
Per run: examples/s of the training phase (job start to "all epochs
trained"), the trainers' bytes on the wire each way per example (their
links' counters), the highest one-second rate on any link one way (a PS's,
mostly), how many packets the shapers held back (tbf overlimits: 0, the
link's rate never bound), the CPU the cluster's processes used (cores, from /proc/PID/stat)
and how busy the machine's CPUs were (/proc/stat): together they say whether
the CPU or the emulated link bounds a run.

Usage (root): python3 tests/cluster/cluster_bench.py --brook build/bin/brook
  [--train 200000] [--ps 1,2,4] [--trainers 1,2,4] [--json OUT.json]
Prints a Markdown table (BENCHMARKS.md "Multi-host cluster").

  --jobs-in-a-row N: instead, N runs of one job on one cluster on 127.0.0.1
  (PS with data dirs): examples/s, PS CPU seconds and RSS of each; exits 1
  when the last is slower than 0.8x the second or costs the PS 1.25x the CPU.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster as nc  # noqa: E402


def cpu_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def event_time(events, text):
    for line in events.splitlines():
        if text in line:
            stamp = line.split()[0]
            return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
    raise RuntimeError(f"no event '{text}' in:\n{events}")


def process_cpu_seconds(pids):
    """User + system CPU seconds used so far by the processes `pids`."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (FileNotFoundError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def run_job(cluster, spec, trainers, link):
    watched = cluster.trainers + cluster.ps
    pids = [n.process.pid for n in cluster.nodes if n.process and n.process.poll() is None]
    cpu0, (busy0, total0), start = process_cpu_seconds(pids), cpu_ticks(), time.time()
    before = {n.name: nc.link_bytes(n) for n in watched} if link else {}
    held0 = sum(nc.shaper_overlimits(cluster, n) for n in cluster.nodes) if link else 0
    job_id = cluster.cli("submit", spec).stdout.strip()
    # Polled once a second: each poll is a `brook status` process, and
    # polling faster would cost the CPU being measured.
    peak, last, last_t = 0.0, dict(before), time.time()
    while True:
        time.sleep(1)
        if link:
            now, now_t = {n.name: nc.link_bytes(n) for n in watched}, time.time()
            for n in watched:
                rate = max(now[n.name][0] - last[n.name][0], now[n.name][1] - last[n.name][1])
                peak = max(peak, rate / (now_t - last_t))
            last, last_t = now, now_t
        job = cluster.job(job_id)
        if nc.job_ended(job):
            break
    wall = time.time() - start
    cpu1, (busy1, total1) = process_cpu_seconds(pids), cpu_ticks()
    if job["state"] != "SUCCEEDED":
        raise RuntimeError(f"{job_id}: {job['state']}: {job['message']}")
    events = cluster.cli("logs", job_id).stdout
    seconds = event_time(events, "all 1 epochs trained") - event_time(events, "started;")
    examples = job["examples_per_epoch"][0]
    out = {"examples_per_second": examples / seconds, "seconds": seconds,
           "cluster_cpu_cores": (cpu1 - cpu0) / wall,
           "machine_cpu_busy": (busy1 - busy0) / max(1, total1 - total0)}
    if link:
        rx = tx = 0
        for n in cluster.trainers:
            r, s = nc.link_bytes(n)
            rx += r - before[n.name][0]
            tx += s - before[n.name][1]
        out["bytes_in_per_example"] = rx / examples
        out["bytes_out_per_example"] = tx / examples
        out["peak_link_mbytes_per_second"] = peak / 1e6
        out["shaper_overlimits"] = (
            sum(nc.shaper_overlimits(cluster, n) for n in cluster.nodes) - held0)
    return out


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(f.read().split("VmRSS:")[1].split()[0]) // 1024
    except (FileNotFoundError, IndexError):
        return 0


def jobs_in_a_row(args, work, spec, n_ps, trainers):
    """One long-lived cluster on 127.0.0.1 (PS with data dirs, as in
    production) runs the same job `args.jobs_in_a_row` times; a job must not
    get slower, or cost its PS more CPU, for the jobs before it (their
    tables stay `retention` on the PS). Returns the exit code."""
    cluster = nc.Cluster(args.brook, os.path.join(work, "row"), n_ps=n_ps,
                         n_trainers=trainers, loopback=True)
    rows = []
    with cluster:
        cluster.start_all()
        for k in range(args.jobs_in_a_row):
            ps_pids = [n.process.pid for n in cluster.ps]
            cpu0 = process_cpu_seconds(ps_pids)
            r = run_job(cluster, spec, trainers, link=False)
            r.update(job=k + 1, ps_cpu_seconds=process_cpu_seconds(ps_pids) - cpu0,
                     ps_rss_mib=max(rss_mib(p) for p in ps_pids))
            rows.append(r)
            print(json.dumps(r), flush=True)
    print(f"\n{n_ps} PS (data dirs), {trainers} trainers, one cluster, the same job "
          f"{len(rows)} times:\n")
    print("| job | examples/s | PS CPU seconds (all PS) | largest PS RSS, MiB |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['job']} | {r['examples_per_second']:.0f} | {r['ps_cpu_seconds']:.1f} "
              f"| {r['ps_rss_mib']} |")
    # The first job pays the cold start; compare the second with the last.
    first, last = rows[1], rows[-1]
    speed = last["examples_per_second"] / first["examples_per_second"]
    cpu = last["ps_cpu_seconds"] / max(0.1, first["ps_cpu_seconds"])
    ok = speed >= 0.8 and cpu <= 1.25
    print(f"\nlast / second job: examples/s {speed:.2f} (bar >= 0.80), PS CPU {cpu:.2f} "
          f"(bar <= 1.25): {'PASSED' if ok else 'FAILED'}")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--brook", default="build/bin/brook")
    p.add_argument("--train", default="200000")
    p.add_argument("--ps", default="1,2,4")
    p.add_argument("--trainers", default="1,2,4")
    p.add_argument("--links", default="10gbit,1gbit", help="tc rates, in the order run")
    p.add_argument("--json")
    p.add_argument("--jobs-in-a-row", type=int, default=0,
                   help="instead: N jobs one after another on one cluster on 127.0.0.1 "
                        "(the first --ps and --trainers counts); fails when they slow down")
    args = p.parse_args()
    ok, why = nc.namespaces_can_be_made()
    if not ok:
        print(f"SKIPPED: {why}")
        return 77
    ps_counts = [int(x) for x in args.ps.split(",")]
    trainer_counts = [int(x) for x in args.trainers.split(",")]
    work = tempfile.mkdtemp(prefix="brook-cluster-bench-")
    data = os.path.join(work, "data")
    subprocess.run([args.brook, "data", "gen", "--out", data, "--train", args.train, "--test",
                    "5000", "--shards", "8", "--test-shards", "1", "--seed", "7"],
                   check=True, capture_output=True)
    specs = {}
    for t in trainer_counts:
        specs[t] = os.path.join(work, f"job-t{t}.yaml")
        nc.write_generated_job(
            specs[t], f"bench-t{t}", data, trainers=t, records_per_unit=25000,
            model="{type: deepfm, embedding_dim: 8, hidden: [128, 64], activation: relu, "
                  "loss: logloss}",
            embedding_optimizer="{type: adam, learning_rate: 0.003}",
            dense_optimizer="{type: adam, learning_rate: 0.003}",
            training="{batch_size: 256, epochs: 1, staleness: 2, seed: 1}")
    if args.jobs_in_a_row:
        try:
            return jobs_in_a_row(args, work, specs[trainer_counts[0]], ps_counts[0],
                                 trainer_counts[0])
        finally:
            shutil.rmtree(work, ignore_errors=True)
    results = []
    try:
        for n_ps in ps_counts:
            for loopback in (True, False):
                cluster = nc.Cluster(args.brook, os.path.join(work, f"c{n_ps}{int(loopback)}"),
                                     n_ps=n_ps, n_trainers=max(trainer_counts), loopback=loopback)
                with cluster:
                    cluster.start_all()
                    for rate in ([None] if loopback else args.links.split(",")):
                        if rate:
                            cluster.set_rate(rate)
                        for t in trainer_counts:
                            r = run_job(cluster, specs[t], t, link=not loopback)
                            r.update(ps=n_ps, trainers=t, link=rate or "127.0.0.1")
                            results.append(r)
                            print(json.dumps(r), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cores = os.cpu_count()
    print(f"\n| PS | trainers | link | examples/s | vs 127.0.0.1 | bytes/example in / out "
          f"| peak link, one way, MB/s | packets held by the shaper | cluster CPU, cores of {cores} | machine CPU busy |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    base = {(r["ps"], r["trainers"]): r["examples_per_second"] for r in results
            if r["link"] == "127.0.0.1"}
    for r in results:
        ratio = r["examples_per_second"] / base.get((r["ps"], r["trainers"]), float("nan"))
        wire = (f"{r['bytes_in_per_example']:.0f} / {r['bytes_out_per_example']:.0f}"
                if "bytes_in_per_example" in r else "—")
        mbs = (f"{r['peak_link_mbytes_per_second']:.0f}"
               if "peak_link_mbytes_per_second" in r else "—")
        print(f"| {r['ps']} | {r['trainers']} | {r['link']} | {r['examples_per_second']:.0f} "
              f"| {ratio:.2f} | {wire} | {mbs} | {r.get('shaper_overlimits', '—')} "
              f"| {r['cluster_cpu_cores']:.2f} "
              f"| {r['machine_cpu_busy']:.0%} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
