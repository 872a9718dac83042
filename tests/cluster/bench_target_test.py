#!/usr/bin/env python3
"""`brook bench ps --target` across network namespaces.

A cluster of namespaces (netns_cluster.py: 2 PS shards with data dirs, each
its own host on 10.77.0.0/24, mutual TLS and a token in the environment) and
a `brook bench grpc-ceiling` beside each shard in its namespace; the bench
runs in the client's namespace against both. Checks: exit 0, positive rates
for the PS and the ceiling, the TLS and token it used named, the servers'
CPU not claimed (their processes are not in its namespace), and no
`bench-...` table left on either shard's /metrics.

Usage: bench_target_test.py --brook BROOK
Exit 0 passed, 1 failed, 77 SKIPPED (namespaces cannot be made here).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster as nc  # noqa: E402

CEILING_PORT = 7001


def metrics_text(cluster, node):
    text = cluster.metrics_text(node)
    if text is None:
        raise RuntimeError(f"{node.name} /metrics: no answer")
    return text


def run(brook, work):
    cluster = nc.Cluster(brook, os.path.join(work, "cluster"), n_ps=2, n_trainers=0, tls=True)
    ceilings = []
    failures = []
    with cluster:
        for i in range(len(cluster.ps)):
            cluster.start_ps(i)
        for ps in cluster.ps:
            log = open(os.path.join(work, f"{ps.name}-ceiling.log"), "w")
            ceilings.append(subprocess.Popen(
                ["ip", "netns", "exec", ps.ns, cluster.brook, "bench", "grpc-ceiling", "--listen",
                 f"{ps.ip}:{CEILING_PORT}"], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL))
        try:
            argv = ["ip", "netns", "exec", cluster.client.ns, cluster.brook, "bench", "ps",
                    "--target", cluster.ps_addresses(), "--ceiling-target",
                    ",".join(f"{ps.ip}:{CEILING_PORT}" for ps in cluster.ps),
                    "--dims", "8", "--threads", "1", "--rows", "20000", "--seconds", "0.4",
                    "--slices", "2", "--json"]
            r = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                               env=dict(os.environ, **cluster.env))
            out = r.stdout + r.stderr
            if r.returncode != 0:
                return [f"bench exit {r.returncode}:\n{out}"]
            result = json.loads(r.stdout[r.stdout.rindex("\n{\n") + 1:])
            run0 = result["runs"][0]
            for key in ("grpc_pull_mrows_s", "bare_grpc_pull_mrows_s", "grpc_push_mrows_s",
                        "bare_grpc_push_mrows_s"):
                if not run0.get(key, 0) > 0:
                    failures.append(f"{key} not positive: {run0.get(key)}")
            if result.get("tls") is not True:
                failures.append("the bench did not use TLS from $BROOK_TLS_*")
            if "token from $BROOK_PS_TOKEN" not in out:
                failures.append("the token's source is not named")
            if "grpc_push_server_cores" in run0 or "not found here, not measured" not in out:
                failures.append("server CPU claimed for processes in other namespaces")
            table = run0["table"]
            for ps in cluster.ps:
                if f'table="{table}"' in metrics_text(cluster, ps):
                    failures.append(f"{table} still on {ps.name}")
            print(out if failures else f"ok: {table} measured on 2 shards and dropped")
        finally:
            for p in ceilings:
                p.terminate()
                p.wait(10)
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--brook", required=True)
    args = p.parse_args()
    ok, why = nc.namespaces_can_be_made()
    if not ok:
        print(f"SKIPPED: {why}")
        return 77
    with tempfile.TemporaryDirectory(prefix="brook-bench-target-") as work:
        failures = run(args.brook, work)
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
