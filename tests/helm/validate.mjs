// Offline checks of the Helm chart helm/brook (run by scripts/helm_test.sh):
//   1. `helm lint --strict`;
//   2. `helm template` with the default values and variants (GPU / CPU
//      trainers, TLS + token, ServiceMonitor, 1 and 8 PS, no persistence, no
//      metrics, another namespace) — every object validated against the
//      Kubernetes 1.34 schemas (kubernetes-models) and the Prometheus
//      Operator's (@kubernetes-models/prometheus-operator), then asserted on:
//      labels, security contexts, probes, resources, GPUs, PS replicas, the
//      headless Service, PDB, NetworkPolicies, Prometheus annotations;
//   3. bad values fail `helm template` naming the field;
//   4. NOTES.txt renders (`helm install --dry-run=client`);
//   5. every rendered container's args (with its ConfigMap and literal env;
//      downward-API values substituted) pass `brook ... --check-config`.
// Prints "ok: ..." / "FAIL: ..." per check; exits 1 on any failure.
//
// Environment: HELM (helm binary), BROOK_NODE_MODULES (a node_modules with
// kubernetes-models, @kubernetes-models/prometheus-operator, yaml),
// BROOK_BINARY (the brook binary), CHART (default: helm/brook).
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const HELM = process.env.HELM || "helm";
const MODULES = process.env.BROOK_NODE_MODULES;
const BROOK = process.env.BROOK_BINARY || path.join(repo, "build/chief/brook");
const CHART = process.env.CHART || path.join(repo, "helm/brook");
if (!MODULES) {
  console.error("FAIL: set BROOK_NODE_MODULES to the node_modules holding kubernetes-models");
  process.exit(1);
}
const YAML = (await import(pathToFileURL(path.join(MODULES, "yaml/dist/index.js")).href)).default;

let failures = 0;
let passes = 0;
function ok(msg) {
  passes++;
  console.log(`ok: ${msg}`);
}
function fail(msg) {
  failures++;
  console.log(`FAIL: ${msg}`);
}
// One named check: `fn` returns a list of problems (empty: passed).
function check(name, fn) {
  let problems;
  try {
    problems = fn() || [];
  } catch (e) {
    problems = [`threw: ${e.stack || e}`];
  }
  if (problems.length === 0) ok(name);
  else fail(`${name}: ${problems.slice(0, 8).join("; ")}${problems.length > 8 ? ` (+${problems.length - 8} more)` : ""}`);
}

function helm(args) {
  return spawnSync(HELM, args, { encoding: "utf8", maxBuffer: 64 << 20 });
}

// ---------------------------------------------------------------- models
const modelCache = new Map();
async function modelFor(apiVersion, kind) {
  const key = `${apiVersion}/${kind}`;
  if (modelCache.has(key)) return modelCache.get(key);
  let file;
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    file = path.join(MODULES, "@kubernetes-models/prometheus-operator", apiVersion, `${kind}.js`);
  } else {
    file = path.join(MODULES, "kubernetes-models", apiVersion, `${kind}.js`);
  }
  let model = null;
  if (existsSync(file)) {
    const mod = await import(pathToFileURL(file).href);
    model = mod[kind] || mod.default || null;
  }
  modelCache.set(key, model);
  return model;
}

// ---------------------------------------------------------------- helpers
const RELEASE = "rel";
const CHART_NAME = "brook";
const names = (release) => {
  const full = release.includes(CHART_NAME) ? release : `${release}-${CHART_NAME}`;
  return { full, chief: `${full}-chief`, ps: `${full}-ps`, trainer: `${full}-trainer` };
};
const byKind = (objs, kind) => objs.filter((o) => o.kind === kind);
const find = (objs, kind, name) => objs.find((o) => o.kind === kind && o.metadata?.name === name);
function podSpecOf(o) {
  if (o.kind === "Pod") return o.spec;
  if (["Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"].includes(o.kind)) return o.spec?.template?.spec;
  return null;
}
const podMetaOf = (o) => (o.kind === "Pod" ? o.metadata : o.spec?.template?.metadata);
const isHelmTest = (o) => o.metadata?.annotations?.["helm.sh/hook"] === "test";
const containersOf = (spec) => [...(spec?.initContainers || []), ...(spec?.containers || [])];
const argValue = (args, flag) => {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
};

function render(release, namespace, extra) {
  const r = helm(["template", release, CHART, "--namespace", namespace, ...extra]);
  if (r.status !== 0) throw new Error(`helm template ${extra.join(" ")} failed: ${r.stderr.trim()}`);
  return YAML.parseAllDocuments(r.stdout)
    .map((d) => {
      if (d.errors.length) throw new Error(`rendered YAML does not parse: ${d.errors[0].message}`);
      return d.toJS();
    })
    .filter((o) => o && typeof o === "object");
}

