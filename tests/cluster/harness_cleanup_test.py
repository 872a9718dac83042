#!/usr/bin/env python3
"""The namespace harness leaves nothing behind, however its process ends.

Each case runs a harness in a child process (a cluster of a chief, a PS, a
trainer namespace and a client, with a real `brook ps` running in its
namespace), ends that child one way, and checks that every namespace named
for it and every process it started are gone, and that the machine's own
network (the root namespace's links) is as it was:
  exception  the test body raises inside `with Cluster(...)`
  sigint     Ctrl-C (KeyboardInterrupt)
  sigkill    kill -9: nothing of the harness runs; its reaper cleans up
  sweep      a harness and its reaper both killed: the next harness's up()
             removes the namespaces of the dead one

Usage: harness_cleanup_test.py --brook BROOK
Exit 0 passed, 1 failed, 77 SKIPPED (namespaces cannot be made here).
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netns_cluster as nc  # noqa: E402


def child(args):
    """The harness under test: brings a cluster up, writes the pids of its
    PS and reaper to the ready file, then ends as `args.end` says (on its
    own once the test writes the go file, or by the test's signal)."""
    cluster = nc.Cluster(args.brook, args.workdir, n_ps=1, n_trainers=1)
    with cluster:
        ps = cluster.start_ps(0)
        pids = nc.run("ip", "netns", "pids", cluster.ps[0].ns).stdout.split()
        with open(args.ready + ".tmp", "w") as f:
            f.write(f"{ps.pid} {' '.join(pids)} {cluster._reaper.pid}\n")
        os.rename(args.ready + ".tmp", args.ready)
        while True:  # until the test has seen the cluster up
            if args.end == "exception" and os.path.exists(args.ready + ".go"):
                raise RuntimeError("a failing test body")
            time.sleep(0.05)


def root_links():
    return sorted(line.split(":")[1].strip()
                  for line in nc.run("ip", "-o", "link", "show").stdout.splitlines())


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def run_case(brook, work, end):
    """Ends a harness with `end`; returns a list of what it left behind."""
    ready = os.path.join(work, f"{end}.ready")
    log = open(os.path.join(work, f"{end}.log"), "w")
    links_before = root_links()
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--child", "--brook", brook, "--workdir",
         os.path.join(work, end), "--ready", ready, "--end", end],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while not os.path.exists(ready):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            proc.wait()
            with open(log.name) as f:
                return [f"the harness never came up (exit {proc.returncode}):\n{f.read()[-2000:]}"]
        time.sleep(0.1)
    with open(ready) as f:
        pids = [int(p) for p in f.read().split()]
    reaper = pids.pop()
    if not nc._harness_namespaces().get(proc.pid):
        return ["no namespaces named for the harness while it ran"]

    with open(ready + ".go", "w"):
        pass
    if end == "sigint":
        proc.send_signal(signal.SIGINT)
    elif end in ("sigkill", "sweep"):
        if end == "sweep":
            os.kill(reaper, signal.SIGKILL)
        proc.kill()
    proc.wait(timeout=60)
    if end == "sweep":
        if not nc._harness_namespaces().get(proc.pid):
            return ["with the reaper killed too, nothing should have cleaned up yet"]
        nc.Cluster(brook, os.path.join(work, "next"), n_ps=1, n_trainers=1).up().down()

    left = []
    deadline = time.time() + 20  # the reaper polls every 0.5 s
    while time.time() < deadline:
        left = []
        names = nc._harness_namespaces().get(proc.pid, [])
        if names:
            left.append(f"namespaces {names}")
        running = [p for p in pids if alive(p)]
        if running:
            left.append(f"processes {running} (the PS and what ran in its namespace)")
        if not left:
            break
        time.sleep(0.25)
    if root_links() != links_before:
        left.append(f"root namespace links changed: {links_before} -> {root_links()}")
    return left


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--brook", required=True)
    p.add_argument("--child", action="store_true")
    p.add_argument("--workdir")
    p.add_argument("--ready")
    p.add_argument("--end")
    args = p.parse_args()
    if args.child:
        try:
            child(args)
        except KeyboardInterrupt:
            return 130
        return 0
    ok, why = nc.namespaces_can_be_made()
    if not ok:
        print(f"SKIPPED: {why}")
        return 77
    failed = 0
    with tempfile.TemporaryDirectory(prefix="brook-harness-cleanup-") as work:
        for end in ("exception", "sigint", "sigkill", "sweep"):
            start = time.time()
            left = run_case(args.brook, work, end)
            status = "ok" if not left else "FAILED: left " + "; ".join(left)
            print(f"{end}: {status} ({time.time() - start:.1f} s)", flush=True)
            failed += bool(left)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
