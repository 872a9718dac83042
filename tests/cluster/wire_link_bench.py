#!/usr/bin/env python3
"""Wire precision where the network binds: `brook bench ps --target` over a
shaped link (BENCHMARKS.md, issue 27).

A cluster of namespaces (netns_cluster.py, plaintext): one PS shard (memory
only) with a `brook bench grpc-ceiling` beside it in its namespace, the bench
in the client's namespace, every link shaped to --rate. For each --wire the
bench measures pull and push rows/s in alternating slices with the bare
ceiling, which always moves the fp32 bytes: with bf16 or fp16 a ratio past
100% is what halving the rows' bytes bought on a link that is the
bottleneck.

Usage: wire_link_bench.py --brook build/bin/brook [--rate 1gbit] [--dim 64]
Exit 0 measured (the table on stdout), 1 failed, 77 SKIPPED (no namespaces).
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brook", default=nc.DEFAULT_BROOK)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--dim", default="64")
    ap.add_argument("--threads", default="4")
    ap.add_argument("--seconds", default="6")
    ap.add_argument("--slices", default="8")
    ap.add_argument("--wires", default="fp32,bf16,fp16")
    args = ap.parse_args()
    ok, why = nc.namespaces_can_be_made()
    if not ok:
        print(f"SKIPPED: {why}")
        return 77
    work = tempfile.mkdtemp(prefix="brook-wire-link-")
    cluster = nc.Cluster(args.brook, os.path.join(work, "cluster"), n_ps=1, n_trainers=0,
                         tls=False)
    rows = []
    with cluster:
        cluster.start_ps(0)
        ps = cluster.ps[0]
        log = open(os.path.join(work, "ceiling.log"), "w")
        ceiling = subprocess.Popen(
            ["ip", "netns", "exec", ps.ns, cluster.brook, "bench", "grpc-ceiling", "--listen",
             f"{ps.ip}:{CEILING_PORT}"], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        try:
            cluster.set_rate(args.rate)
            for wire in args.wires.split(","):
                argv = ["ip", "netns", "exec", cluster.client.ns, cluster.brook, "bench", "ps",
                        "--target", cluster.ps_addresses(), "--ceiling-target",
                        f"{ps.ip}:{CEILING_PORT}", "--dims", args.dim, "--threads",
                        args.threads, "--rows", "200000", "--seconds", args.seconds, "--slices",
                        args.slices, "--wire", wire, "--json"]
                r = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                                   env=dict(os.environ, **cluster.env))
                if r.returncode != 0:
                    print(f"bench --wire {wire}: exit {r.returncode}\n{r.stdout}{r.stderr}")
                    return 1
                result = json.loads(r.stdout[r.stdout.rindex("\n{\n") + 1:])
                run0 = result["runs"][0]
                rows.append((wire, run0))
                print(f"--wire {wire}: pull {run0['grpc_pull_mrows_s']:.3f} vs bare "
                      f"{run0['bare_grpc_pull_mrows_s']:.3f}, push {run0['grpc_push_mrows_s']:.3f}"
                      f" vs bare {run0['bare_grpc_push_mrows_s']:.3f} M rows/s", flush=True)
        finally:
            ceiling.terminate()
            ceiling.wait(timeout=30)
    print(f"\nlink {args.rate}, dim {args.dim}, {args.threads} threads, 4096 keys a call; the "
          "bare ceiling moves fp32 bytes")
    print("| wire | pull M rows/s | bare (fp32 bytes) | ratio | push M rows/s | bare | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for wire, r in rows:
        print(f"| {wire} | {r['grpc_pull_mrows_s']:.3f} | {r['bare_grpc_pull_mrows_s']:.3f} | "
              f"{r['grpc_pull_mrows_s'] / r['bare_grpc_pull_mrows_s']:.2f}x | "
              f"{r['grpc_push_mrows_s']:.3f} | {r['bare_grpc_push_mrows_s']:.3f} | "
              f"{r['grpc_push_mrows_s'] / r['bare_grpc_push_mrows_s']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