// ---------------------------------------------------------------- 1. lint
for (const extra of [[], ["--set", "trainer.gpus=1", "--set", "tls.enabled=true", "--set", "tls.cert=x", "--set", "tls.key=y"]]) {
  const r = helm(["lint", "--strict", CHART, ...extra]);
  if (r.status === 0) ok(`helm lint --strict ${extra.join(" ")}`.trim());
  else fail(`helm lint --strict ${extra.join(" ")}: ${(r.stdout + r.stderr).trim()}`);
}

// ---------------------------------------------------------------- 2. renders
const variants = [
  { name: "default", set: {} },
  { name: "gpu trainers", set: { "trainer.gpus": 1 } },
  { name: "2 gpus, runtime class", set: { "trainer.gpus": 2, "trainer.gpuRuntimeClassName": "nvidia" } },
  { name: "cpu-only trainers", set: { "trainer.gpus": 0, "trainer.cpuThreads": 8 } },
  {
    name: "tls + token",
    set: { "tls.enabled": true, "tls.cert": "PLACEHOLDER-CERT", "tls.key": "PLACEHOLDER-KEY", "tls.ca": "PLACEHOLDER-CA", "auth.enabled": true, "auth.token": "placeholder-token" },
  },
  { name: "tls existing secret", set: { "tls.enabled": true, "tls.existingSecret": "my-tls" } },
  { name: "servicemonitor", set: { "metrics.serviceMonitor.enabled": true, "metrics.serviceMonitor.labels.release": "prometheus" }, extra: ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"] },
  { name: "ps.replicas=1", set: { "ps.replicas": 1 } },
  { name: "ps.replicas=8", set: { "ps.replicas": 8, "ps.wal": false, "ps.walFsync": true } },
  {
    name: "no persistence, no metrics, no network policy, no PDB",
    set: { "chief.persistence.enabled": false, "ps.persistence.enabled": false, "metrics.enabled": false, "networkPolicy.enabled": false, "ps.podDisruptionBudget.enabled": false },
  },
  { name: "namespace ml, release brook-prod, env", release: "brook-prod", namespace: "ml", set: { "env.BROOK_PS_DEDUP_WINDOW": 4096, "chief.env.BROOK_CHIEF_LEASE_SECONDS": 30, "image.tag": "1.2.3" } },
];

const REQUIRED_LABELS = ["app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component", "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by", "app.kubernetes.io/version", "helm.sh/chart"];
const rendered = []; // {variant, release, namespace, objs}

for (const v of variants) {
  const release = v.release || RELEASE;
  const namespace = v.namespace || "default";
  const n = names(release);
  const sets = Object.entries(v.set).flatMap(([k, val]) => ["--set", `${k}=${val}`]);
  let objs;
  try {
    objs = render(release, namespace, [...sets, ...(v.extra || [])]);
    ok(`[${v.name}] helm template renders ${objs.length} objects`);
  } catch (e) {
    fail(`[${v.name}] ${e.message}`);
    continue;
  }
  rendered.push({ v, release, namespace, objs });
  const get = (key, dflt) => (key in v.set ? v.set[key] : dflt);
  const gpus = Number(get("trainer.gpus", 0));
  const psReplicas = Number(get("ps.replicas", 2));
  const metricsOn = get("metrics.enabled", true) !== false;
  const tlsOn = get("tls.enabled", false) === true;

  // Kubernetes schemas.
  const problems = [];
  for (const o of objs) {
    const Model = await modelFor(o.apiVersion, o.kind);
    if (!Model) {
      problems.push(`no schema for ${o.apiVersion} ${o.kind}`);
      continue;
    }
    try {
      new Model(o).validate();
    } catch (e) {
      problems.push(`${o.kind}/${o.metadata?.name}: ${e.message}`);
    }
  }
  check(`[${v.name}] every object valid against the Kubernetes / Prometheus Operator schemas`, () => problems);

  check(`[${v.name}] app.kubernetes.io labels on every object and pod template`, () => {
    const p = [];
    for (const o of objs) {
      for (const l of REQUIRED_LABELS) if (!o.metadata?.labels?.[l]) p.push(`${o.kind}/${o.metadata?.name} lacks ${l}`);
      if (o.metadata?.labels?.["app.kubernetes.io/instance"] !== release) p.push(`${o.kind}/${o.metadata?.name}: instance label`);
      if (o.metadata?.namespace !== namespace) p.push(`${o.kind}/${o.metadata?.name}: namespace ${o.metadata?.namespace}`);
      const pm = podSpecOf(o) && o.kind !== "Pod" ? podMetaOf(o) : null;
      if (pm) {
        for (const l of REQUIRED_LABELS) if (!pm.labels?.[l]) p.push(`${o.kind}/${o.metadata.name} pod template lacks ${l}`);
        for (const [k, val] of Object.entries(o.spec.selector?.matchLabels || {})) {
          if (pm.labels?.[k] !== val) p.push(`${o.kind}/${o.metadata.name}: selector ${k} not on the pod template`);
        }
      }
    }
    return p;
  });

  check(`[${v.name}] restricted securityContext on every pod and container`, () => {
    const p = [];
    for (const o of objs) {
      const spec = podSpecOf(o);
      if (!spec) continue;
      const where = `${o.kind}/${o.metadata.name}`;
      const psc = spec.securityContext || {};
      if (psc.runAsNonRoot !== true) p.push(`${where}: pod runAsNonRoot`);
      if (psc.seccompProfile?.type !== "RuntimeDefault") p.push(`${where}: pod seccompProfile`);
      if (spec.automountServiceAccountToken !== false) p.push(`${where}: automountServiceAccountToken`);
      if (spec.hostNetwork || spec.hostPID || spec.hostIPC) p.push(`${where}: host namespaces`);
      for (const c of containersOf(spec)) {
        const sc = c.securityContext || {};
        const cw = `${where}/${c.name}`;
        if (sc.runAsNonRoot !== true && psc.runAsNonRoot !== true) p.push(`${cw}: runAsNonRoot`);
        if (sc.readOnlyRootFilesystem !== true) p.push(`${cw}: readOnlyRootFilesystem`);
        if (sc.allowPrivilegeEscalation !== false) p.push(`${cw}: allowPrivilegeEscalation`);
        if (sc.privileged === true) p.push(`${cw}: privileged`);
        if (!(sc.capabilities?.drop || []).includes("ALL")) p.push(`${cw}: capabilities.drop ALL`);
        if ((sc.capabilities?.add || []).length) p.push(`${cw}: capabilities.add`);
        if ((sc.seccompProfile?.type || psc.seccompProfile?.type) !== "RuntimeDefault") p.push(`${cw}: seccompProfile`);
        if (!/^[^:@]+(:[^:]+)?(@sha256:[0-9a-f]{64})?$/.test(c.image) || c.image.endsWith(":latest") || !c.image.includes(":")) p.push(`${cw}: image ${c.image} not pinned to a tag`);
        if (!(c.volumeMounts || []).some((m) => m.mountPath === "/tmp")) p.push(`${cw}: no writable /tmp`);
      }
    }
    return p;
  });

  check(`[${v.name}] resources and probes on every container (the helm-test pod: resources only)`, () => {
    const p = [];
    for (const o of objs) {
      const spec = podSpecOf(o);
      if (!spec) continue;
      for (const c of containersOf(spec)) {
        const cw = `${o.kind}/${o.metadata.name}/${c.name}`;
        for (const kind of ["requests", "limits"]) {
          for (const r of ["cpu", "memory"]) if (!c.resources?.[kind]?.[r]) p.push(`${cw}: resources.${kind}.${r}`);
        }
        if (isHelmTest(o)) continue;
        for (const probe of ["livenessProbe", "readinessProbe"]) {
          const pr = c[probe];
          if (!pr) {
            p.push(`${cw}: no ${probe}`);
            continue;
          }
          const port = pr.tcpSocket?.port;
          const ports = (c.ports || []).map((x) => [x.name, x.containerPort]).flat();
          if (port === undefined || !ports.includes(port)) p.push(`${cw}: ${probe} tcpSocket port ${port} is not a container port`);
        }
      }
    }
    const chief = find(objs, "Deployment", n.chief);
    const ps = find(objs, "StatefulSet", n.ps);
    for (const [w, want] of [[chief, "grpc"], [ps, "grpc"]]) {
      const c = w?.spec.template.spec.containers[0];
      if (c && c.readinessProbe?.tcpSocket?.port !== want) p.push(`${w.metadata.name}: readiness probe not on the gRPC port`);
    }
    return p;
  });

  check(`[${v.name}] servers listen on 0.0.0.0 with explicit --listen`, () => {
    const p = [];
    const chief = find(objs, "Deployment", n.chief)?.spec.template.spec.containers[0];
    const ps = find(objs, "StatefulSet", n.ps)?.spec.template.spec.containers[0];
    if (argValue(chief?.args || [], "--listen") !== "0.0.0.0:7000") p.push("chief --listen");
    if (argValue(ps?.args || [], "--listen") !== "0.0.0.0:7070") p.push("ps --listen");
    const containerPort = (c, name) => (c?.ports || []).find((x) => x.name === name)?.containerPort;
    if (containerPort(chief, "grpc") !== 7000 || containerPort(ps, "grpc") !== 7070) p.push("gRPC containerPorts");
    if (metricsOn && argValue(ps?.args || [], "--metrics-listen") !== "0.0.0.0:9100") p.push("ps --metrics-listen");
    if (!metricsOn && argValue(ps?.args || [], "--metrics-listen") !== "") p.push("ps metrics not off");
    return p;
  });

  check(`[${v.name}] chief: Deployment, 1 replica, Recreate, state on a volume, PS from the StatefulSet`, () => {
    const p = [];
    const d = find(objs, "Deployment", n.chief);
    if (!d) return ["no chief Deployment"];
    if (d.spec.replicas !== 1) p.push(`replicas ${d.spec.replicas}`);
    if (d.spec.strategy?.type !== "Recreate") p.push("strategy not Recreate");
    const c = d.spec.template.spec.containers[0];
    const cm = find(objs, "ConfigMap", n.chief);
    const stateDir = cm?.data?.BROOK_CHIEF_STATE_DIR;
    if (!stateDir || !(c.volumeMounts || []).some((m) => m.mountPath === stateDir)) p.push("state dir not mounted");
    const vol = d.spec.template.spec.volumes.find((x) => x.name === "state");
    if (get("chief.persistence.enabled", true)) {
      if (!vol?.persistentVolumeClaim || !find(objs, "PersistentVolumeClaim", vol.persistentVolumeClaim.claimName)) p.push("state PVC missing");
    } else if (!vol?.emptyDir) p.push("state emptyDir missing");
    const a = c.args;
    if (a[0] !== "chief") p.push("args[0] is not chief");
    if (argValue(a, "--ps-statefulset") !== n.ps) p.push("--ps-statefulset");
    if (argValue(a, "--ps-service") !== n.ps) p.push("--ps-service");
    if (argValue(a, "--ps-namespace") !== namespace) p.push("--ps-namespace");
    if (argValue(a, "--ps-replicas") !== String(psReplicas)) p.push("--ps-replicas");
    if (argValue(a, "--ps-port") !== "7070") p.push("--ps-port");
    const svc = find(objs, "Service", n.chief);
    const ports = Object.fromEntries((svc?.spec.ports || []).map((x) => [x.name, x.port]));
    if (ports.grpc !== 7000) p.push("chief Service gRPC port 7000");
    if (metricsOn && ports.metrics !== 9100) p.push("chief Service metrics port 9100");
    return p;
  });

  check(`[${v.name}] PS: StatefulSet replicas = ${psReplicas}, headless Service, volume per PS, shard index from the pod`, () => {
    const p = [];
    const s = find(objs, "StatefulSet", n.ps);
    if (!s) return ["no PS StatefulSet"];
    if (s.spec.replicas !== psReplicas) p.push(`replicas ${s.spec.replicas}`);
    const c = s.spec.template.spec.containers[0];
    if (c.args[0] !== "ps") p.push("args[0] is not ps");
    if (argValue(c.args, "--num-shards") !== String(psReplicas)) p.push("--num-shards");
    if (get("ps.wal", true) === false && !c.args.includes("--no-wal")) p.push("--no-wal missing with ps.wal=false");
    const idx = (c.env || []).find((e) => e.name === "BROOK_PS_SHARD_INDEX");
    if (idx?.valueFrom?.fieldRef?.fieldPath !== "metadata.labels['apps.kubernetes.io/pod-index']") p.push("BROOK_PS_SHARD_INDEX not from the pod index");
    const svc = find(objs, "Service", s.spec.serviceName);
    if (!svc) p.push(`serviceName ${s.spec.serviceName} has no Service`);
    else {
      if (svc.spec.clusterIP !== "None") p.push("PS Service not headless (clusterIP None)");
      if (!(svc.spec.ports || []).some((x) => x.port === 7070)) p.push("PS Service lacks port 7070");
    }
    const cm = find(objs, "ConfigMap", n.ps);
    const dataDir = cm?.data?.BROOK_PS_DATA_DIR;
    const mount = (c.volumeMounts || []).find((m) => m.mountPath === dataDir);
    if (!mount) p.push("data dir not mounted");
    if (get("ps.persistence.enabled", true)) {
      if (!(s.spec.volumeClaimTemplates || []).some((t) => t.metadata.name === mount?.name)) p.push("no volumeClaimTemplate for the data dir");
    } else if (!(s.spec.template.spec.volumes || []).some((x) => x.name === mount?.name && x.emptyDir)) p.push("no emptyDir data volume");
    if (get("ps.walFsync", false) && cm?.data?.BROOK_PS_WAL_FSYNC !== "true") p.push("BROOK_PS_WAL_FSYNC");
    if (get("env.BROOK_PS_DEDUP_WINDOW", null) !== null && cm?.data?.BROOK_PS_DEDUP_WINDOW !== String(v.set["env.BROOK_PS_DEDUP_WINDOW"])) p.push("global env not in the PS ConfigMap");
    return p;
  });

  check(`[${v.name}] PodDisruptionBudget for the PS set`, () => {
    const pdbs = byKind(objs, "PodDisruptionBudget");
    if (get("ps.podDisruptionBudget.enabled", true) === false) return pdbs.length ? ["PDB rendered while disabled"] : [];
    const pdb = pdbs.find((x) => x.metadata.name === n.ps);
    if (!pdb) return ["no PDB"];
    const s = find(objs, "StatefulSet", n.ps);
    const p = [];
    for (const [k, val] of Object.entries(pdb.spec.selector.matchLabels)) if (s.spec.template.metadata.labels[k] !== val) p.push(`selector ${k} does not match the PS pods`);
    if (pdb.spec.maxUnavailable === undefined && pdb.spec.minAvailable === undefined) p.push("no maxUnavailable/minAvailable");
    return p;
  });

  check(`[${v.name}] trainers: ${gpus > 0 ? `${gpus} GPU(s), --device cuda, CUDA image` : "CPU, no GPU resources"}`, () => {
    const p = [];
    const s = find(objs, "StatefulSet", n.trainer);
    if (!s) return ["no trainer StatefulSet"];
    const c = s.spec.template.spec.containers[0];
    if (c.args[0] !== "trainer") p.push("args[0] is not trainer");
    if (argValue(c.args, "--chief") !== `${n.chief}.${namespace}.svc:7000`) p.push(`--chief ${argValue(c.args, "--chief")}`);
    const nodeId = (c.env || []).find((e) => e.name === "BROOK_TRAINER_NODE_ID");
    if (nodeId?.valueFrom?.fieldRef?.fieldPath !== "metadata.name") p.push("node id not from the pod name");
    const device = find(objs, "ConfigMap", n.trainer)?.data?.BROOK_TRAINER_DEVICE;
    const lim = c.resources?.limits?.["nvidia.com/gpu"];
    const tolerates = (s.spec.template.spec.tolerations || []).some((t) => t.key === "nvidia.com/gpu");
    if (gpus > 0) {
      if (Number(lim) !== gpus) p.push(`limits nvidia.com/gpu = ${lim}`);
      if (device !== "cuda") p.push(`device ${device}`);
      if (!c.image.endsWith("-cuda")) p.push(`image ${c.image} is not the CUDA one`);
      if (!tolerates) p.push("no GPU toleration");
      if (get("trainer.gpuRuntimeClassName", "") && s.spec.template.spec.runtimeClassName !== v.set["trainer.gpuRuntimeClassName"]) p.push("runtimeClassName");
    } else {
      if (lim !== undefined || c.resources?.requests?.["nvidia.com/gpu"] !== undefined) p.push("GPU resources on a CPU trainer");
      if (device !== "cpu") p.push(`device ${device}`);
      if (c.image.endsWith("-cuda")) p.push("CUDA image on a CPU trainer");
      if (tolerates) p.push("GPU toleration on a CPU trainer");
    }
    for (const o of objs) {
      if (o === s) continue;
      for (const cc of containersOf(podSpecOf(o))) if (cc.resources?.limits?.["nvidia.com/gpu"]) p.push(`${o.metadata.name} has GPUs`);
    }
    return p;
  });

  check(`[${v.name}] Prometheus discovery annotations${metricsOn ? "" : " absent (metrics off)"}`, () => {
    const p = [];
    for (const w of [find(objs, "Deployment", n.chief), find(objs, "StatefulSet", n.ps), find(objs, "StatefulSet", n.trainer)]) {
      const a = w.spec.template.metadata.annotations || {};
      if (metricsOn) {
        if (a["prometheus.io/scrape"] !== "true" || a["prometheus.io/port"] !== "9100" || a["prometheus.io/path"] !== "/metrics") p.push(`${w.metadata.name}: prometheus.io annotations`);
        if (!(w.spec.template.spec.containers[0].ports || []).some((x) => x.name === "metrics" && x.containerPort === 9100)) p.push(`${w.metadata.name}: metrics port`);
      } else if (a["prometheus.io/scrape"]) p.push(`${w.metadata.name}: scrape annotation with metrics off`);
      if (!a["checksum/config"]) p.push(`${w.metadata.name}: checksum/config`);
    }
    return p;
  });

  check(`[${v.name}] NetworkPolicies${get("networkPolicy.enabled", true) === false ? " absent when disabled" : ": Brook pods to gRPC, Prometheus to metrics"}`, () => {
    const nps = byKind(objs, "NetworkPolicy");
    if (get("networkPolicy.enabled", true) === false) return nps.length ? ["rendered while disabled"] : [];
    const p = [];
    const release_ = { "app.kubernetes.io/name": CHART_NAME, "app.kubernetes.io/instance": release };
    const policyFor = (w) => nps.find((np) => Object.entries(np.spec.podSelector.matchLabels || {}).every(([k, val]) => w.spec.template.metadata.labels[k] === val));
    for (const [w, grpcPort] of [[find(objs, "Deployment", n.chief), 7000], [find(objs, "StatefulSet", n.ps), 7070], [find(objs, "StatefulSet", n.trainer), null]]) {
      const np = policyFor(w);
      if (!np) {
        p.push(`${w.metadata.name}: no NetworkPolicy selects it`);
        continue;
      }
      if (!np.spec.policyTypes.includes("Ingress")) p.push(`${np.metadata.name}: not an Ingress policy`);
      const rules = np.spec.ingress || [];
      if (grpcPort) {
        const r = rules.find((x) => (x.ports || []).some((pp) => pp.port === grpcPort));
        if (!r) p.push(`${np.metadata.name}: no rule for gRPC ${grpcPort}`);
        else if (!r.from?.length || !r.from.some((f) => f.podSelector && Object.entries(release_).every(([k, val]) => f.podSelector.matchLabels?.[k] === val))) p.push(`${np.metadata.name}: gRPC not limited to Brook pods`);
        else if (r.from.some((f) => !f.podSelector && !f.namespaceSelector && !f.ipBlock)) p.push(`${np.metadata.name}: gRPC open to all`);
      }
      if (metricsOn) {
        const r = rules.find((x) => (x.ports || []).some((pp) => pp.port === 9100));
        if (!r) p.push(`${np.metadata.name}: no rule for metrics`);
        else if (!r.from?.some((f) => f.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "prometheus")) p.push(`${np.metadata.name}: metrics not limited to Prometheus pods`);
      }
      for (const r of rules) if (!r.from || r.from.length === 0) p.push(`${np.metadata.name}: a rule allows every source`);
    }
    return p;
  });

  check(`[${v.name}] ServiceMonitor ${get("metrics.serviceMonitor.enabled", false) ? "selects the Services' metrics ports" : "absent"}`, () => {
    const sms = byKind(objs, "ServiceMonitor");
    if (!get("metrics.serviceMonitor.enabled", false)) return sms.length ? ["rendered while disabled"] : [];
    if (sms.length !== 1) return [`${sms.length} ServiceMonitors`];
    const sm = sms[0];
    const p = [];
    if (sm.metadata.labels.release !== "prometheus") p.push("serviceMonitor.labels not applied");
    const svcs = byKind(objs, "Service").filter((s) => Object.entries(sm.spec.selector.matchLabels).every(([k, val]) => s.metadata.labels[k] === val));
    for (const want of [n.chief, n.ps, n.trainer]) {
      const s = svcs.find((x) => x.metadata.name === want);
      if (!s) p.push(`${want} Service not selected`);
      else if (!s.spec.ports.some((x) => x.name === sm.spec.endpoints[0].port)) p.push(`${want} Service lacks port ${sm.spec.endpoints[0].port}`);
    }
    return p;
  });

  check(`[${v.name}] Secrets and TLS volumes ${tlsOn ? "rendered" : "absent"}`, () => {
    const p = [];
    const secrets = byKind(objs, "Secret");
    const workloads = objs.filter((o) => podSpecOf(o));
    const withTls = workloads.filter((o) => (podSpecOf(o).volumes || []).some((x) => x.name === "tls"));
    if (!tlsOn) {
      if (secrets.length) p.push(`Secrets rendered: ${secrets.map((s) => s.metadata.name)}`);
      if (withTls.length) p.push("tls volume while disabled");
      return p;
    }
    const secretName = get("tls.existingSecret", "") || `${n.full}-tls`;
    if (!get("tls.existingSecret", "")) {
      const s = find(objs, "Secret", secretName);
      if (!s || s.type !== "kubernetes.io/tls" || !s.data?.["tls.crt"] || !s.data?.["tls.key"]) p.push("TLS Secret");
    } else if (find(objs, "Secret", secretName)) p.push("rendered a Secret over tls.existingSecret");
    if (withTls.length !== workloads.length) p.push("not every pod mounts the TLS secret");
    for (const o of withTls) if (podSpecOf(o).volumes.find((x) => x.name === "tls").secret?.secretName !== secretName) p.push(`${o.metadata.name}: wrong secret`);
    if (get("auth.enabled", false)) {
      const chief = find(objs, "Deployment", n.chief).spec.template.spec.containers[0];
      const tok = (chief.env || []).find((e) => e.name === "BROOK_CHIEF_TOKEN");
      if (!tok?.valueFrom?.secretKeyRef || !find(objs, "Secret", tok.valueFrom.secretKeyRef.name)) p.push("chief token not from a rendered Secret");
    }
    return p;
  });

  check(`[${v.name}] helm test hook pod runs brook list against the chief Service`, () => {
    const t = objs.filter(isHelmTest);
    if (t.length !== 1) return [`${t.length} test hooks`];
    const c = t[0].spec.containers[0];
    const p = [];
    if (c.args[0] !== "list") p.push(`args ${c.args}`);
    if (argValue(c.args, "--chief") !== `${n.chief}.${namespace}.svc:7000`) p.push("--chief");
    if (t[0].spec.restartPolicy !== "Never") p.push("restartPolicy");
    return p;
  });
}

// ---------------------------------------------------------------- 3. bad values
const bad = [
  { set: ["--set", "ps.replicas=0"], want: /ps\/replicas/ },
  { set: ["--set", "ps.replicas=abc"], want: /ps\/replicas.*(string|integer)/ },
  { set: ["--set", "trainer.gpus=-1"], want: /trainer\/gpus/ },
  { set: ["--set", "trainer.gpus=two"], want: /trainer\/gpus/ },
  { set: ["--set", "trainer.gpu=1"], want: /trainer.*gpu/ },
  { set: ["--set", "image.tag=latest"], want: /image\/tag/ },
  { set: ["--set", "chief.port=70000"], want: /chief\/port/ },
  { set: ["--set", "ps.persistence.size=lots"], want: /ps\/persistence\/size/ },
  { set: ["--set", "image.pullPolicy=Sometimes"], want: /image\/pullPolicy/ },
  { set: ["--set", "tls.enabled=true"], want: /tls\.enabled.*tls\.(existingSecret|cert)/ },
  { set: ["--set", "auth.enabled=true"], want: /auth\.enabled/ },
  { set: ["--set", "metrics.serviceMonitor.enabled=true"], want: /monitoring\.coreos\.com\/v1/ },
  { set: ["--set", "metrics.port=7000"], want: /metrics\.port/ },
];
for (const b of bad) {
  const r = helm(["template", RELEASE, CHART, ...b.set]);
  const msg = (r.stderr || "").trim().replace(/\s+/g, " ");
  if (r.status === 0) fail(`bad values ${b.set[1]} rendered without error`);
  else if (!b.want.test(msg)) fail(`bad values ${b.set[1]}: error does not name the field: ${msg}`);
  else ok(`bad values ${b.set[1]} rejected: ${msg.replace(/^.*?(- at |execution error at )/, "$1").slice(0, 110)}`);
}

// ---------------------------------------------------------------- 4. NOTES.txt
// (helm 4's install takes no --api-versions, so no ServiceMonitor variant here.)
for (const extra of [[], ["--set", "trainer.gpus=1", "--set", "tls.enabled=true", "--set", "tls.existingSecret=my-tls"]]) {
  const r = helm(["install", RELEASE, CHART, "--dry-run=client", "--namespace", "ml", ...extra]);
  const out = r.stdout || "";
  const notes = out.slice(out.indexOf("NOTES:"));
  const p = [];
  if (r.status !== 0) p.push(`exit ${r.status}: ${r.stderr.trim()}`);
  if (!out.includes("NOTES:")) p.push("no NOTES");
  if (!/brook submit job\.yaml --chief 127\.0\.0\.1:7000/.test(notes)) p.push("no submit line");
  if (!/kubectl --namespace ml port-forward svc\/rel-brook-chief 7000:7000/.test(notes)) p.push("no port-forward line");
  if (!notes.includes("helm test rel")) p.push("no helm test line");
  if (/<no value>|%!/.test(notes)) p.push("template holes in NOTES");
  if (p.length) fail(`NOTES.txt ${extra.join(" ")}: ${p.join("; ")}`);
  else ok(`helm install --dry-run=client renders NOTES.txt ${extra.length ? "(GPU, TLS)" : "(defaults)"}`);
}

// ---------------------------------------------------------------- 5. the real binary
if (!existsSync(BROOK)) {
  fail(`brook binary ${BROOK} not found (set BROOK_BINARY)`);
} else {
  const scratch = mkdtempSync(path.join(tmpdir(), "brook-helm-"));
  const seen = new Set();
  // Literal env of a container: its ConfigMaps, then env (downward API and
  // Secrets substituted with plausible values).
  function containerEnv(objs, o, c, podIndex) {
    const env = {};
    const podName = o.kind === "Pod" ? o.metadata.name : `${o.metadata.name}-${podIndex}`;
    for (const from of c.envFrom || []) {
      if (from.configMapRef) {
        const cm = find(objs, "ConfigMap", from.configMapRef.name);
        if (!cm) throw new Error(`ConfigMap ${from.configMapRef.name} not rendered`);
        Object.assign(env, cm.data || {});
      } else throw new Error(`envFrom ${JSON.stringify(from)} not handled`);
    }
    for (const e of c.env || []) {
      if ("value" in e) env[e.name] = String(e.value);
      else if (e.valueFrom?.fieldRef) {
        const f = e.valueFrom.fieldRef.fieldPath;
        if (f === "metadata.name") env[e.name] = podName;
        else if (f === "metadata.namespace") env[e.name] = o.metadata.namespace;
        else if (f === "metadata.labels['apps.kubernetes.io/pod-index']") env[e.name] = String(podIndex);
        else throw new Error(`fieldRef ${f} not handled`);
      } else if (e.valueFrom?.secretKeyRef) env[e.name] = "placeholder-secret";
      else throw new Error(`env ${e.name} not handled`);
    }
    return env;
  }
  // Paths in the pod's env point at volumes; make them exist here.
  const localize = (env) => {
    for (const [k, val] of Object.entries(env)) if (/_DIR$/.test(k) && val.startsWith("/")) env[k] = path.join(scratch, val);
    return env;
  };
  function run(args, env) {
    return spawnSync(BROOK, args, { encoding: "utf8", env: { PATH: process.env.PATH, HOME: scratch, ...env }, timeout: 20000 });
  }
  let checked = 0;
  for (const { v, objs } of rendered) {
    for (const o of objs) {
      const spec = podSpecOf(o);
      if (!spec) continue;
      const replicas = o.kind === "StatefulSet" ? o.spec.replicas : 1;
      for (const c of containersOf(spec)) {
        const cmd = c.command || [];
        if (cmd.length && !(cmd.length === 1 && cmd[0] === "brook")) {
          fail(`[${v.name}] ${o.metadata.name}/${c.name}: command ${cmd} is not the image's brook entrypoint`);
          continue;
        }
        for (const podIndex of [...new Set([0, Math.max(0, replicas - 1)])]) {
          let env;
          try {
            env = localize(containerEnv(objs, o, c, podIndex));
          } catch (e) {
            fail(`[${v.name}] ${o.metadata.name}/${c.name}: ${e.message}`);
            continue;
          }
          const key = JSON.stringify([c.args, env]);
          if (seen.has(key)) continue;
          seen.add(key);
          const shown = `brook ${c.args.join(" ")}`;
          if (isHelmTest(o)) {
            // A client: `list` has no --check-config; it must parse its flags
            // and fail only for want of a chief (exit 4: unreachable).
            const args = [...c.args];
            const t = args.indexOf("--timeout");
            if (t >= 0) args[t + 1] = "1";
            const r = run(args, env);
            if (r.status === 4) ok(`[${v.name}] ${shown}: flags accepted (exit 4: no chief here)`);
            else fail(`[${v.name}] ${shown}: exit ${r.status} ${r.signal || ""}, want 4 (unreachable): ${(r.stderr || "").trim()}`);
            checked++;
            continue;
          }
          const r = run([...c.args, "--check-config"], env);
          const envShown = Object.keys(env).filter((k) => k.startsWith("BROOK_")).length;
          if (r.status === 0 && r.stdout.includes("config ok")) ok(`[${v.name}] pod ${o.kind === "Pod" ? o.metadata.name : `${o.metadata.name}-${podIndex}`}: ${shown} --check-config (${envShown} BROOK_* vars)`);
          else fail(`[${v.name}] ${o.metadata.name}-${podIndex}/${c.name}: ${shown} --check-config exit ${r.status} ${r.signal || ""}: ${(r.stderr || "").trim()} ${(r.stdout || "").trim()}`);
          checked++;
        }
      }
    }
  }
  // --check-config must be able to say no, or the checks above prove nothing.
  const def = rendered.find((x) => x.v.name === "default");
  if (def) {
    const n = names(RELEASE);
    const ps = find(def.objs, "StatefulSet", n.ps);
    const c = ps.spec.template.spec.containers[0];
    const env = localize(containerEnv(def.objs, ps, c, ps.spec.replicas)); // one past the last shard
    const r = run([...c.args, "--check-config"], env);
    if (r.status === 2) ok(`brook ps --check-config rejects shard index ${ps.spec.replicas} of ${ps.spec.replicas} (exit 2: ${(r.stderr || "").trim()})`);
    else fail(`brook ps --check-config accepted an out-of-range shard index (exit ${r.status})`);
    const chief = find(def.objs, "Deployment", n.chief).spec.template.spec.containers[0];
    const args = chief.args.filter((a, i, all) => a !== "--ps-statefulset" && all[i - 1] !== "--ps-statefulset");
    const r2 = run([...args, "--check-config"], localize(containerEnv(def.objs, find(def.objs, "Deployment", n.chief), chief, 0)));
    if (r2.status === 2) ok(`brook chief --check-config rejects a chief with no PS (exit 2: ${(r2.stderr || "").trim()})`);
    else fail(`brook chief --check-config accepted a chief with no PS list (exit ${r2.status})`);
  }
  if (checked === 0) fail("no container was run through the binary");
  rmSync(scratch, { recursive: true, force: true });
}

console.log(`helm chart checks: ${passes} ok, ${failures} failed`);
process.exit(failures ? 1 : 0);
