#!/usr/bin/env python3
"""A Brook cluster of hosts on one machine: one network namespace per node.

Each node (chief, PS shards, trainers, a client) is a network namespace with
its own address on 10.77.0.0/24 and its own data dir, joined by a veth pair to
a bridge that lives in one more namespace of the harness (the "switch"), so
the subnet exists only inside the harness's namespaces: nothing is added to
the machine's own network, and two harness runs never see each other.

Faults are real network faults on those links:
  rate      tc tbf on both ends of a node's link (this kernel has no netem,
            so no emulated latency)
  loss      nftables `numgen random` drop rules on every node's output
  partition nftables drop rules by peer address, one-way or both ways
  link down `ip link set eth0 down` inside the node's namespace

Cleanup: every namespace is named bkc<harness pid>-<node>. `down()` kills
the node processes and deletes the namespaces (their veths and the bridge go
with them). When the harness dies without it (kill -9, a crashed test), a
reaper process started with the cluster notices and does the same; and every
new harness first removes namespaces whose harness pid is gone.

Run by a person:  python3 tests/cluster/netns_cluster.py up --ps 2 --trainers 2
(scripts/netns_cluster.sh); it prints how to submit a job and waits for
Ctrl-C. Used by tests/cluster/network_faults_test.py and
tests/cluster/cluster_bench.py.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PREFIX = "bkc"
SUBNET = "10.77.0"
PORT = 7000          # every node's gRPC port (its own namespace: no clashes)
METRICS_PORT = 9100  # every node's /metrics port
DEFAULT_BROOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                             "bin", "brook")


def run(*args, check=True, input=None):
    r = subprocess.run(list(args), capture_output=True, text=True, input=input)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def namespaces_can_be_made():
    """(True, "") or (False, why): root, ip/tc/nft present, a netns made."""
    if os.geteuid() != 0:
        return False, "not root (network namespaces need CAP_SYS_ADMIN)"
    for tool in ("ip", "tc", "nft"):
        if shutil.which(tool) is None:
            return False, f"`{tool}` not found (Debian: iproute2, nftables; scripts/setup.sh installs them)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    r = run("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        return False, f"`ip netns add` failed: {r.stderr.strip()}"
    try:
        r = run("ip", "netns", "exec", probe, "nft", "-f", "-", check=False,
                input="table inet probe {\n chain out { type filter hook output priority 0; }\n}\n")
        if r.returncode != 0:
            return False, f"nftables does not work here: {r.stderr.strip()}"
    finally:
        run("ip", "netns", "del", probe, check=False)
    return True, ""


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _harness_namespaces():
    """{harness pid: [namespace, ...]} of every harness namespace here."""
    out = run("ip", "netns", "list", check=False).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(rf"^({PREFIX}(\d+)-\S+)", line)
        if m:
            found.setdefault(int(m.group(2)), []).append(m.group(1))
    return found


def _delete_namespaces(names):
    # Processes first (a namespace with a process in it outlives `ip netns
    # del` until they exit), then the node namespaces, the switch last.
    for ns in names:
        for pid in run("ip", "netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    for ns in sorted(names, key=lambda n: n.endswith("-sw")):
        run("ip", "netns", "del", ns, check=False)


def sweep_stale():
    """Removes the namespaces of harnesses that died without cleaning up;
    returns their names."""
    removed = []
    for pid, names in _harness_namespaces().items():
        if pid != os.getpid() and not _pid_alive(pid):
            _delete_namespaces(names)
            removed += names
    return removed


class Node:
    def __init__(self, cluster, name, index):
        self.name = name
        self.port_name = f"v{name}"  # its veth's end in the switch
        if cluster.loopback:  # every node in one namespace, on 127.0.0.1
            self.ns = f"{PREFIX}{cluster.pid}-lo"
            self.ip = "127.0.0.1"
            self.address = f"{self.ip}:{PORT + index}"
            self.metrics = f"{self.ip}:{METRICS_PORT + index}"
        else:
            self.ns = f"{PREFIX}{cluster.pid}-{name}"
            self.ip = f"{SUBNET}.{index}"
            self.address = f"{self.ip}:{PORT}"
            self.metrics = f"{self.ip}:{METRICS_PORT}"
        self.data_dir = os.path.join(cluster.workdir, name)
        self.process = None
        self.log_path = None
        self.log_start = 0  # where the running process's output starts in log_path


class Cluster:
    """Namespaces, links and the Brook processes on them.

    `n_ps` PS shards, `n_trainers` trainers, a chief and a client. `tls`:
    mutual TLS with a certificate for every node address and a bearer token
    (a PS on a non-loopback address must have one or the other). Without
    `tls` the PS nodes run with --allow-unauthenticated
    ($BROOK_PS_ALLOW_UNAUTHENTICATED): a token would travel in plaintext,
    which Brook's clients refuse to send off the machine.
    `loopback`: the same processes, all in one namespace on 127.0.0.1 (the
    baseline the benchmark compares links with); no faults then."""

    def __init__(self, brook, workdir, n_ps=2, n_trainers=2, tls=True, lease_seconds=10,
                 loopback=False):
        self.loopback = loopback
        self.brook = os.path.abspath(brook)
        if not os.access(self.brook, os.X_OK):  # before any namespace is made
            raise ValueError(f"--brook {brook}: no executable there (build it: scripts/build.sh)")
        self.workdir = os.path.abspath(workdir)
        self.pid = os.getpid()
        self.tls = tls
        self.lease_seconds = lease_seconds
        self.switch = f"{PREFIX}{self.pid}-sw"
        self.chief = Node(self, "chief", 2)
        self.client = Node(self, "client", 3)
        self.ps = [Node(self, f"ps{i}", 10 + i) for i in range(n_ps)]
        self.trainers = [Node(self, f"t{i}", 20 + i) for i in range(n_trainers)]
        self.nodes = [self.chief, self.client] + self.ps + self.trainers
        self.env = {}
        self._reaper = None
        self._up = False

    # ---- network -------------------------------------------------------
    def up(self):
        sweep_stale()
        os.makedirs(self.workdir, exist_ok=True)
        self._up = True
        if self.loopback:
            self.switch = self.chief.ns
        run("ip", "netns", "add", self.switch)
        self._reaper = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "reap", "--pid", str(self.pid)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        run("ip", "-n", self.switch, "link", "set", "lo", "up")
        if self.loopback:
            for node in self.nodes:
                os.makedirs(node.data_dir, exist_ok=True)
            if self.tls:
                self._make_credentials()
            return self
        run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.switch, "link", "set", "br0", "up")
        for node in self.nodes:
            os.makedirs(node.data_dir, exist_ok=True)
            run("ip", "netns", "add", node.ns)
            run("ip", "-n", node.ns, "link", "set", "lo", "up")
            run("ip", "link", "add", "eth0", "netns", node.ns, "type", "veth",
                "peer", "name", node.port_name, "netns", self.switch)
            run("ip", "-n", self.switch, "link", "set", node.port_name, "master", "br0", "up")
            run("ip", "-n", node.ns, "addr", "add", f"{node.ip}/24", "dev", "eth0")
            run("ip", "-n", node.ns, "link", "set", "eth0", "up")
            run("ip", "netns", "exec", node.ns, "nft", "-f", "-", input=(
                "table inet brook {\n"
                "  chain out { type filter hook output priority 0; }\n"
                "  chain in { type filter hook input priority 0; }\n"
                "}\n"))
        if self.tls:
            self._make_credentials()
        else:
            self.env = {"BROOK_PS_ALLOW_UNAUTHENTICATED": "true"}
        return self

    def down(self):
        if not self._up:
            return
        for node in self.nodes:
            self.stop(node, timeout=3)
        _delete_namespaces(sorted({n.ns for n in self.nodes} | {self.switch}))
        if self._reaper is not None:
            self._reaper.kill()
            self._reaper.wait()
        self._up = False

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()

    def set_rate(self, rate, nodes=None):
        """Shapes both directions of each node's link to `rate` ("1gbit",
        "10gbit"); None removes the shaping."""
        for node in nodes or self.nodes:
            for ns, dev in ((node.ns, "eth0"), (self.switch, node.port_name)):
                if rate is None:
                    run("tc", "-n", ns, "qdisc", "del", "dev", dev, "root", check=False)
                    continue
                bits = _rate_bits(rate)
                # A burst of 4 ms at the rate, at least one 64 KiB GSO packet.
                burst = max(64 * 1024, bits // 8 // 250)
                run("tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
                    "burst", str(burst), "latency", "50ms")

    def link(self, node, up):
        run("ip", "-n", node.ns, "link", "set", "eth0", "up" if up else "down")
        if up:  # the connected route comes back with the link; wait for it
            for _ in range(50):
                if "eth0" in run("ip", "-n", node.ns, "route", check=False).stdout:
                    return
                time.sleep(0.05)

    def _nft(self, node, rule):
        run("ip", "netns", "exec", node.ns, "nft", "add", "rule", "inet", "brook", *rule.split())

    def cut(self, a, b, both_ways=True):
        """Packets from a to b dropped (and from b to a with both_ways): a
        partition as a blackhole, not a reset, as a dead switch port looks."""
        self._nft(a, f"out ip daddr {b.ip} drop")
        if both_ways:
            self._nft(b, f"out ip daddr {a.ip} drop")

    def isolate(self, node):
        """`node` cut off from every other node, its link still up."""
        for other in self.nodes:
            if other is not node:
                self.cut(node, other)

    def loss(self, percent, nodes=None):
        """`percent` % of the packets every node (or `nodes`) sends dropped."""
        for node in nodes or self.nodes:
            self._nft(node, f"out numgen random mod 100 < {int(percent)} drop")

    def heal(self):
        """Every drop rule gone and every link up (shaping stays)."""
        for node in self.nodes:
            run("ip", "netns", "exec", node.ns, "nft", "flush", "chain", "inet", "brook", "out")
            run("ip", "netns", "exec", node.ns, "nft", "flush", "chain", "inet", "brook", "in")
            if "state DOWN" in run("ip", "-n", node.ns, "link", "show", "eth0").stdout:
                self.link(node, True)

    # ---- processes -----------------------------------------------------
    def _make_credentials(self):
        d = os.path.join(self.workdir, "pki")
        os.makedirs(d, exist_ok=True)
        sans = ",".join(sorted({f"IP:{n.ip}" for n in self.nodes}))
        key = "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out"
        script = (
            f"{key} ca.key && openssl req -x509 -new -key ca.key -sha256 -days 2 "
            f"-subj /CN=brook-netns-ca -out ca.crt && {key} node.key && "
            f"openssl req -new -key node.key -subj /CN=brook-node -out node.csr && "
            f"printf 'subjectAltName={sans}\\nextendedKeyUsage=serverAuth,clientAuth\\n' > node.ext && "
            f"openssl x509 -req -in node.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
            f"-sha256 -extfile node.ext -out node.crt")
        run("/bin/sh", "-c", f"cd '{d}' && {script}")
        token = os.urandom(20).hex()
        token_file = os.path.join(d, "token")
        with open(token_file, "w") as f:
            f.write(token + "\n")
        os.chmod(token_file, 0o600)
        self.env = {
            "BROOK_TLS_CERT": f"{d}/node.crt", "BROOK_TLS_KEY": f"{d}/node.key",
            "BROOK_TLS_CA": f"{d}/ca.crt", "BROOK_TLS_MUTUAL": "true",
            "BROOK_TOKEN": token, "BROOK_CHIEF_TOKEN": token, "BROOK_PS_TOKEN": token,
        }

    def start(self, node, argv, wait_for=None, timeout=30):
        """Starts `brook argv...` in the node's namespace, its output in
        <workdir>/<node>.log; waits for a line containing `wait_for`."""
        self.stop(node)
        node.log_path = os.path.join(self.workdir, f"{node.name}.log")
        log = open(node.log_path, "a")
        log.write(f"\n=== {time.strftime('%T')} brook {' '.join(argv)}\n")
        log.flush()
        env = dict(os.environ, **self.env)
        node.process = subprocess.Popen(
            ["ip", "netns", "exec", node.ns, self.brook] + argv, stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        node.log_start = os.path.getsize(node.log_path)
        log.close()
        if wait_for is not None:
            self.wait_log(node, wait_for, timeout)
        return node.process

    def wait_log(self, node, text, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with open(node.log_path, errors="replace") as f:
                f.seek(node.log_start)
                if text in f.read():
                    return
            if node.process.poll() is not None:
                raise RuntimeError(f"{node.name} exited {node.process.returncode} before "
                                   f"'{text}':\n{self.log_tail(node)}")
            time.sleep(0.05)
        raise RuntimeError(f"{node.name}: no '{text}' in {timeout} s:\n{self.log_tail(node)}")

    def log_tail(self, node, lines=30):
        if not node.log_path or not os.path.exists(node.log_path):
            return ""
        with open(node.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    def stop(self, node, sig=signal.SIGTERM, timeout=10):
        p = node.process
        if p is None or p.poll() is not None:
            return
        p.send_signal(sig)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def kill(self, node):
        self.stop(node, signal.SIGKILL)

    def start_ps(self, i, extra=()):
        node = self.ps[i]
        return self.start(node, [
            "ps", "--listen", node.address, "--metrics-listen", node.metrics,
            "--shard-index", str(i), "--num-shards", str(len(self.ps)),
            "--data-dir", node.data_dir, *extra], wait_for="listening on")

    def ps_addresses(self):
        return ",".join(n.address for n in self.ps)

    def start_chief(self, extra=()):
        return self.start(self.chief, [
            "chief", "--listen", self.chief.address, "--metrics-listen", self.chief.metrics,
            "--state-dir", os.path.join(self.chief.data_dir, "state"), "--ps", self.ps_addresses(),
            "--lease-seconds", str(self.lease_seconds), *extra], wait_for="listening on")

    def start_trainer(self, i, extra=()):
        node = self.trainers[i]
        return self.start(node, [
            "trainer", "--chief", self.chief.address, "--node-id", node.name,
            "--metrics-listen", node.metrics, "--cpu-threads", "1", "--parse-threads", "1",
            *extra], wait_for="brook trainer")

    def start_all(self):
        for i in range(len(self.ps)):
            self.start_ps(i)
        self.start_chief()
        for i in range(len(self.trainers)):
            self.start_trainer(i)

    def cli(self, *args, timeout=120, check=True):
        """`brook ARGS --chief CHIEF` run in the client's namespace."""
        argv = ["ip", "netns", "exec", self.client.ns, self.brook, *args,
                "--chief", self.chief.address]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, **self.env))
        if check and r.returncode != 0:
            raise RuntimeError(f"brook {' '.join(args)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        return r

    def job(self, job_id):
        """`brook status JOB -o json` (it exits 1 for a job that did not
        succeed: the JSON is what counts)."""
        r = self.cli("status", job_id, "-o", "json", check=False)
        try:
            return json.loads(r.stdout)
        except json.JSONDecodeError:
            raise RuntimeError(f"brook status {job_id}: exit {r.returncode}: {r.stderr}") from None

    def wait_job(self, job_id, until=None, timeout=240, what=None):
        """The job's status once `until(status)` holds (default: the job
        ended). Status calls that fail (the chief may be the node cut off)
        are retried; a job that ends first, or the timeout, raises
        RuntimeError with the last status and the job's log."""
        deadline = time.time() + timeout
        job = {}
        while time.time() < deadline:
            try:
                job = self.job(job_id)
            except (RuntimeError, subprocess.TimeoutExpired):
                time.sleep(0.5)
                continue
            if (until or job_ended)(job):
                return job
            if job_ended(job):
                break
            time.sleep(0.2)
        logs = self.cli("logs", job_id, check=False, timeout=30)
        raise RuntimeError(f"{what or 'job ' + job_id}: waited {timeout} s; last status: "
                           f"{json.dumps(job)[:1500]}\nbrook logs {job_id}:\n"
                           f"{logs.stdout[-3000:]}{logs.stderr[-500:]}")

    def metrics_text(self, node):
        """The node's /metrics page, read from the client's namespace; None
        when the node does not answer."""
        code = ("import sys,urllib.request\n"
                f"print(urllib.request.urlopen('http://{node.metrics}/metrics', timeout=5)"
                ".read().decode())")
        r = subprocess.run(["ip", "netns", "exec", self.client.ns, sys.executable, "-c", code],
                           capture_output=True, text=True, timeout=30)
        return r.stdout if r.returncode == 0 else None

    def metric_sum(self, node, name):
        """Sum of every sample of metric `name` on the node's /metrics, read
        from the client's namespace; None when the node does not answer."""
        text = self.metrics_text(node)
        if text is None:
            return None
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total


def job_ended(job):
    return job.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED")


def write_generated_job(path, name, data, *, model, embedding_optimizer, dense_optimizer,
                        training, trainers, records_per_unit, extra=""):
    """A job spec over `brook data gen`'s Criteo-shaped data in `data`
    (C1..C26 sparse, I1..I13 dense with log1p). The other arguments are the
    YAML flow mappings of their sections, e.g. model="{type: lr, loss: logloss}"."""
    sparse = "".join(f"  - {{feature: C{i}}}\n" for i in range(1, 27))
    dense = "".join(f"  - {{feature: I{i}, transform: log1p}}\n" for i in range(1, 14))
    with open(path, "w") as f:
        f.write(f"""name: {name}
data: {{train: [{data}/train-*.tfrecord], eval: [{data}/test-*.tfrecord], records_per_unit: {records_per_unit}}}
features: {data}/feature_spec.yaml
model: {model}
sparse:
{sparse}dense:
{dense}optimizer:
  embedding: {embedding_optimizer}
  dense: {dense_optimizer}
training: {training}
trainers: {trainers}
{extra}""")
    return path


def link_bytes(node):
    """(received, sent) bytes on the node's link so far."""
    stats = json.loads(run("ip", "-n", node.ns, "-s", "-j", "link", "show", "eth0").stdout)[0]
    return stats["stats64"]["rx"]["bytes"], stats["stats64"]["tx"]["bytes"]


def shaper_overlimits(cluster, node):
    """How many times the tbf shapers on the node's link (both ends) held a
    packet back for want of tokens: 0 means the link's rate never bound."""
    total = 0
    for ns, dev in ((node.ns, "eth0"), (cluster.switch, node.port_name)):
        out = run("tc", "-s", "-n", ns, "qdisc", "show", "dev", dev, check=False).stdout
        m = re.search(r"overlimits (\d+)", out)
        total += int(m.group(1)) if m and "tbf" in out else 0
    return total


def _rate_bits(rate):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate)
    if not m:
        raise ValueError(f"rate {rate!r}: want e.g. 100mbit, 1gbit, 10gbit")
    return int(float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)])


def _reap(harness_pid):
    """Waits for the harness to die, then removes what it left."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while _pid_alive(harness_pid):
        if harness_pid not in _harness_namespaces():
            return  # the harness cleaned up itself
        time.sleep(0.5)
    _delete_namespaces(_harness_namespaces().get(harness_pid, []))


def _up_interactive(args):
    ok, why = namespaces_can_be_made()
    if not ok:
        print(f"netns_cluster: cannot make network namespaces here: {why}", file=sys.stderr)
        return 2
    try:
        cluster = Cluster(args.brook, args.workdir or tempfile.mkdtemp(prefix="brook-netns-"),
                          args.ps, args.trainers, tls=not args.plaintext)
    except ValueError as e:
        print(f"netns_cluster: {e}", file=sys.stderr)
        return 2
    workdir = cluster.workdir
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        cluster.up()
        if args.rate:
            cluster.set_rate(args.rate)
        cluster.start_all()
        env = " ".join(f"{k}={v}" for k, v in cluster.env.items()
                       if k.startswith("BROOK_TLS") or k == "BROOK_TOKEN")
        print(f"brook cluster up in {workdir}: chief {cluster.chief.address}, "
              f"PS {cluster.ps_addresses()}, trainers "
              f"{', '.join(t.ip for t in cluster.trainers)}; logs in {workdir}/*.log")
        print("submit from the client's namespace:")
        print(f"  {env} ip netns exec {cluster.client.ns} {cluster.brook} submit JOB.yaml "
              f"--chief {cluster.chief.address}")
        print("faults: ip -n NS link set eth0 down | ip netns exec NS nft add rule inet brook out "
              "ip daddr ADDR drop | tc -n NS qdisc replace dev eth0 root tbf ...")
        print("Ctrl-C stops it and removes every namespace.", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.down()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a cluster and wait for Ctrl-C")
    up.add_argument("--brook", default=DEFAULT_BROOK,
                    help=f"the brook binary (default: {DEFAULT_BROOK})")
    up.add_argument("--ps", type=int, default=2)
    up.add_argument("--trainers", type=int, default=2)
    up.add_argument("--rate", help="shape every link, e.g. 1gbit")
    up.add_argument("--workdir")
    up.add_argument("--plaintext", action="store_true", help="no TLS, no token")
    reap = sub.add_parser("reap", help=argparse.SUPPRESS)
    reap.add_argument("--pid", type=int, required=True)
    sub.add_parser("sweep", help="remove namespaces of dead harnesses")
    args = p.parse_args()
    if args.cmd == "reap":
        _reap(args.pid)
        return 0
    if args.cmd == "sweep":
        removed = sweep_stale()
        print(f"removed {len(removed)} namespaces of dead harnesses"
              + (f": {' '.join(sorted(removed))}" if removed else ""))
        return 0
    return _up_interactive(args)


if __name__ == "__main__":
    sys.exit(main())
