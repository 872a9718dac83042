// Offline checks of the Helm chart helm/brook (run by scripts/helm_test.sh):
//   1. `helm lint --strict`;
//   2. `helm template` with the default values (mutual TLS and the chief's
//      token on, both generated) and variants (TLS and token off, a user
//      certificate and token, existing Secrets, GPU / CPU trainers,
//      ServiceMonitor, 1 and 8 PS, no persistence, no metrics, another
//      namespace) — every object validated against the Kubernetes 1.34
//      schemas (kubernetes-models) and the Prometheus Operator's
//      (@kubernetes-models/prometheus-operator), then asserted on: labels,
//      security contexts, probes, resources, GPUs, PS replicas, the headless
//      Service, PDB, NetworkPolicies, Prometheus annotations, the TLS and
//      token Secrets, mounts, BROOK_TLS_* / token env and checksums; the
//      storage volumes (storage.data in the chief and trainers, read-only;
//      storage.shared at one path in the chief and every PS; the shared PVC
//      the chart makes) and <role>.extraVolumes / extraVolumeMounts; the PS
//      token (BROOK_PS_TOKEN in the PS, chief and trainer pods) or, with
//      neither token nor mutual TLS, `brook ps --allow-unauthenticated`;
//      with serving.enabled (variants: defaults on the shared PVC; HPA, one
//      job's export, memory limit, other ports; following the PS with
//      mutual TLS and token, existing Secrets, or neither; exports on its
//      own volume with metrics, NetworkPolicy and its test off) the
//      `brook serve` Deployment (args, --wait-for-model, the model path on a
//      read-only mount, ports, startup/readiness probes on GET
//      /v1/models/NAME and a TCP liveness probe, its own ConfigMap and
//      checksum, the PS token and TLS only with followPs), its Service,
//      HPA, NetworkPolicy, scraping and its helm test pod; with it off, no
//      serving object at all; turning serving on or retuning it changes no
//      chief, PS or trainer object;
//   2b. the generated certificate is real (openssl CLI): it chains to the
//      generated CA, its SANs cover the chief Service and (wildcard) every PS
//      pod name of the rendered namespace, it has serverAuth and clientAuth,
//      its key matches, its validity is tls.generatedDays; the generated
//      token is >= 16 characters; offline renders differ only in the Secrets
//      (the pods' checksum/secrets hashes values, not generated material);
//   2c. on upgrade (`helm template --dry-run=server` against an in-process
//      stub Kubernetes API holding the first render's Secrets) `lookup`
//      brings back the same CA, certificate, key and token;
//   3. bad values fail `helm template` naming the field (storage and extra
//      volumes included);
//   4. NOTES.txt renders (`helm install --dry-run=client`), with how to read
//      the token and certificates when they are on, where jobs' paths go,
//      and the loud warning when the PS is unauthenticated;
//   5. every rendered container's args (with its ConfigMap and literal env;
//      downward-API values substituted, TLS paths pointing at the rendered
//      Secret's files) pass `brook ... --check-config` (a PS given
//      --allow-unauthenticated: without that flag while the binary lacks
//      it; it comes with the ps-auth change); the smoke data is
//      generated with exactly the Dockerfiles' `brook data gen` arguments and
//      examples/smoke/job.yaml passes `brook submit --dry-run` beside it; the
//      helm test pod's /bin/sh script (smoke job path pointed at that data)
//      gets as far as dialling; a chief started with the default render's
//      generated certificate and token (and two PS shards started with the
//      PS pods' env) serves `brook list` to a client holding them and refuses
//      one without, and with a trainer started with the trainer pod's env the
//      test pod's script submits the smoke job, watches it and exits 0;
//      then `brook serve` with the serving pod's args and ConfigMap, started
//      before any export, waits (--wait-for-model), loads the export a
//      smoke job with export.dir writes on that live cluster, answers the
//      probes' GET and /metrics, and the serving helm test pod's bash script
//      reads the model's metadata and gets a prediction from it (exit 0);
//      the same script fails, saying why, with no server or a wrong model
//      name, and `brook serve --check-config` refuses --memory-limit
//      without --data-dir and --job without --follow-ps.
// Prints "ok: ..." / "FAIL: ..." per check; exits 1 on any failure.
//
// Environment: HELM (helm binary), BROOK_NODE_MODULES (a node_modules with
// kubernetes-models, @kubernetes-models/prometheus-operator, yaml),
// BROOK_BINARY (the brook binary), CHART (default: helm/brook).
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const HELM = process.env.HELM || "helm";
const MODULES = process.env.BROOK_NODE_MODULES;
const BROOK = process.env.BROOK_BINARY || path.join(repo, "build/bin/brook");
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
  return { full, chief: `${full}-chief`, ps: `${full}-ps`, trainer: `${full}-trainer`, serving: `${full}-serving`, chiefTest: `${full}-test-chief`, servingTest: `${full}-test-serving` };
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
// Where the images ship the smoke job and its data (docker/Dockerfile.*).
const SMOKE_DIR = "/usr/share/brook/smoke";
// The helm test pod runs `/bin/sh -c SCRIPT $0 CHIEF_ADDRESS`.
const testPodScript = (pod) => {
  const c = pod.spec.containers[0];
  return { command: c.command || [], script: String(c.args?.[0] ?? ""), argv0: c.args?.[1], chief: c.args?.[2] };
};
// The serving helm test pod runs `/bin/bash -c SCRIPT $0 HOST PORT MODEL WAIT_SECONDS`.
const servingTestScript = (pod) => {
  const c = pod.spec.containers[0];
  const a = c.args || [];
  return { command: c.command || [], script: String(a[0] ?? ""), argv0: a[1], host: a[2], port: a[3], model: a[4], wait: a[5] };
};
const containersOf = (spec) => [...(spec?.initContainers || []), ...(spec?.containers || [])];
const argValue = (args, flag) => {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
};

// A values file (JSON is YAML) for what --set cannot say well (lists of
// volumes).
let valuesFiles = 0;
function valuesFile(obj) {
  const file = path.join(work, `values-${valuesFiles++}.json`);
  writeFileSync(file, JSON.stringify(obj));
  return file;
}
// JSON with sorted keys (toYaml sorts them): equal values, equal strings.
const canon = (x) => JSON.stringify(x, (k, val) => (val && typeof val === "object" && !Array.isArray(val) ? Object.fromEntries(Object.entries(val).sort()) : val));
const dig = (obj, dotted) => dotted.split(".").reduce((o, k) => (o && typeof o === "object" ? o[k] : undefined), obj);

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

// ---------------------------------------------------------------- certificates
// A user-provided certificate (a CA and a leaf for the "rel" release in
// namespace "default", both usages) for the variants that bring their own.
const work = mkdtempSync(path.join(tmpdir(), "brook-helm-certs-"));
function openssl(args, opts = {}) {
  return spawnSync("openssl", args, { encoding: "utf8", cwd: opts.cwd || work, input: opts.input });
}
const HAVE_OPENSSL = spawnSync("openssl", ["version"], { encoding: "utf8" }).status === 0;
const USER_CERT = { cert: path.join(work, "user-tls.crt"), key: path.join(work, "user-tls.key"), ca: path.join(work, "user-ca.crt") };
if (!HAVE_OPENSSL) {
  fail("openssl CLI not found: needed for the certificate checks");
} else {
  const ext = path.join(work, "user-ext.cnf");
  writeFileSync(ext, [
    "basicConstraints=critical,CA:FALSE",
    "keyUsage=critical,digitalSignature,keyEncipherment",
    "extendedKeyUsage=serverAuth,clientAuth",
    "subjectAltName=DNS:rel-brook-chief.default.svc,DNS:*.rel-brook-ps.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1",
    "",
  ].join("\n"));
  const steps = [
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=user-ca", "-days", "2", "-keyout", "user-ca.key", "-out", "user-ca.crt"],
    ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=rel-brook-chief", "-keyout", "user-tls.key", "-out", "user-tls.csr"],
    ["x509", "-req", "-in", "user-tls.csr", "-CA", "user-ca.crt", "-CAkey", "user-ca.key", "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", "user-tls.crt"],
  ];
  for (const a of steps) {
    const r = openssl(a);
    if (r.status !== 0) {
      fail(`openssl ${a.slice(0, 2).join(" ")} (user certificate): ${r.stderr.trim()}`);
      break;
    }
  }
}
const b64 = (file) => readFileSync(file).toString("base64");
const unb64 = (s) => Buffer.from(s || "", "base64").toString("utf8");
// RFC 6125: a "*" leftmost label matches exactly one label.
const sanMatches = (san, host) => {
  if (!san.startsWith("*.")) return san === host;
  const dot = host.indexOf(".");
  return dot > 0 && host.slice(dot + 1) === san.slice(2);
};

// ---------------------------------------------------------------- 1. lint
for (const extra of [
  [],
  ["--set", "trainer.gpus=1", "--set", "tls.enabled=false", "--set", "auth.enabled=false"],
  ["--set-file", `tls.cert=${USER_CERT.cert}`, "--set-file", `tls.key=${USER_CERT.key}`, "--set-file", `tls.ca=${USER_CERT.ca}`, "--set", "auth.token=lint-token-0123456789"],
  ["--set", "serving.enabled=true", "--set", "storage.shared.enabled=true", "--set", "storage.shared.size=1Gi", "--set", "serving.hpa.enabled=true", "--set", "serving.followPs=true"],
]) {
  const r = helm(["lint", "--strict", CHART, ...extra]);
  const shown = extra.join(" ").replaceAll(work, "<tmp>");
  if (r.status === 0) ok(`helm lint --strict ${shown}`.trim());
  else fail(`helm lint --strict ${shown}: ${(r.stdout + r.stderr).trim()}`);
}

// ---------------------------------------------------------------- 2. renders
const variants = [
  { name: "default", set: {} },
  { name: "gpu trainers", set: { "trainer.gpus": 1 } },
  { name: "2 gpus, runtime class", set: { "trainer.gpus": 2, "trainer.gpuRuntimeClassName": "nvidia" } },
  { name: "cpu-only trainers", set: { "trainer.gpus": 0, "trainer.cpuThreads": 8 } },
  { name: "tls and token off", set: { "tls.enabled": false, "auth.enabled": false } },
  {
    name: "user certificate + token",
    set: { "auth.token": "user-token-0123456789abcdef" },
    files: { "tls.cert": USER_CERT.cert, "tls.key": USER_CERT.key, "tls.ca": USER_CERT.ca },
  },
  {
    name: "existing secrets (cert-manager), not mutual",
    set: { "tls.existingSecret": "my-tls", "tls.mutual": false, "auth.existingSecret": "my-auth", "auth.existingSecretKey": "api-token", "tls.mountPath": "/run/brook/tls" },
  },
  { name: "TLS only (no token), not mutual", set: { "auth.enabled": false, "tls.mutual": false } },
  { name: "servicemonitor", set: { "metrics.serviceMonitor.enabled": true, "metrics.serviceMonitor.labels.release": "prometheus" }, extra: ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"] },
  { name: "podmonitor", set: { "metrics.podMonitor.enabled": true, "metrics.podMonitor.labels.release": "prometheus" }, extra: ["--api-versions", "monitoring.coreos.com/v1/PodMonitor"] },
  { name: "ps.replicas=1", set: { "ps.replicas": 1, "ps.memoryLimit": "512MiB" } },
  { name: "ps.replicas=8", set: { "ps.replicas": 8, "ps.wal": false, "ps.walFsync": true, "ps.helpers": 3, "tls.generatedDays": 30 } },
  {
    name: "no persistence, no metrics, no network policy, no PDB",
    set: { "chief.persistence.enabled": false, "ps.persistence.enabled": false, "metrics.enabled": false, "networkPolicy.enabled": false, "ps.podDisruptionBudget.enabled": false, "ps.memoryLimit": "" },
  },
  { name: "namespace ml, release brook-prod, env", release: "brook-prod", namespace: "ml", set: { "env.BROOK_PS_DEDUP_WINDOW": 4096, "chief.env.BROOK_CHIEF_LEASE_SECONDS": 30, "image.tag": "1.2.3" } },
  {
    name: "storage: data PVC, shared PVC made by the chart, extra volumes",
    set: {},
    values: {
      storage: { data: { enabled: true, existingClaim: "training-data" }, shared: { enabled: true, size: "100Gi", storageClass: "nfs-client" } },
      chief: { extraVolumes: [{ name: "jobs", configMap: { name: "brook-jobs" } }], extraVolumeMounts: [{ name: "jobs", mountPath: "/etc/brook/jobs", readOnly: true }] },
      trainer: { extraVolumes: [{ name: "scratch", emptyDir: { medium: "Memory", sizeLimit: "1Gi" } }], extraVolumeMounts: [{ name: "scratch", mountPath: "/scratch" }] },
    },
  },
  {
    name: "storage: single node (hostPath data and shared), TLS and token off",
    set: { "tls.enabled": false, "auth.enabled": false },
    values: {
      storage: { data: { enabled: true, hostPath: "/srv/brook/data", mountPath: "/data" }, shared: { enabled: true, hostPath: "/srv/brook/shared" } },
      ps: { extraVolumes: [{ name: "cache", emptyDir: {} }], extraVolumeMounts: [{ name: "cache", mountPath: "/cache" }] },
    },
  },
  {
    name: "storage: existing shared claim, 3 PS, data from a subPath of it via extraVolumes",
    set: { "ps.replicas": 3 },
    values: {
      storage: { shared: { enabled: true, existingClaim: "brook-rwx", mountPath: "/mnt/brook" } },
      chief: { extraVolumeMounts: [{ name: "brook-shared", mountPath: "/mnt/data", subPath: "data", readOnly: true }] },
      trainer: { extraVolumes: [{ name: "data", persistentVolumeClaim: { claimName: "brook-rwx", readOnly: true } }], extraVolumeMounts: [{ name: "data", mountPath: "/mnt/data", subPath: "data", readOnly: true }] },
    },
  },
  // brook serve (serving.*): needs the exports (storage.shared or its own volume).
  {
    name: "serving: defaults on the chart's shared PVC",
    set: {},
    values: { storage: { shared: { enabled: true, size: "20Gi" } }, serving: { enabled: true } },
  },
  {
    name: "serving: HPA, one job's export, memory limit, fill missing, ports, servicemonitor",
    set: { "metrics.serviceMonitor.enabled": true, "metrics.serviceMonitor.labels.release": "prometheus" },
    extra: ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"],
    values: {
      storage: { shared: { enabled: true, existingClaim: "brook-rwx", mountPath: "/mnt/brook" } },
      serving: {
        enabled: true, modelName: "ctr", model: "/mnt/brook/exports/ctr-daily", httpPort: 8080, grpcPort: 9000, memoryLimit: "1GiB", dataDirSizeLimit: "20Gi", fillMissing: true,
        maxBatch: 256, batchTimeoutMicros: 500, workers: 4, httpThreads: 3, maxRequestBytes: "16MiB", pollSeconds: 30,
        hpa: { enabled: true, minReplicas: 2, maxReplicas: 10, targetCPUUtilizationPercentage: 60 }, extraArgs: ["--max-queued-examples", "1024"],
        env: { BROOK_SERVE_WORKERS: 6 },
      },
      networkPolicy: { servingClientsFrom: [{ namespaceSelector: { matchLabels: { team: "web" } } }] },
    },
  },
  {
    name: "serving: following the PS (mutual TLS and token), 3 PS, podmonitor",
    set: { "ps.replicas": 3, "metrics.podMonitor.enabled": true, "metrics.podMonitor.labels.release": "prometheus" },
    extra: ["--api-versions", "monitoring.coreos.com/v1/PodMonitor"],
    values: { storage: { shared: { enabled: true, hostPath: "/srv/brook/shared" } }, serving: { enabled: true, followPs: true, job: "ctr-1", syncSeconds: 5, replicas: 3 } },
  },
  {
    name: "serving: following the PS, existing Secrets, not mutual, 2 replicas",
    set: { "tls.existingSecret": "my-tls", "tls.mutual": false, "auth.existingSecret": "my-auth", "auth.existingSecretKey": "api-token", "tls.mountPath": "/run/brook/tls" },
    values: { storage: { shared: { enabled: true, size: "1Gi" } }, serving: { enabled: true, followPs: true, replicas: 2 } },
  },
  {
    name: "serving: following an unauthenticated PS (TLS and token off)",
    set: { "tls.enabled": false, "auth.enabled": false },
    values: { storage: { shared: { enabled: true, size: "1Gi" } }, serving: { enabled: true, followPs: true } },
  },
  {
    name: "serving: exports on its own volume (no storage.shared), no metrics, no network policy, no helm test",
    set: { "metrics.enabled": false, "networkPolicy.enabled": false },
    values: {
      serving: {
        enabled: true, model: "/models/brook", test: { enabled: false },
        extraVolumes: [{ name: "models", nfs: { server: "nfs.example.com", path: "/exports/brook" } }],
        extraVolumeMounts: [{ name: "models", mountPath: "/models", readOnly: true }],
      },
    },
  },
];

const REQUIRED_LABELS = ["app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component", "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by", "app.kubernetes.io/version", "helm.sh/chart"];
const rendered = []; // {variant, release, namespace, objs}

for (const v of variants) {
  const release = v.release || RELEASE;
  const namespace = v.namespace || "default";
  const n = names(release);
  const sets = [
    ...Object.entries(v.set).flatMap(([k, val]) => ["--set", `${k}=${val}`]),
    ...Object.entries(v.files || {}).flatMap(([k, file]) => ["--set-file", `${k}=${file}`]),
    ...(v.values ? ["-f", valuesFile(v.values)] : []),
  ];
  let objs;
  try {
    objs = render(release, namespace, [...sets, ...(v.extra || [])]);
    ok(`[${v.name}] helm template renders ${objs.length} objects`);
  } catch (e) {
    fail(`[${v.name}] ${e.message}`);
    continue;
  }
  rendered.push({ v, release, namespace, objs });
  const get = (key, dflt) =>
    key in v.set ? v.set[key] : v.files && key in v.files ? readFileSync(v.files[key], "utf8") : dig(v.values, key) !== undefined ? dig(v.values, key) : dflt;
  const gpus = Number(get("trainer.gpus", 0));
  const psReplicas = Number(get("ps.replicas", 2));
  const metricsOn = get("metrics.enabled", true) !== false;
  const tlsOn = get("tls.enabled", true) !== false;
  const authOn = get("auth.enabled", true) !== false;
  const mutual = get("tls.mutual", true) !== false;
  const mountPath = get("tls.mountPath", "/etc/brook/tls");
  const servingOn = String(get("serving.enabled", false)) === "true";
  const followPs = servingOn && String(get("serving.followPs", false)) === "true";
  const servingTestOn = servingOn && String(get("serving.test.enabled", true)) === "true";

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
          const port = pr.tcpSocket?.port ?? pr.httpGet?.port;
          const ports = (c.ports || []).map((x) => [x.name, x.containerPort]).flat();
          if (port === undefined || !ports.includes(port)) p.push(`${cw}: ${probe} ${pr.httpGet ? "httpGet" : "tcpSocket"} port ${port} is not a container port`);
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
    const memoryLimit = get("ps.memoryLimit", "5GiB");
    if (memoryLimit ? argValue(c.args, "--memory-limit") !== memoryLimit : c.args.includes("--memory-limit")) p.push(`--memory-limit (ps.memoryLimit ${JSON.stringify(memoryLimit)})`);
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
    if (cm?.data?.BROOK_PS_HELPERS !== String(get("ps.helpers", -1))) p.push(`BROOK_PS_HELPERS ${cm?.data?.BROOK_PS_HELPERS}`);
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
    for (const w of [find(objs, "Deployment", n.chief), find(objs, "StatefulSet", n.ps), find(objs, "StatefulSet", n.trainer), ...(servingOn ? [find(objs, "Deployment", n.serving)] : [])]) {
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
    for (const want of [n.chief, n.ps, n.trainer, ...(servingOn ? [n.serving] : [])]) {
      const s = svcs.find((x) => x.metadata.name === want);
      if (!s) p.push(`${want} Service not selected`);
      else if (!s.spec.ports.some((x) => x.name === sm.spec.endpoints[0].port)) p.push(`${want} Service lacks port ${sm.spec.endpoints[0].port}`);
    }
    return p;
  });

  check(`[${v.name}] PodMonitor ${get("metrics.podMonitor.enabled", false) ? "selects every Brook pod's metrics port" : "absent"}`, () => {
    const pms = byKind(objs, "PodMonitor");
    if (!get("metrics.podMonitor.enabled", false)) return pms.length ? ["rendered while disabled"] : [];
    if (pms.length !== 1) return [`${pms.length} PodMonitors`];
    const pm = pms[0];
    const p = [];
    if (pm.metadata.labels.release !== "prometheus") p.push("podMonitor.labels not applied");
    const port = pm.spec.podMetricsEndpoints[0].port;
    const selects = (labels) =>
      Object.entries(pm.spec.selector.matchLabels).every(([k, val]) => labels[k] === val) &&
      (pm.spec.selector.matchExpressions || []).every((e) => e.operator === "In" && e.values.includes(labels[e.key]));
    for (const o of objs.filter((x) => podSpecOf(x) && !isHelmTest(x))) {
      const labels = (o.spec.template || o).metadata.labels || {};
      if (!selects(labels)) p.push(`${o.kind} ${o.metadata.name}: pods not selected`);
      else if (!podSpecOf(o).containers.some((c) => (c.ports || []).some((x) => x.name === port))) p.push(`${o.metadata.name}: no container port ${port}`);
    }
    const test = objs.find(isHelmTest);
    if (test && selects(test.metadata.labels || {})) p.push("the helm test pod is selected (it has no metrics port)");
    return p;
  });

  const workloads = objs.filter((o) => podSpecOf(o));
  const testPod = find(objs, "Pod", n.chiefTest);
  const chiefW = find(objs, "Deployment", n.chief);
  const servingW = servingOn ? find(objs, "Deployment", n.serving) : null;
  const envOf = (o) => podSpecOf(o).containers[0].env || [];
  const TLS_KEYS = ["BROOK_TLS_CA", "BROOK_TLS_CERT", "BROOK_TLS_KEY", "BROOK_TLS_MUTUAL"];
  const wantTlsEnv = { BROOK_TLS_CERT: `${mountPath}/tls.crt`, BROOK_TLS_KEY: `${mountPath}/tls.key`, BROOK_TLS_CA: `${mountPath}/ca.crt`, BROOK_TLS_MUTUAL: String(mutual) };
  const userCert = !!(v.files && v.files["tls.cert"]);
  const tlsSecretName = get("tls.existingSecret", "") || `${n.full}-tls`;
  const authSecretName = get("auth.existingSecret", "") || `${n.full}-auth`;
  const authSecretKey = get("auth.existingSecret", "") ? get("auth.existingSecretKey", "token") : "token";

  check(`[${v.name}] TLS ${tlsOn ? `${mutual ? "mutual, " : ""}${get("tls.existingSecret", "") ? "existing Secret" : userCert ? "user certificate" : "generated certificate"}: Secret, mount and BROOK_TLS_* in every pod` : "off: no Secret, mount or BROOK_TLS_*"}`, () => {
    const p = [];
    const withTls = workloads.filter((o) => (podSpecOf(o).volumes || []).some((x) => x.name === "tls"));
    // Brook gRPC clients and servers; not the serving pods unless they
    // follow the PS, nor the serving test pod (plain HTTP).
    const tlsPods = workloads.filter((o) => o.metadata.name !== n.servingTest && (o.metadata.name !== n.serving || followPs));
    const cms = [n.chief, n.ps, n.trainer, ...(followPs ? [n.serving] : [])].map((name) => find(objs, "ConfigMap", name));
    const servingCm = servingOn ? find(objs, "ConfigMap", n.serving) : null;
    if (servingOn && !followPs) {
      for (const k of TLS_KEYS) if (servingCm?.data?.[k] !== undefined) p.push(`${n.serving}: ${k} without serving.followPs (it dials no Brook server)`);
    }
    const testEnv = Object.fromEntries(envOf(testPod).filter((e) => "value" in e).map((e) => [e.name, e.value]));
    if (!tlsOn) {
      if (find(objs, "Secret", tlsSecretName)) p.push("TLS Secret rendered while off");
      if (withTls.length) p.push("tls volume while off");
      for (const cm of cms) for (const k of TLS_KEYS) if (cm?.data?.[k] !== undefined) p.push(`${cm.metadata.name}: ${k} while off`);
      for (const k of TLS_KEYS) if (k in testEnv) p.push(`test pod: ${k} while off`);
      return p;
    }
    const s = find(objs, "Secret", tlsSecretName);
    if (get("tls.existingSecret", "")) {
      if (s) p.push("rendered a Secret over tls.existingSecret");
    } else if (!s) p.push(`no Secret ${tlsSecretName}`);
    else {
      if (s.type !== "kubernetes.io/tls") p.push(`Secret type ${s.type}`);
      for (const k of ["tls.crt", "tls.key", "ca.crt"]) if (!s.data?.[k]) p.push(`Secret lacks ${k}`);
      const generated = s.metadata.annotations?.["brook.io/generated"] === "true";
      if (generated === userCert) p.push(`brook.io/generated annotation ${generated} with${userCert ? "" : "out"} a user certificate`);
      if (userCert) {
        if (s.data["tls.crt"] !== b64(v.files["tls.cert"])) p.push("tls.crt is not tls.cert");
        if (s.data["tls.key"] !== b64(v.files["tls.key"])) p.push("tls.key is not tls.key");
        if (s.data["ca.crt"] !== b64(v.files["tls.ca"])) p.push("ca.crt is not tls.ca");
      } else {
        if (!unb64(s.data["tls.crt"]).includes("-----BEGIN CERTIFICATE-----")) p.push("generated tls.crt is not PEM");
        if (!/-----BEGIN (RSA |EC )?PRIVATE KEY-----/.test(unb64(s.data["tls.key"]))) p.push("generated tls.key is not PEM");
      }
    }
    for (const o of tlsPods) if (!withTls.includes(o)) p.push(`${o.metadata.name} does not mount the TLS Secret`);
    for (const o of withTls) if (!tlsPods.includes(o)) p.push(`${o.metadata.name} mounts the TLS Secret it has no use for`);
    for (const o of withTls) {
      if (podSpecOf(o).volumes.find((x) => x.name === "tls").secret?.secretName !== tlsSecretName) p.push(`${o.metadata.name}: wrong secret`);
      for (const c of containersOf(podSpecOf(o))) {
        const m = (c.volumeMounts || []).find((x) => x.name === "tls");
        if (m?.mountPath !== mountPath || m?.readOnly !== true) p.push(`${o.metadata.name}/${c.name}: tls not mounted read-only at ${mountPath}`);
      }
    }
    for (const cm of cms) for (const [k, want] of Object.entries(wantTlsEnv)) if (cm?.data?.[k] !== want) p.push(`${cm?.metadata.name}: ${k}=${cm?.data?.[k]}, want ${want}`);
    for (const [k, want] of Object.entries(wantTlsEnv)) if (testEnv[k] !== want) p.push(`test pod: ${k}=${testEnv[k]}, want ${want}`);
    return p;
  });

  check(`[${v.name}] chief token ${authOn ? `${get("auth.existingSecret", "") ? "from an existing Secret" : get("auth.token", "") ? "from auth.token" : "generated"}: BROOK_CHIEF_TOKEN for the chief, BROOK_TOKEN for trainers and the test pod` : "off: no Secret, no token env"}`, () => {
    const p = [];
    const refOf = (o, name) => envOf(o).find((e) => e.name === name);
    const clients = [find(objs, "StatefulSet", n.trainer), testPod];
    for (const cm of byKind(objs, "ConfigMap")) for (const k of Object.keys(cm.data || {})) if (/TOKEN/.test(k)) p.push(`${cm.metadata.name}: ${k} in a ConfigMap`);
    if (!authOn) {
      if (find(objs, "Secret", authSecretName)) p.push("token Secret rendered while off");
      if (refOf(chiefW, "BROOK_CHIEF_TOKEN")) p.push("chief has BROOK_CHIEF_TOKEN while off");
      for (const o of clients) if (refOf(o, "BROOK_TOKEN")) p.push(`${o.metadata.name} has BROOK_TOKEN while off`);
      return p;
    }
    const s = find(objs, "Secret", authSecretName);
    if (get("auth.existingSecret", "")) {
      if (s) p.push("rendered a Secret over auth.existingSecret");
    } else if (!s) p.push(`no Secret ${authSecretName}`);
    else {
      const token = unb64(s.data?.token);
      if (get("auth.token", "")) {
        if (token !== get("auth.token")) p.push("token is not auth.token");
      } else {
        if (s.metadata.annotations?.["brook.io/generated"] !== "true") p.push("generated token Secret not annotated brook.io/generated");
        if (!/^[!-~]{16,}$/.test(token)) p.push(`generated token ${JSON.stringify(token)}: not >= 16 printable ASCII characters`);
      }
    }
    for (const [o, name] of [[chiefW, "BROOK_CHIEF_TOKEN"], ...clients.map((o) => [o, "BROOK_TOKEN"])]) {
      const ref = refOf(o, name)?.valueFrom?.secretKeyRef;
      if (!ref) p.push(`${o.metadata.name}: no ${name} from a Secret`);
      else if (ref.name !== authSecretName || ref.key !== authSecretKey) p.push(`${o.metadata.name}: ${name} from ${ref.name}/${ref.key}, want ${authSecretName}/${authSecretKey}`);
    }
    if (refOf(chiefW, "BROOK_TOKEN")) p.push("chief given a client BROOK_TOKEN");
    if (servingW && refOf(servingW, "BROOK_TOKEN")) p.push("serving pods given the chief's BROOK_TOKEN (they never call the chief)");
    return p;
  });

  check(`[${v.name}] checksum/secrets pod annotation ${tlsOn || authOn ? "on every workload" : "absent (TLS and token off)"}`, () => {
    const p = [];
    const sums = new Set();
    for (const w of [chiefW, find(objs, "StatefulSet", n.ps), find(objs, "StatefulSet", n.trainer)]) {
      const sum = w.spec.template.metadata.annotations?.["checksum/secrets"];
      if (tlsOn || authOn) {
        if (!/^[0-9a-f]{64}$/.test(sum || "")) p.push(`${w.metadata.name}: checksum/secrets ${sum}`);
        sums.add(sum);
      } else if (sum !== undefined) p.push(`${w.metadata.name}: checksum/secrets while both off`);
    }
    if (sums.size > 1) p.push("workloads disagree on checksum/secrets");
    if (servingW) {
      const sum = servingW.spec.template.metadata.annotations?.["checksum/secrets"];
      if (followPs && (tlsOn || authOn)) {
        if (!sums.has(sum)) p.push(`${n.serving} (follows the PS): checksum/secrets ${sum}, not the other workloads'`);
      } else if (sum !== undefined) p.push(`${n.serving}: checksum/secrets while it mounts no Secret`);
    }
    return p;
  });

  const dataOn = String(get("storage.data.enabled", false)) === "true";
  const sharedOn = String(get("storage.shared.enabled", false)) === "true";
  check(`[${v.name}] storage: ${dataOn ? "data read-only in the chief and trainers" : "no data volume"}, ${sharedOn ? `one shared volume at one path in the chief and every PS${servingOn ? " (read-only in the serving pods)" : ""}` : "no shared volume"}, extra volumes as given`, () => {
    const p = [];
    const roles = { chief: find(objs, "Deployment", n.chief), ps: find(objs, "StatefulSet", n.ps), trainer: find(objs, "StatefulSet", n.trainer), ...(servingOn ? { serving: servingW } : {}) };
    const sharedClaim = `${n.full}-shared`;
    const made = sharedOn && get("storage.shared.size", "") && !get("storage.shared.existingClaim", "") && !get("storage.shared.hostPath", "");
    const want = { "brook-data": dataOn ? ["chief", "trainer"] : [], "brook-shared": sharedOn ? ["chief", "ps", "serving"] : [] };
    const sharedPaths = new Set();
    for (const [vol, withIt] of Object.entries(want)) {
      for (const [role, w] of Object.entries(roles)) {
        const spec = w.spec.template.spec;
        const volume = (spec.volumes || []).find((x) => x.name === vol);
        const mount = (spec.containers[0].volumeMounts || []).find((x) => x.name === vol && !x.subPath);
        if (!withIt.includes(role)) {
          if (volume || mount) p.push(`${role}: has ${vol}`);
          continue;
        }
        if (!volume || !mount) {
          p.push(`${role}: no ${vol} ${volume ? "mount" : "volume"}`);
          continue;
        }
        const prefix = vol === "brook-data" ? "storage.data" : "storage.shared";
        const mountPath = get(`${prefix}.mountPath`, vol === "brook-data" ? "/brook/data" : "/brook/shared");
        if (mount.mountPath !== mountPath) p.push(`${role}: ${vol} at ${mount.mountPath}, want ${mountPath}`);
        if (vol === "brook-data" && mount.readOnly !== true) p.push(`${role}: the data is not mounted read-only`);
        if (vol === "brook-shared") {
          if (role === "serving") {
            if (mount.readOnly !== true) p.push("serving: the shared volume is not mounted read-only (it only reads exports)");
            if (volume.persistentVolumeClaim && volume.persistentVolumeClaim.readOnly !== true) p.push("serving: shared claim not readOnly");
          } else if (mount.readOnly) p.push(`${role}: the shared volume is read-only (the PS and chief write there)`);
          sharedPaths.add(mount.mountPath);
        }
        const claim = get(`${prefix}.existingClaim`, "") || (vol === "brook-shared" && made ? sharedClaim : "");
        const hostPath = get(`${prefix}.hostPath`, "");
        if (claim) {
          if (volume.persistentVolumeClaim?.claimName !== claim) p.push(`${role}: ${vol} claim ${volume.persistentVolumeClaim?.claimName}, want ${claim}`);
          if (vol === "brook-data" && volume.persistentVolumeClaim?.readOnly !== true) p.push(`${role}: data claim not readOnly`);
        } else if (hostPath) {
          if (volume.hostPath?.path !== hostPath || volume.hostPath?.type !== "Directory") p.push(`${role}: ${vol} hostPath ${JSON.stringify(volume.hostPath)}, want ${hostPath} (Directory)`);
        } else p.push(`${role}: ${vol} has neither a claim nor a hostPath`);
      }
    }
    if (sharedPaths.size > 1) p.push(`the chief, the PS and the serving pods mount the shared volume at different paths: ${[...sharedPaths]}`);
    const pvc = find(objs, "PersistentVolumeClaim", sharedClaim);
    if (!!pvc !== !!made) p.push(`shared PVC ${sharedClaim} ${pvc ? "rendered" : "missing"}`);
    if (pvc) {
      if (!pvc.spec.accessModes.includes("ReadWriteMany")) p.push(`shared PVC access modes ${pvc.spec.accessModes}`);
      if (pvc.spec.resources?.requests?.storage !== get("storage.shared.size")) p.push("shared PVC size");
      if ((pvc.spec.storageClassName || "") !== get("storage.shared.storageClass", "")) p.push("shared PVC storageClassName");
      if (pvc.metadata.annotations?.["helm.sh/resource-policy"] !== "keep") p.push("shared PVC not kept on uninstall");
    }
    for (const [role, w] of Object.entries(roles)) {
      const spec = w.spec.template.spec;
      const mounts = spec.containers[0].volumeMounts || [];
      for (const ev of get(`${role}.extraVolumes`, [])) {
        if (canon((spec.volumes || []).find((x) => x.name === ev.name)) !== canon(ev)) p.push(`${role}: extra volume ${ev.name} not rendered as given`);
      }
      for (const em of get(`${role}.extraVolumeMounts`, [])) {
        const same = (m) => Object.entries(em).every(([k, val]) => m[k] === val) && Object.keys(m).length === Object.keys(em).length;
        if (!mounts.some(same)) p.push(`${role}: extra mount ${em.name} at ${em.mountPath} not rendered as given`);
      }
      // What the API server would refuse: a mount of no volume, one path twice.
      const names = new Set([...(spec.volumes || []), ...(w.spec.volumeClaimTemplates || []).map((t) => t.metadata)].map((x) => x.name));
      for (const m of mounts) if (!names.has(m.name)) p.push(`${role}: mount ${m.mountPath} names no volume (${m.name})`);
      const paths = mounts.map((m) => m.mountPath);
      if (new Set(paths).size !== paths.length) p.push(`${role}: a mount path twice: ${paths}`);
    }
    return p;
  });

  const psUnauthenticated = !authOn && !(tlsOn && mutual);
  check(`[${v.name}] PS data path: ${authOn ? "BROOK_PS_TOKEN from the token Secret in the PS, chief and trainer pods" : psUnauthenticated ? "no token, no mutual TLS: brook ps --allow-unauthenticated" : "mutual TLS, no token"}`, () => {
    const p = [];
    const psW = find(objs, "StatefulSet", n.ps);
    const args = psW.spec.template.spec.containers[0].args;
    if (args.includes("--allow-unauthenticated") !== psUnauthenticated) p.push(`--allow-unauthenticated ${psUnauthenticated ? "missing" : "given"}`);
    if (servingW && !followPs && envOf(servingW).some((e) => e.name === "BROOK_PS_TOKEN")) p.push(`${n.serving}: BROOK_PS_TOKEN without serving.followPs`);
    for (const w of [psW, chiefW, find(objs, "StatefulSet", n.trainer), ...(followPs ? [servingW] : [])]) {
      const ref = envOf(w).find((e) => e.name === "BROOK_PS_TOKEN");
      if (!authOn) {
        if (ref) p.push(`${w.metadata.name}: BROOK_PS_TOKEN while auth is off`);
        continue;
      }
      const k = ref?.valueFrom?.secretKeyRef;
      if (!k) p.push(`${w.metadata.name}: no BROOK_PS_TOKEN from a Secret`);
      else if (k.name !== authSecretName || k.key !== authSecretKey) p.push(`${w.metadata.name}: BROOK_PS_TOKEN from ${k.name}/${k.key}, want ${authSecretName}/${authSecretKey}`);
    }
    if (envOf(testPod).some((e) => e.name === "BROOK_PS_TOKEN")) p.push("the helm test pod (a chief client) has BROOK_PS_TOKEN");
    const st = find(objs, "Pod", n.servingTest);
    if (st && envOf(st).length) p.push(`the serving test pod has env ${envOf(st).map((e) => e.name)} (it needs none)`);
    return p;
  });

  check(`[${v.name}] helm test hook pod submits the image's smoke job to the chief Service and watches it`, () => {
    const hooks = objs.filter(isHelmTest);
    if (hooks.length !== (servingTestOn ? 2 : 1)) return [`${hooks.length} test hooks, want ${servingTestOn ? 2 : 1}: ${hooks.map((o) => o.metadata.name)}`];
    const t = hooks.filter((o) => o.metadata.name === n.chiefTest);
    if (t.length !== 1) return [`no test hook ${n.chiefTest}`];
    const c = t[0].spec.containers[0];
    const s = testPodScript(t[0]);
    const p = [];
    if (JSON.stringify(s.command) !== JSON.stringify(["/bin/sh", "-c"])) p.push(`command ${JSON.stringify(s.command)}, want ["/bin/sh", "-c"]`);
    if ((c.args || []).length !== 3) p.push(`args: ${(c.args || []).length} items, want [script, $0, chief address]`);
    if (s.chief !== `${n.chief}.${namespace}.svc:7000`) p.push(`$1 (the chief address) ${s.chief}`);
    const lines = s.script.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
    if (lines[0] !== "set -eu") p.push(`script starts with ${JSON.stringify(lines[0])}, want set -eu`);
    const submit = lines.filter((l) => /\bbrook submit\b/.test(l));
    if (submit.length !== 1 || !/^id=\$\(brook submit \/usr\/share\/brook\/smoke\/job\.yaml --chief "\$1" --timeout \d+\)$/.test(submit[0]))
      p.push(`want one id=$(brook submit ${SMOKE_DIR}/job.yaml --chief "$1" --timeout N), got ${JSON.stringify(submit)}`);
    const watch = lines.filter((l) => /\bbrook status\b/.test(l));
    if (watch.length !== 1 || !/^exec brook status "\$id" --chief "\$1"( --\S+( \d+)?)*$/.test(watch[0]) || !/ --watch\b/.test(watch[0]))
      p.push(`want one exec brook status "$id" --chief "$1" ... --watch, got ${JSON.stringify(watch)}`);
    if (lines.indexOf(submit[0]) > lines.indexOf(watch[0])) p.push("watches before it submits");
    if (/\{\{|<no value>|%!/.test(s.script)) p.push("template holes in the script");
    if (c.securityContext?.readOnlyRootFilesystem !== true || c.securityContext?.runAsNonRoot !== true) p.push("not the restricted, read-only-root securityContext");
    if (t[0].spec.restartPolicy !== "Never") p.push("restartPolicy");
    if (t[0].spec.containers[0].envFrom) p.push("test pod now has envFrom: update the TLS env checks");
    return p;
  });

  // ---- brook serve (serving.*)
  const servingObjs = objs.filter((o) => o.metadata?.labels?.["app.kubernetes.io/component"] === "serving" || o.metadata?.name === n.servingTest);
  if (!servingOn) {
    check(`[${v.name}] no serving objects (serving.enabled=false)`, () => servingObjs.map((o) => `${o.kind}/${o.metadata.name} rendered`).concat(byKind(objs, "HorizontalPodAutoscaler").map((o) => `HPA ${o.metadata.name}`)));
    continue;
  }
  const sv = {
    modelName: String(get("serving.modelName", "brook")),
    model: get("serving.model", "") || `${get("storage.shared.mountPath", "/brook/shared").replace(/\/$/, "")}/exports`,
    httpPort: Number(get("serving.httpPort", 8501)),
    grpcPort: Number(get("serving.grpcPort", 8500)),
    memoryLimit: String(get("serving.memoryLimit", "")),
    hpa: String(get("serving.hpa.enabled", false)) === "true",
    replicas: Number(get("serving.replicas", 1)),
    job: String(get("serving.job", "")),
    extraArgs: get("serving.extraArgs", []),
    wait: Number(get("serving.waitForModelSeconds", 86400)),
  };
  const memoryOn = sv.memoryLimit !== "" && sv.memoryLimit !== "0";
  const statusPath = `/v1/models/${sv.modelName}`;
  check(`[${v.name}] serving Deployment: brook serve --model ${sv.model} --wait-for-model on 0.0.0.0 (HTTP ${sv.httpPort}, gRPC ${sv.grpcPort}), ${sv.hpa ? "replicas left to the HPA" : `${sv.replicas} replicas`}, exports read-only${memoryOn ? ", --memory-limit on an emptyDir" : ""}${followPs ? ", --follow-ps every PS" : ""}`, () => {
    const d = servingW;
    if (!d) return ["no serving Deployment"];
    const p = [];
    if (sv.hpa ? d.spec.replicas !== undefined : d.spec.replicas !== sv.replicas) p.push(`replicas ${d.spec.replicas}`);
    if (d.spec.strategy?.type !== "RollingUpdate" || d.spec.strategy.rollingUpdate?.maxUnavailable !== 0) p.push("not a RollingUpdate with maxUnavailable 0 (a rollout would drop serving capacity)");
    const spec = d.spec.template.spec;
    if (spec.containers.length !== 1) p.push(`${spec.containers.length} containers`);
    const c = spec.containers[0];
    const a = c.args || [];
    if (a[0] !== "serve") p.push(`args[0] ${a[0]}, want serve`);
    if ((c.command || []).length) p.push(`command ${c.command}: want the image's brook entrypoint`);
    const want = {
      "--model": sv.model,
      "--model-name": sv.modelName,
      "--http": `0.0.0.0:${sv.httpPort}`,
      "--grpc": `0.0.0.0:${sv.grpcPort}`,
      "--metrics-listen": metricsOn ? "0.0.0.0:9100" : "",
    };
    for (const [flag, val] of Object.entries(want)) if (argValue(a, flag) !== val) p.push(`${flag} ${JSON.stringify(argValue(a, flag))}, want ${JSON.stringify(val)}`);
    if (!a.includes("--wait-for-model")) p.push("no --wait-for-model (a pod started before the first export would exit 2 and crash-loop)");
    const dataDir = argValue(a, "--data-dir");
    if (memoryOn) {
      if (argValue(a, "--memory-limit") !== sv.memoryLimit) p.push(`--memory-limit ${argValue(a, "--memory-limit")}`);
      const m = (c.volumeMounts || []).find((x) => x.mountPath === dataDir);
      const vol = m && (spec.volumes || []).find((x) => x.name === m.name);
      if (!dataDir || !vol?.emptyDir || m.readOnly) p.push(`--data-dir ${dataDir} is not a writable emptyDir`);
      const size = String(get("serving.dataDirSizeLimit", ""));
      if (vol?.emptyDir && (vol.emptyDir.sizeLimit || "") !== size) p.push(`data emptyDir sizeLimit ${vol.emptyDir.sizeLimit}, want ${size}`);
    } else if (a.includes("--memory-limit") || dataDir !== undefined) p.push("--memory-limit / --data-dir without serving.memoryLimit");
    const psAddrs = Array.from({ length: psReplicas }, (_, i) => `${n.ps}-${i}.${n.ps}.${namespace}.svc.cluster.local:7070`).join(",");
    if (followPs) {
      if (argValue(a, "--follow-ps") !== psAddrs) p.push(`--follow-ps ${argValue(a, "--follow-ps")}, want ${psAddrs}`);
      if (sv.job ? argValue(a, "--job") !== sv.job : a.includes("--job")) p.push(`--job ${argValue(a, "--job")}`);
      // The chief dials the same names; the certificate's wildcard covers them.
      const chiefPsArgs = chiefW.spec.template.spec.containers[0].args;
      if (argValue(chiefPsArgs, "--ps-statefulset") !== n.ps) p.push("the chief no longer finds the PS by StatefulSet: recheck --follow-ps");
    } else if (a.includes("--follow-ps") || a.includes("--job")) p.push("--follow-ps / --job without serving.followPs");
    if (sv.extraArgs.length && JSON.stringify(a.slice(-sv.extraArgs.length)) !== JSON.stringify(sv.extraArgs.map(String))) p.push("extraArgs not last");
    // The exports: the model path lies on a read-only mount.
    const mounts = (c.volumeMounts || []).filter((m) => !m.subPath);
    const on = mounts.filter((m) => sv.model === m.mountPath || sv.model.startsWith(`${m.mountPath.replace(/\/$/, "")}/`));
    if (!on.length) p.push(`--model ${sv.model} is on no volume (mounts: ${mounts.map((m) => m.mountPath)})`);
    else if (!on.every((m) => m.readOnly === true)) p.push(`--model ${sv.model} is on a writable mount`);
    const ports = Object.fromEntries((c.ports || []).map((x) => [x.name, x.containerPort]));
    if (ports.http !== sv.httpPort || ports.grpc !== sv.grpcPort) p.push(`containerPorts ${JSON.stringify(ports)}`);
    if (metricsOn ? ports.metrics !== 9100 : "metrics" in ports) p.push(`metrics containerPort ${ports.metrics}`);
    // Probes: startup and readiness ask for the model; liveness only connects.
    for (const probe of ["startupProbe", "readinessProbe"]) {
      const g = c[probe]?.httpGet;
      if (!g || g.path !== statusPath || g.port !== "http") p.push(`${probe} ${JSON.stringify(c[probe])}, want httpGet ${statusPath} on port http`);
    }
    const sp = c.startupProbe || {};
    const budget = (sp.periodSeconds || 10) * (sp.failureThreshold || 3);
    if (budget < sv.wait || budget > sv.wait + 10 * (sp.periodSeconds || 10)) p.push(`startup probe budget ${budget} s, want serving.waitForModelSeconds ${sv.wait}`);
    if (c.livenessProbe?.tcpSocket?.port !== "http") p.push(`livenessProbe ${JSON.stringify(c.livenessProbe)}, want tcpSocket on http`);
    if (c.livenessProbe?.httpGet) p.push("an HTTP liveness probe (it would queue behind predictions and restart a busy server)");
    const cm = find(objs, "ConfigMap", n.serving);
    if (!cm) p.push(`no ConfigMap ${n.serving}`);
    if (!(c.envFrom || []).some((e) => e.configMapRef?.name === n.serving)) p.push("the ConfigMap is not in envFrom");
    const envOverride = get("serving.env", {});
    const wantCm = {
      BROOK_SERVE_MAX_BATCH: get("serving.maxBatch", 64),
      BROOK_SERVE_BATCH_TIMEOUT_MICROS: get("serving.batchTimeoutMicros", 2000),
      BROOK_SERVE_WORKERS: get("serving.workers", 2),
      BROOK_SERVE_HTTP_THREADS: get("serving.httpThreads", 2),
      BROOK_SERVE_MAX_REQUEST_BYTES: get("serving.maxRequestBytes", "4MiB"),
      BROOK_SERVE_POLL_SECONDS: get("serving.pollSeconds", 10),
      BROOK_SERVE_MAX_QUEUED_EXAMPLES: get("serving.maxQueuedExamples", 65536),
      ...(String(get("serving.fillMissing", false)) === "true" ? { BROOK_SERVE_FILL_MISSING: "true" } : {}),
      ...(followPs ? { BROOK_SERVE_SYNC_SECONDS: get("serving.syncSeconds", 10) } : {}),
      ...envOverride,
    };
    for (const [k, val] of Object.entries(wantCm)) if (cm?.data?.[k] !== String(val)) p.push(`ConfigMap ${k}=${cm?.data?.[k]}, want ${val}`);
    for (const k of Object.keys(cm?.data || {})) if (k.startsWith("BROOK_SERVE_") && !(k in wantCm)) p.push(`ConfigMap has ${k}`);
    for (const k of Object.keys(cm?.data || {})) if (!/^BROOK_(SERVE|TLS)_/.test(k) && !(k in get("env", {}))) p.push(`ConfigMap has ${k}, not a serve setting`);
    const ann = d.spec.template.metadata.annotations || {};
    if (!/^[0-9a-f]{64}$/.test(ann["checksum/config"] || "")) p.push("checksum/config");
    if (ann["checksum/config"] === chiefW.spec.template.metadata.annotations["checksum/config"]) p.push("checksum/config is the training pods' (a serving setting would restart the PS)");
    return p;
  });

  check(`[${v.name}] serving Service (http ${sv.httpPort}, grpc ${sv.grpcPort}${metricsOn ? ", metrics" : ""}), ${sv.hpa ? "HPA on CPU" : "no HPA"}${get("networkPolicy.enabled", true) === false ? "" : ", NetworkPolicy"}`, () => {
    const p = [];
    const svc = find(objs, "Service", n.serving);
    if (!svc) return ["no serving Service"];
    const labels = servingW.spec.template.metadata.labels;
    if (!Object.entries(svc.spec.selector || {}).every(([k, val]) => labels[k] === val) || !svc.spec.selector?.["app.kubernetes.io/component"]) p.push("the Service's selector does not pick exactly the serving pods");
    const ports = Object.fromEntries((svc.spec.ports || []).map((x) => [x.name, x]));
    if (ports.http?.port !== sv.httpPort || ports.http?.targetPort !== "http") p.push(`http port ${JSON.stringify(ports.http)}`);
    if (ports.grpc?.port !== sv.grpcPort || ports.grpc?.targetPort !== "grpc" || ports.grpc?.appProtocol !== "grpc") p.push(`grpc port ${JSON.stringify(ports.grpc)}`);
    if (metricsOn ? ports.metrics?.port !== 9100 : !!ports.metrics) p.push(`metrics port ${JSON.stringify(ports.metrics)}`);
    if (svc.spec.clusterIP === "None") p.push("headless: clients need one address to load-balance over");
    const hpas = byKind(objs, "HorizontalPodAutoscaler");
    if (sv.hpa) {
      if (hpas.length !== 1) p.push(`${hpas.length} HPAs`);
      const h = hpas[0];
      if (h) {
        if (h.apiVersion !== "autoscaling/v2") p.push(`HPA ${h.apiVersion}`);
        const ref = h.spec.scaleTargetRef;
        if (ref.kind !== "Deployment" || ref.name !== n.serving || ref.apiVersion !== "apps/v1") p.push(`HPA scales ${JSON.stringify(ref)}`);
        if (h.spec.minReplicas !== Number(get("serving.hpa.minReplicas", 1)) || h.spec.maxReplicas !== Number(get("serving.hpa.maxReplicas", 4))) p.push(`HPA ${h.spec.minReplicas}-${h.spec.maxReplicas}`);
        const m = (h.spec.metrics || []).find((x) => x.type === "Resource" && x.resource?.name === "cpu");
        if (m?.resource.target.type !== "Utilization" || m.resource.target.averageUtilization !== Number(get("serving.hpa.targetCPUUtilizationPercentage", 70))) p.push(`HPA CPU target ${JSON.stringify(m)}`);
        if (!servingW.spec.template.spec.containers[0].resources?.requests?.cpu) p.push("HPA on CPU without a CPU request");
      }
    } else if (hpas.length) p.push("HPA rendered while serving.hpa.enabled=false");
    if (get("networkPolicy.enabled", true) !== false) {
      const np = byKind(objs, "NetworkPolicy").find((x) => Object.entries(x.spec.podSelector.matchLabels || {}).every(([k, val]) => labels[k] === val) && x.spec.podSelector.matchLabels["app.kubernetes.io/component"] === "serving");
      if (!np) p.push("no NetworkPolicy selects the serving pods");
      else {
        const rule = (np.spec.ingress || []).find((r) => (r.ports || []).some((x) => x.port === sv.httpPort));
        const rulePorts = (rule?.ports || []).map((x) => x.port).sort();
        if (JSON.stringify(rulePorts) !== JSON.stringify([sv.httpPort, sv.grpcPort].sort())) p.push(`client rule ports ${rulePorts}`);
        const release_ = { "app.kubernetes.io/name": CHART_NAME, "app.kubernetes.io/instance": release };
        if (!rule?.from?.some((f) => f.podSelector && Object.entries(release_).every(([k, val]) => f.podSelector.matchLabels?.[k] === val))) p.push("the release's pods (the helm test pod) may not call it");
        const extra = get("networkPolicy.servingClientsFrom", [{ podSelector: {} }]);
        for (const peer of extra) if (!rule?.from?.some((f) => canon(f) === canon(peer))) p.push(`servingClientsFrom peer ${JSON.stringify(peer)} missing`);
        if ((rule?.from || []).some((f) => !f.podSelector && !f.namespaceSelector && !f.ipBlock)) p.push("a peer that allows everything");
        if (metricsOn && !(np.spec.ingress || []).some((r) => (r.ports || []).some((x) => x.port === 9100) && r.from?.some((f) => f.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "prometheus"))) p.push("metrics not open to Prometheus");
      }
    }
    return p;
  });

  check(`[${v.name}] serving helm test pod ${servingTestOn ? "reads the model's metadata and predicts through the serving Service" : "absent (serving.test.enabled=false)"}`, () => {
    const pod = find(objs, "Pod", n.servingTest);
    if (!servingTestOn) return pod ? ["rendered while serving.test.enabled=false"] : [];
    if (!pod) return [`no Pod ${n.servingTest}`];
    const p = [];
    if (!isHelmTest(pod)) p.push("not a helm test hook");
    const s = servingTestScript(pod);
    if (JSON.stringify(s.command) !== JSON.stringify(["/bin/bash", "-c"])) p.push(`command ${JSON.stringify(s.command)}, want ["/bin/bash", "-c"] (the image has no curl: bash's /dev/tcp)`);
    if ((pod.spec.containers[0].args || []).length !== 6) p.push("args: want [script, $0, host, port, model, wait seconds]");
    if (s.host !== `${n.serving}.${namespace}.svc`) p.push(`host ${s.host}`);
    if (s.port !== String(sv.httpPort)) p.push(`port ${s.port}, want ${sv.httpPort}`);
    if (s.model !== sv.modelName) p.push(`model ${s.model}`);
    if (!/^\d+$/.test(s.wait || "")) p.push(`wait ${s.wait}`);
    for (const want of ['/dev/tcp/$host/$port', 'GET "/v1/models/$model"', 'GET "/v1/models/$model/metadata"', 'POST "/v1/models/$model:predict"', '"predictions":[']) if (!s.script.includes(want)) p.push(`script lacks ${want}`);
    if (s.script.split("\n").map((l) => l.trim()).filter(Boolean)[0] !== "set -eu") p.push("script does not start with set -eu");
    if (/\{\{|<no value>|%!/.test(s.script)) p.push("template holes in the script");
    if ((pod.spec.volumes || []).some((x) => x.name === "tls")) p.push("mounts the TLS Secret (plain HTTP)");
    if (pod.spec.restartPolicy !== "Never") p.push("restartPolicy");
    const c = pod.spec.containers[0];
    if (c.securityContext?.readOnlyRootFilesystem !== true || c.securityContext?.runAsNonRoot !== true) p.push("not the restricted, read-only-root securityContext");
    return p;
  });
}

// ---------------------------------------------------------------- 2b. generated material
// Every variant that renders a generated certificate: it must be a real one
// the binary's peers accept (openssl does the checking).
function checkGeneratedCert({ v, release, namespace, objs }) {
  const n = names(release);
  const s = find(objs, "Secret", `${n.full}-tls`);
  if (!s || s.metadata.annotations?.["brook.io/generated"] !== "true") return;
  const get = (key, dflt) => (key in v.set ? v.set[key] : dflt);
  const days = Number(get("tls.generatedDays", 365));
  const psReplicas = Number(get("ps.replicas", 2));
  check(`[${v.name}] generated certificate (openssl): chains to the CA, SANs cover the chief and the ${psReplicas} PS pods in ${namespace}, serverAuth + clientAuth, key matches, valid ${days} days`, () => {
    if (!HAVE_OPENSSL) return ["no openssl"];
    const dir = mkdtempSync(path.join(work, "gen-"));
    for (const k of ["tls.crt", "tls.key", "ca.crt"]) writeFileSync(path.join(dir, k), Buffer.from(s.data[k], "base64"));
    const o = (args) => openssl(args, { cwd: dir });
    const p = [];
    let r = o(["verify", "-CAfile", "ca.crt", "-purpose", "sslserver", "tls.crt"]);
    if (r.status !== 0 || !/tls\.crt: OK/.test(r.stdout)) p.push(`openssl verify (sslserver): ${(r.stdout + r.stderr).trim()}`);
    r = o(["verify", "-CAfile", "ca.crt", "-purpose", "sslclient", "tls.crt"]);
    if (r.status !== 0 || !/tls\.crt: OK/.test(r.stdout)) p.push(`openssl verify (sslclient): ${(r.stdout + r.stderr).trim()}`);
    r = o(["x509", "-in", "ca.crt", "-noout", "-ext", "basicConstraints"]);
    if (!/CA:TRUE/.test(r.stdout)) p.push(`ca.crt is not a CA: ${r.stdout.trim()}`);
    r = o(["x509", "-in", "tls.crt", "-noout", "-ext", "subjectAltName,extendedKeyUsage,basicConstraints"]);
    if (r.status !== 0) p.push(`openssl x509 -ext: ${r.stderr.trim()}`);
    const text = r.stdout;
    if (!/TLS Web Server Authentication/.test(text)) p.push("no serverAuth extended key usage");
    if (!/TLS Web Client Authentication/.test(text)) p.push("no clientAuth extended key usage");
    if (/CA:TRUE/.test(text)) p.push("the leaf certificate is a CA");
    const dns = [...text.matchAll(/DNS:([^,\s]+)/g)].map((m) => m[1]);
    const ips = [...text.matchAll(/IP Address:([^,\s]+)/g)].map((m) => m[1]);
    // The names Brook clients dial: brook.chief.address (trainers, the test
    // pod, NOTES), the chief's --ps-statefulset discovery (every PS pod), and
    // a port-forward (localhost / 127.0.0.1).
    const wanted = [
      `${n.chief}.${namespace}.svc`,
      `${n.chief}.${namespace}.svc.cluster.local`,
      n.chief,
      ...Array.from({ length: psReplicas }, (_, i) => `${n.ps}-${i}.${n.ps}.${namespace}.svc.cluster.local`),
      "localhost",
    ];
    for (const host of wanted) if (!dns.some((san) => sanMatches(san, host))) p.push(`no SAN covers ${host} (SANs: ${dns.join(" ")})`);
    if (!dns.some((san) => san === `*.${n.ps}.${namespace}.svc.cluster.local`)) p.push(`no wildcard *.${n.ps}.${namespace}.svc.cluster.local`);
    if (dns.some((san) => sanMatches(san, `${n.ps}-0.${n.ps}.other-ns.svc.cluster.local`))) p.push("a SAN covers another namespace");
    if (!ips.includes("127.0.0.1")) p.push(`no IP SAN 127.0.0.1 (${ips})`);
    const pub1 = o(["x509", "-in", "tls.crt", "-noout", "-pubkey"]).stdout;
    const pub2 = o(["pkey", "-in", "tls.key", "-pubout"]).stdout;
    if (!pub1 || pub1 !== pub2) p.push("tls.key does not match tls.crt");
    for (const f of ["tls.crt", "ca.crt"]) {
      if (o(["x509", "-in", f, "-noout", "-checkend", String((days - 1) * 86400)]).status !== 0) p.push(`${f} expires before ${days - 1} days`);
      if (o(["x509", "-in", f, "-noout", "-checkend", String((days + 1) * 86400)]).status === 0) p.push(`${f} valid past ${days + 1} days`);
    }
    return p;
  });
}
for (const r of rendered) checkGeneratedCert(r);

{
  const def = rendered.find((x) => x.v.name === "default");
  check("default render generates a certificate and a token (>= 16 printable characters)", () => {
    if (!def) return ["no default render"];
    const n = names(RELEASE);
    const p = [];
    if (find(def.objs, "Secret", `${n.full}-tls`)?.metadata.annotations?.["brook.io/generated"] !== "true") p.push("no generated TLS Secret");
    const token = unb64(find(def.objs, "Secret", `${n.full}-auth`)?.data?.token);
    if (!/^[!-~]{16,}$/.test(token)) p.push(`token ${JSON.stringify(token)}`);
    return p;
  });
  // Offline renders cannot `lookup` the live Secrets, so the generated
  // material is new each time; nothing else may change with it (the pods'
  // checksum/secrets hashes the values, not the material: a hash of the
  // material would roll every pod on every GitOps sync).
  check("two offline renders of the defaults differ only in the generated Secrets' data", () => {
    const a = render(RELEASE, "default", []);
    const b = render(RELEASE, "default", []);
    const p = [];
    if (a.length !== b.length) return [`${a.length} vs ${b.length} objects`];
    for (let i = 0; i < a.length; i++) {
      const strip = (o) => (o.kind === "Secret" ? { ...o, data: undefined } : o);
      if (JSON.stringify(strip(a[i])) !== JSON.stringify(strip(b[i]))) p.push(`${a[i].kind}/${a[i].metadata.name} differs`);
    }
    const sa = find(a, "Secret", `${names(RELEASE).full}-tls`);
    const sb = find(b, "Secret", `${names(RELEASE).full}-tls`);
    if (sa?.data?.["ca.crt"] === sb?.data?.["ca.crt"]) p.push("the CA did not change between offline renders (is it hardcoded?)");
    return p;
  });
  check("checksum/secrets changes with the values that make the Secrets (auth.token, tls.mutual, tls.existingSecret)", () => {
    const sum = (objs) => find(objs, "Deployment", `${names(RELEASE).full}-chief`)?.spec.template.metadata.annotations?.["checksum/secrets"];
    const base = sum(render(RELEASE, "default", []));
    const p = [];
    for (const extra of [["--set", "auth.token=another-token-0123456789"], ["--set", "tls.mutual=false"], ["--set", "tls.existingSecret=x"]]) {
      if (sum(render(RELEASE, "default", extra)) === base) p.push(`${extra[1]} leaves it unchanged`);
    }
    return p;
  });
  // The serving pods have their own ConfigMap and checksum: turning serving
  // on, or changing a serving setting, must not roll the chief, the PS or
  // the trainers (a PS restart pauses training).
  check("serving on, off or retuned (serving.*) leaves the chief, PS and trainer objects unchanged", () => {
    const shared = ["--set", "storage.shared.enabled=true", "--set", "storage.shared.size=1Gi", "--set", "auth.token=fixed-token-0123456789", "--set-file", `tls.cert=${USER_CERT.cert}`, "--set-file", `tls.key=${USER_CERT.key}`, "--set-file", `tls.ca=${USER_CERT.ca}`];
    const training = (objs) => objs.filter((o) => ["chief", "ps", "trainer"].includes(o.metadata?.labels?.["app.kubernetes.io/component"]) && o.metadata.name !== `${names(RELEASE).full}-auth`);
    const base = training(render(RELEASE, "default", shared));
    const p = [];
    for (const extra of [
      ["--set", "serving.enabled=true"],
      ["--set", "serving.enabled=true", "--set", "serving.maxBatch=8", "--set", "serving.env.BROOK_SERVE_WORKERS=9", "--set", "serving.followPs=true", "--set", "serving.memoryLimit=1GiB"],
    ]) {
      const other = training(render(RELEASE, "default", [...shared, ...extra]));
      if (other.length !== base.length) p.push(`${extra.join(" ")}: ${other.length} training objects, was ${base.length}`);
      for (const o of other) {
        const b = base.find((x) => x.kind === o.kind && x.metadata.name === o.metadata.name);
        if (!b || canon(b) !== canon(o)) p.push(`${extra.filter((x) => x !== "--set").join(" ")}: ${o.kind}/${o.metadata.name} changes`);
      }
    }
    return p;
  });
}

// ---------------------------------------------------------------- 2c. upgrade keeps generated material
// `helm template --dry-run=server` against a stub Kubernetes API (discovery
// and GET secrets only) that holds the Secrets of an earlier render: what
// `helm upgrade` sees. The chart must render the live generated material
// again, and generate afresh when the live Secrets were not generated by it.
async function withStubApi(liveSecrets, fn) {
  const r = (name, kind) => ({ name, singularName: kind.toLowerCase(), namespaced: true, kind, verbs: ["get", "list"] });
  const groups = {
    v1: [r("secrets", "Secret"), r("configmaps", "ConfigMap"), r("services", "Service"), r("persistentvolumeclaims", "PersistentVolumeClaim"), r("serviceaccounts", "ServiceAccount"), r("pods", "Pod")],
    "apps/v1": [r("deployments", "Deployment"), r("statefulsets", "StatefulSet")],
    "policy/v1": [r("poddisruptionbudgets", "PodDisruptionBudget")],
    "networking.k8s.io/v1": [r("networkpolicies", "NetworkPolicy")],
  };
  const looked = [];
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, "http://stub");
    const send = (code, obj) => {
      res.writeHead(code, { "content-type": "application/json" });
      res.end(JSON.stringify(obj));
    };
    if (u.pathname === "/version") return send(200, { major: "1", minor: "34", gitVersion: "v1.34.0" });
    if (u.pathname === "/api") return send(200, { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [] });
    if (u.pathname === "/apis") {
      const list = Object.keys(groups).filter((gv) => gv.includes("/")).map((gv) => {
        const [name, version] = gv.split("/");
        return { name, versions: [{ groupVersion: gv, version }], preferredVersion: { groupVersion: gv, version } };
      });
      return send(200, { kind: "APIGroupList", apiVersion: "v1", groups: list });
    }
    const gv = u.pathname.match(/^\/(?:api\/(v1)|apis\/([^/]+\/[^/]+))$/);
    if (gv && groups[gv[1] || gv[2]]) return send(200, { kind: "APIResourceList", apiVersion: "v1", groupVersion: gv[1] || gv[2], resources: groups[gv[1] || gv[2]] });
    const sec = u.pathname.match(/^\/api\/v1\/namespaces\/([^/]+)\/secrets\/([^/]+)$/);
    if (sec) looked.push(`${sec[1]}/${sec[2]}`);
    const live = sec && liveSecrets.find((x) => x.metadata.name === sec[2] && x.metadata.namespace === sec[1]);
    if (live) return send(200, live);
    send(404, { kind: "Status", apiVersion: "v1", status: "Failure", reason: "NotFound", code: 404, message: "not found" });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    return await fn(`http://127.0.0.1:${server.address().port}`, looked);
  } finally {
    server.close();
  }
}
function helmAsync(args) {
  return new Promise((resolve) => {
    const child = spawn(HELM, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, KUBECONFIG: path.join(work, "no-kubeconfig") } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const t = setTimeout(() => child.kill("SIGKILL"), 60000);
    child.on("exit", (status) => {
      clearTimeout(t);
      resolve({ status, stdout, stderr });
    });
  });
}
{
  const n = names(RELEASE);
  const first = rendered.find((x) => x.v.name === "default")?.objs || [];
  // As `helm install` left them: owned by the release.
  const owned = { "meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": "default" };
  const liveGenerated = byKind(first, "Secret").map((x) => ({ ...x, metadata: { ...x.metadata, annotations: { ...x.metadata.annotations, ...owned } } }));
  const renderAgainst = async (live) =>
    withStubApi(live, async (api, looked) => {
      const r = await helmAsync(["template", RELEASE, CHART, "--namespace", "default", "--dry-run=server", "--disable-openapi-validation", "--kube-apiserver", api]);
      if (r.status !== 0) throw new Error(`helm template --dry-run=server: ${r.stderr.trim().slice(-400)}`);
      return { objs: YAML.parseAllDocuments(r.stdout).map((d) => d.toJS()).filter((o) => o && typeof o === "object"), looked };
    });
  let again = null;
  let err = null;
  try {
    again = await renderAgainst(liveGenerated);
  } catch (e) {
    err = e;
  }
  check("upgrade (lookup finds the generated Secrets): the same CA, certificate, key and token are rendered again", () => {
    if (err) return [err.message];
    const p = [];
    for (const want of [`default/${n.full}-tls`, `default/${n.full}-auth`]) if (!again.looked.includes(want)) p.push(`the chart did not look up ${want}`);
    for (const live of liveGenerated) {
      const s = find(again.objs, "Secret", live.metadata.name);
      if (!s) p.push(`${live.metadata.name} not rendered`);
      else if (JSON.stringify(s.data) !== JSON.stringify(live.data)) p.push(`${live.metadata.name}: new data instead of the live Secret's`);
    }
    const sum = (objs) => find(objs, "Deployment", n.chief)?.spec.template.metadata.annotations?.["checksum/secrets"];
    if (sum(again.objs) !== sum(first)) p.push("checksum/secrets changed on upgrade");
    return p;
  });
  // Secrets of the same name the chart did not generate (e.g. the release
  // used tls.cert before): not reused for generated material.
  const foreign = liveGenerated.map((x) => ({ ...x, metadata: { ...x.metadata, annotations: owned } }));
  let fresh = null;
  err = null;
  try {
    fresh = await renderAgainst(foreign);
  } catch (e) {
    err = e;
  }
  check("upgrade (lookup finds Secrets not marked brook.io/generated): fresh material is generated", () => {
    if (err) return [err.message];
    const p = [];
    for (const live of foreign) {
      const s = find(fresh.objs, "Secret", live.metadata.name);
      if (!s) p.push(`${live.metadata.name} not rendered`);
      else if (Object.keys(live.data).some((k) => s.data[k] === live.data[k])) p.push(`${live.metadata.name}: reused a Secret the chart did not generate`);
    }
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
  { set: ["--set", "ps.helpers=-2"], want: /ps\/helpers/ },
  { set: ["--set", "ps.persistence.size=lots"], want: /ps\/persistence\/size/ },
  { set: ["--set", "ps.memoryLimit=lots"], want: /ps\/memoryLimit/ },
  { set: ["--set", "image.pullPolicy=Sometimes"], want: /image\/pullPolicy/ },
  { label: "tls.cert without tls.key", set: ["--set-file", `tls.cert=${USER_CERT.cert}`, "--set-file", `tls.ca=${USER_CERT.ca}`], want: /tls\.cert and tls\.key go together/ },
  { label: "tls.key without tls.cert", set: ["--set-file", `tls.key=${USER_CERT.key}`], want: /tls\.cert and tls\.key go together/ },
  { label: "mutual tls.cert/tls.key without tls.ca", set: ["--set-file", `tls.cert=${USER_CERT.cert}`, "--set-file", `tls.key=${USER_CERT.key}`], want: /tls\.mutual.*tls\.ca/ },
  { label: "tls.cert/tls.key without tls.ca (not mutual)", set: ["--set-file", `tls.cert=${USER_CERT.cert}`, "--set-file", `tls.key=${USER_CERT.key}`, "--set", "tls.mutual=false"], want: /need tls\.ca/ },
  { label: "tls.ca alone", set: ["--set-file", `tls.ca=${USER_CERT.ca}`], want: /tls\.ca is used only with tls\.cert/ },
  { label: "tls.existingSecret with tls.cert", set: ["--set", "tls.existingSecret=x", "--set-file", `tls.cert=${USER_CERT.cert}`, "--set-file", `tls.key=${USER_CERT.key}`], want: /tls\.existingSecret.*exclusive/ },
  { set: ["--set", "tls.cert=not-a-pem", "--set", "tls.key=not-a-pem", "--set", "tls.ca=x"], want: /tls\/cert/ },
  { set: ["--set", "auth.token=short"], want: /auth\/token/ },
  { set: ["--set", "auth.token=has a space in it 0123456789"], want: /auth\/token/ },
  { set: ["--set", "tls.generatedDays=0"], want: /tls\/generatedDays/ },
  { label: "tls.enabled=false with auth.enabled (token in plaintext)", set: ["--set", "tls.enabled=false"], want: /auth\.enabled=true needs tls\.enabled=true/ },
  { set: ["--set", "metrics.serviceMonitor.enabled=true"], want: /monitoring\.coreos\.com\/v1/ },
  { set: ["--set", "metrics.podMonitor.enabled=true"], want: /monitoring\.coreos\.com\/v1 PodMonitor/ },
  { label: "podMonitor with serviceMonitor", set: ["--set", "metrics.podMonitor.enabled=true", "--set", "metrics.serviceMonitor.enabled=true", "--api-versions", "monitoring.coreos.com/v1/PodMonitor", "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"], want: /pick one/ },
  { label: "podMonitor without metrics", set: ["--set", "metrics.podMonitor.enabled=true", "--set", "metrics.enabled=false", "--api-versions", "monitoring.coreos.com/v1/PodMonitor"], want: /needs metrics\.enabled/ },
  { set: ["--set", "metrics.port=7000"], want: /metrics\.port/ },
  // storage and extra volumes
  { set: ["--set", "storage.data.enabled=true"], want: /storage\.data\.enabled needs storage\.data\.existingClaim .* or storage\.data\.hostPath/ },
  { label: "storage.data existingClaim and hostPath", set: ["--set", "storage.data.enabled=true", "--set", "storage.data.existingClaim=d", "--set", "storage.data.hostPath=/srv/d"], want: /storage\.data\.existingClaim and storage\.data\.hostPath are exclusive/ },
  { set: ["--set", "storage.data.hostPath=srv/data"], want: /storage\/data\/hostPath/ },
  { set: ["--set", "storage.data.mountPath=data"], want: /storage\/data\/mountPath/ },
  { set: ["--set", "storage.shared.enabled=true"], want: /storage\.shared\.enabled needs storage\.shared\.existingClaim .*storage\.shared\.size .*storage\.shared\.hostPath/ },
  { label: "storage.shared existingClaim and size", set: ["--set", "storage.shared.enabled=true", "--set", "storage.shared.existingClaim=x", "--set", "storage.shared.size=10Gi"], want: /storage\.shared\.existingClaim and storage\.shared\.size are exclusive/ },
  { set: ["--set", "storage.shared.size=lots"], want: /storage\/shared\/size/ },
  { set: ["--set", "storage.shared.hostPath=/"], want: /storage\/shared\/hostPath/ },
  { label: "storage.shared made ReadWriteOnce", set: ["--set", "storage.shared.enabled=true", "--set", "storage.shared.size=10Gi", "--set", "storage.shared.accessModes={ReadWriteOnce}"], want: /storage\.shared\.accessModes .*ReadWriteMany/ },
  { label: "storage.shared.mountPath inside storage.data.mountPath", set: ["--set", "storage.data.enabled=true", "--set", "storage.data.hostPath=/srv/d", "--set", "storage.shared.enabled=true", "--set", "storage.shared.hostPath=/srv/s", "--set", "storage.shared.mountPath=/brook/data/out"], want: /storage\.data\.mountPath \/brook\/data and storage\.shared\.mountPath \/brook\/data\/out overlap/ },
  { label: "storage.shared.mountPath over the PS data dir", set: ["--set", "storage.shared.enabled=true", "--set", "storage.shared.existingClaim=x", "--set", "storage.shared.mountPath=/var/lib/brook"], want: /storage\.shared\.mountPath \/var\/lib\/brook: .*overlap/ },
  { label: "an extraVolumeMount naming no volume", values: { trainer: { extraVolumeMounts: [{ name: "nope", mountPath: "/x" }] } }, want: /trainer\.extraVolumeMounts\[0\] \(mountPath \/x\): no volume named "nope" in the trainer pods/ },
  { label: "a PS mount of the data volume (only chief and trainers have it)", values: { storage: { data: { enabled: true, existingClaim: "d" } }, ps: { extraVolumeMounts: [{ name: "brook-data", mountPath: "/x" }] } }, want: /ps\.extraVolumeMounts\[0\] .*no volume named "brook-data" in the ps pods/ },
  { label: "an extraVolume named like the chart's", values: { chief: { extraVolumes: [{ name: "state", emptyDir: {} }] } }, want: /chief\.extraVolumes\[0\]: the chief pods have a volume named "state" already/ },
  { label: "an extraVolume without a name", values: { ps: { extraVolumes: [{ emptyDir: {} }] } }, want: /ps\/extraVolumes\/0.*name/ },
  { label: "an extraVolumeMount over the TLS mount's parent (/etc)", values: { ps: { extraVolumes: [{ name: "x", emptyDir: {} }], extraVolumeMounts: [{ name: "x", mountPath: "/etc" }] } }, want: /ps\.extraVolumeMounts\[0\]: mountPath \/etc overlaps \/etc\/brook\/tls, mounted already in the ps container/ },
  { label: "an extraVolumeMount inside the read-only data mount", values: { storage: { data: { enabled: true, existingClaim: "d" } }, trainer: { extraVolumes: [{ name: "x", emptyDir: {} }], extraVolumeMounts: [{ name: "x", mountPath: "/brook/data/sub" }] } }, want: /trainer\.extraVolumeMounts\[0\]: mountPath \/brook\/data\/sub overlaps \/brook\/data/ },
  { label: "two extraVolumeMounts, one inside the other", values: { chief: { extraVolumes: [{ name: "x", emptyDir: {} }, { name: "y", emptyDir: {} }], extraVolumeMounts: [{ name: "x", mountPath: "/x" }, { name: "y", mountPath: "/x/y" }] } }, want: /chief\.extraVolumeMounts\[1\]: mountPath \/x\/y overlaps \/x,/ },
  { label: "a hostPath with a .. segment", values: { storage: { data: { enabled: true, hostPath: "/d/../etc" } } }, want: /storage\.data\.hostPath \/d\/\.\.\/etc: a "\.\." segment/ },
  { label: "an extraVolumeMount over /tmp", values: { trainer: { extraVolumes: [{ name: "x", emptyDir: {} }], extraVolumeMounts: [{ name: "x", mountPath: "/tmp" }] } }, want: /trainer\.extraVolumeMounts\[0\]: mountPath \/tmp is mounted already/ },
  { label: "a relative extraVolumeMount path", values: { ps: { extraVolumes: [{ name: "x", emptyDir: {} }], extraVolumeMounts: [{ name: "x", mountPath: "x" }] } }, want: /ps\/extraVolumeMounts\/0\/mountPath/ },
  // serving
  { label: "serving without the exports (no storage.shared, no volume of its own)", set: ["--set", "serving.enabled=true"], want: /serving\.enabled needs the exports it serves: storage\.shared\.enabled/ },
  { label: "serving.model off every volume", set: ["--set", "serving.enabled=true", "--set", "storage.shared.enabled=true", "--set", "storage.shared.size=1Gi", "--set", "serving.model=/srv/models"], want: /serving\.model \/srv\/models is on no volume of the serving pods \(mounted: \/brook\/shared\)/ },
  { label: "serving.model beside a mount, not under it", values: { serving: { enabled: true, model: "/modelsx/a", extraVolumes: [{ name: "m", emptyDir: {} }], extraVolumeMounts: [{ name: "m", mountPath: "/models" }] } }, want: /serving\.model \/modelsx\/a is on no volume/ },
  { set: ["--set", "serving.model=models/brook"], want: /serving\/model/ },
  { set: ["--set", "serving.modelName=a/b"], want: /serving\/modelName/ },
  { set: ["--set", "serving.httpPort=0"], want: /serving\/httpPort/ },
  { set: ["--set", "serving.maxBatch=0"], want: /serving\/maxBatch/ },
  { set: ["--set", "serving.maxRequestBytes=lots"], want: /serving\/maxRequestBytes/ },
  { set: ["--set", "serving.memoryLimit=lots"], want: /serving\/memoryLimit/ },
  { set: ["--set", "serving.waitForModelSeconds=0"], want: /serving\/waitForModelSeconds/ },
  { set: ["--set", "serving.hpa.targetCPUUtilizationPercentage=0"], want: /serving\/hpa\/targetCPUUtilizationPercentage/ },
  { set: ["--set", "serving.replica=2"], want: /serving.*replica/ },
  { label: "serving.httpPort = serving.grpcPort", set: ["--set", "serving.enabled=true", "--set", "storage.shared.enabled=true", "--set", "storage.shared.size=1Gi", "--set", "serving.grpcPort=8501"], want: /serving\.httpPort and serving\.grpcPort are both 8501/ },
  { label: "serving.httpPort = metrics.port", set: ["--set", "serving.enabled=true", "--set", "storage.shared.enabled=true", "--set", "storage.shared.size=1Gi", "--set", "serving.httpPort=9100"], want: /serving\.httpPort and metrics\.port are both 9100/ },
  { label: "serving.hpa min above max", set: ["--set", "serving.enabled=true", "--set", "storage.shared.enabled=true", "--set", "storage.shared.size=1Gi", "--set", "serving.hpa.enabled=true", "--set", "serving.hpa.minReplicas=5", "--set", "serving.hpa.maxReplicas=2"], want: /serving\.hpa\.minReplicas 5 is above serving\.hpa\.maxReplicas 2/ },
  { label: "serving.hpa without a CPU request", values: { storage: { shared: { enabled: true, size: "1Gi" } }, serving: { enabled: true, hpa: { enabled: true }, resources: { requests: { cpu: null, memory: "1Gi" } } } }, want: /serving\.hpa\.enabled needs serving\.resources\.requests\.cpu/ },
  { label: "a serving extraVolumeMount naming no volume", values: { serving: { enabled: true, model: "/m", extraVolumeMounts: [{ name: "nope", mountPath: "/m" }] } }, want: /serving\.extraVolumeMounts\[0\] \(mountPath \/m\): no volume named "nope" in the serving pods/ },
  { label: "a serving extraVolumeMount over the shared mount", values: { storage: { shared: { enabled: true, size: "1Gi" } }, serving: { enabled: true, extraVolumes: [{ name: "x", emptyDir: {} }], extraVolumeMounts: [{ name: "x", mountPath: "/brook/shared/exports" }] } }, want: /serving\.extraVolumeMounts\[0\]: mountPath \/brook\/shared\/exports overlaps \/brook\/shared/ },
];
for (const b of bad) {
  const r = helm(["template", RELEASE, CHART, ...(b.set || []), ...(b.values ? ["-f", valuesFile(b.values)] : [])]);
  const msg = (r.stderr || "").trim().replace(/\s+/g, " ");
  const label = b.label || b.set[1];
  if (r.status === 0) fail(`bad values ${label} rendered without error`);
  else if (!b.want.test(msg)) fail(`bad values ${label}: error does not name the field: ${msg}`);
  else ok(`bad values ${label} rejected: ${msg.replace(/^.*?(- at |execution error at )/, "$1").slice(0, 140)}`);
}

// ---------------------------------------------------------------- 4. NOTES.txt
// (helm 4's install takes no --api-versions, so no ServiceMonitor variant here.)
const notesVariants = [
  { name: "defaults: generated mutual TLS and token", extra: [], tls: "rel-brook-tls", token: "rel-brook-auth", key: "token", mutual: true, serverName: false },
  { name: "TLS, not mutual, no token: unauthenticated PS", extra: ["--set", "auth.enabled=false", "--set", "tls.mutual=false"], tls: "rel-brook-tls", token: null, mutual: false, serverName: false, psWarning: true },
  { name: "storage on", extra: ["--set", "storage.data.enabled=true", "--set", "storage.data.existingClaim=d", "--set", "storage.data.mountPath=/data", "--set", "storage.shared.enabled=true", "--set", "storage.shared.size=1Gi"], tls: "rel-brook-tls", token: "rel-brook-auth", key: "token", mutual: true, serverName: false, storage: true },
  { name: "GPU, existing Secrets, not mutual", extra: ["--set", "trainer.gpus=1", "--set", "tls.existingSecret=my-tls", "--set", "tls.mutual=false", "--set", "auth.existingSecret=my-auth", "--set", "auth.existingSecretKey=api.token"], tls: "my-tls", token: "my-auth", key: "api\\.token", mutual: false, serverName: true },
  { name: "TLS and token off", extra: ["--set", "tls.enabled=false", "--set", "auth.enabled=false"], tls: null, token: null, psWarning: true },
  { name: "serving on the shared volume", extra: ["--set", "storage.data.enabled=true", "--set", "storage.data.existingClaim=d", "--set", "storage.data.mountPath=/data", "--set", "storage.shared.enabled=true", "--set", "storage.shared.size=1Gi", "--set", "serving.enabled=true"], tls: "rel-brook-tls", token: "rel-brook-auth", key: "token", mutual: true, serverName: false, storage: true, serving: { model: "/brook/shared/exports", name: "brook", port: 8501, defaultDir: true } },
  { name: "serving one job's export, HPA, port 8080, no network policy", extra: ["--set", "storage.data.enabled=true", "--set", "storage.data.existingClaim=d", "--set", "storage.data.mountPath=/data", "--set", "storage.shared.enabled=true", "--set", "storage.shared.size=1Gi", "--set", "serving.enabled=true", "--set", "serving.model=/brook/shared/exports/j1", "--set", "serving.modelName=ctr", "--set", "serving.httpPort=8080", "--set", "serving.hpa.enabled=true", "--set", "networkPolicy.enabled=false", "--set", "serving.test.enabled=false"], tls: "rel-brook-tls", token: "rel-brook-auth", key: "token", mutual: true, serverName: false, storage: true, serving: { model: "/brook/shared/exports/j1", name: "ctr", port: 8080, defaultDir: false, noTest: true } },
];
for (const nv of notesVariants) {
  const r = helm(["install", RELEASE, CHART, "--dry-run=client", "--namespace", "ml", ...nv.extra]);
  const out = r.stdout || "";
  const notes = out.slice(out.indexOf("NOTES:"));
  const p = [];
  if (r.status !== 0) p.push(`exit ${r.status}: ${r.stderr.trim()}`);
  if (!out.includes("NOTES:")) p.push("no NOTES");
  if (!/brook submit job\.yaml --chief 127\.0\.0\.1:7000/.test(notes)) p.push("no submit line");
  if (!/kubectl --namespace ml port-forward svc\/rel-brook-chief 7000:7000/.test(notes)) p.push("no port-forward line");
  if (!notes.includes("helm test rel")) p.push("no helm test line");
  if (/<no value>|%!/.test(notes)) p.push("template holes in NOTES");
  const secretLine = (name, key) => `kubectl --namespace ml get secret ${name} -o jsonpath='{.data.${key}}' | base64 -d`;
  if (nv.token) {
    if (!notes.includes(`export BROOK_TOKEN="$(${secretLine(nv.token, nv.key)})"`)) p.push("no BROOK_TOKEN line reading the token Secret");
  } else if (/BROOK_TOKEN/.test(notes) || (!nv.tls && /get secret/.test(notes))) p.push("token or Secret lines while auth is off");
  if (nv.tls) {
    if (!notes.includes(`${secretLine(nv.tls, "ca\\.crt")} > `) || !/export BROOK_TLS_CA=/.test(notes)) p.push("no CA extraction / BROOK_TLS_CA");
    const clientCert = notes.includes(`${secretLine(nv.tls, "tls\\.crt")} > `) && notes.includes(`${secretLine(nv.tls, "tls\\.key")} > `) && /BROOK_TLS_MUTUAL=true/.test(notes);
    if (clientCert !== nv.mutual) p.push(`client certificate lines ${clientCert ? "present" : "absent"} with mutual=${nv.mutual}`);
    if (/BROOK_TLS_SERVER_NAME=rel-brook-chief\.ml\.svc/.test(notes) !== nv.serverName) p.push(`BROOK_TLS_SERVER_NAME ${nv.serverName ? "missing" : "needless"}`);
  } else {
    if (/BROOK_TLS_/.test(notes)) p.push("BROOK_TLS_* lines while TLS is off");
    if (!/WARNING: tls\.enabled=false/.test(notes) || !/auth\.enabled=false/.test(notes)) p.push("no plaintext / no-token warning");
  }
  if (nv.tls && nv.token && /WARNING/.test(notes)) p.push("a warning with TLS and token on");
  const psWarned = /WARNING: THE PARAMETER SERVERS ARE UNAUTHENTICATED \(brook ps\s+--allow-unauthenticated\)/.test(notes);
  if (psWarned !== !!nv.psWarning) p.push(`unauthenticated-PS warning ${psWarned ? "without cause" : "missing"}`);
  if (!/--no-local-check/.test(notes)) p.push("no word of brook submit --no-local-check");
  if (nv.storage) {
    if (!/data globs\s+under \/data/.test(notes)) p.push("no data mount path");
    if (!notes.includes("checkpoint: {dir: /brook/shared/checkpoints}") || !notes.includes("export: {dir: /brook/shared/exports}")) p.push("no checkpoint/export dirs under the shared mount");
  } else if (!/need storage\.shared/.test(notes)) p.push("no word that checkpoints and exports need storage.shared");
  const sv = nv.serving;
  if (sv) {
    if (!notes.includes(`under ${sv.model} (read-only)`)) p.push("no word of the served model path");
    if (notes.includes("export: {dir: /brook/shared/exports} (each job") !== sv.defaultDir) p.push(`export.dir hint ${sv.defaultDir ? "missing" : "beside a serving.model of one job"}`);
    if (!notes.includes(`POST http://rel-brook-serving.ml.svc:${sv.port}/v1/models/${sv.name}:predict`)) p.push("no in-cluster predict URL");
    if (!notes.includes(`kubectl --namespace ml port-forward svc/rel-brook-serving 8501:${sv.port}`)) p.push("no serving port-forward line");
    if (!notes.includes(`127.0.0.1:8501/v1/models/${sv.name}:predict`)) p.push("no predict example");
    if (!/no authentication of its own/.test(notes)) p.push("no word that serving has no authentication");
    if (/sends one prediction to the serving Service/.test(notes) === !!sv.noTest) p.push("helm test serving line wrong");
  } else if (/serving/i.test(notes)) p.push("serving lines while serving is off");
  if (p.length) fail(`NOTES.txt (${nv.name}): ${p.join("; ")}`);
  else ok(`helm install --dry-run=client renders NOTES.txt (${nv.name})`);
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
  // The TLS files a variant's pods would find in their mount: the rendered
  // Secret's, or (tls.existingSecret) the user certificate standing in for it.
  const tlsDirs = new Map();
  function tlsDirFor(entry) {
    if (tlsDirs.has(entry)) return tlsDirs.get(entry);
    const dir = path.join(scratch, `tls-${tlsDirs.size}`);
    mkdirSync(dir, { recursive: true });
    const s = find(entry.objs, "Secret", `${names(entry.release).full}-tls`);
    const files = s
      ? Object.fromEntries(["tls.crt", "tls.key", "ca.crt"].map((k) => [k, Buffer.from(s.data[k], "base64")]))
      : { "tls.crt": readFileSync(USER_CERT.cert), "tls.key": readFileSync(USER_CERT.key), "ca.crt": readFileSync(USER_CERT.ca) };
    for (const [k, data] of Object.entries(files)) writeFileSync(path.join(dir, k), data, { mode: 0o600 });
    tlsDirs.set(entry, dir);
    return dir;
  }
  // Paths in the pod's env point at volumes; make them exist here.
  const localize = (env, entry) => {
    for (const [k, val] of Object.entries(env)) if (/_DIR$/.test(k) && val.startsWith("/")) env[k] = path.join(scratch, val);
    for (const k of ["BROOK_TLS_CERT", "BROOK_TLS_KEY", "BROOK_TLS_CA"]) if (env[k]) env[k] = path.join(tlsDirFor(entry), path.basename(env[k]));
    return env;
  };
  function run(args, env) {
    return spawnSync(BROOK, args, { encoding: "utf8", env: { PATH: process.env.PATH, HOME: scratch, ...env }, timeout: 20000 });
  }
  // The smoke job the images ship: its data made with exactly the
  // Dockerfiles' `brook data gen` arguments (--out moved here), its spec
  // beside it, as in the image's /usr/share/brook/smoke.
  const smokeDir = path.join(scratch, "smoke");
  function dockerDataGen(file) {
    const text = readFileSync(path.join(repo, file), "utf8").replace(/\\\n/g, " ");
    const runs = text.split("\n").map((l) => l.trim()).filter((l) => /^RUN\s+brook\s+data\s+gen\b/.test(l));
    if (runs.length !== 1) throw new Error(`${file}: ${runs.length} RUN brook data gen instructions, want 1`);
    const cmd = runs[0].replace(/^RUN\s+/, "").split("&&")[0].trim();
    if (/['"$`\\;|<>(){}*?]/.test(cmd)) throw new Error(`${file}: brook data gen arguments need shell parsing: ${cmd}`);
    return cmd.split(/\s+/).slice(1); // without "brook"
  }
  let smokeReady = false;
  try {
    const genArgs = dockerDataGen("docker/Dockerfile.cpu");
    const cudaArgs = dockerDataGen("docker/Dockerfile.cuda");
    if (JSON.stringify(genArgs) !== JSON.stringify(cudaArgs)) throw new Error(`docker/Dockerfile.cuda runs brook ${cudaArgs.join(" ")}, docker/Dockerfile.cpu brook ${genArgs.join(" ")}`);
    ok(`both Dockerfiles make the smoke data with brook ${genArgs.join(" ")}`);
    const out = genArgs.indexOf("--out");
    if (out < 0 || genArgs[out + 1] !== SMOKE_DIR) throw new Error(`brook data gen --out ${genArgs[out + 1]}, want ${SMOKE_DIR}`);
    const args = [...genArgs];
    args[out + 1] = smokeDir;
    const g = run(args, {});
    if (g.status !== 0) throw new Error(`brook ${args.join(" ")}: exit ${g.status} ${g.signal || ""}: ${(g.stderr || "").trim()}`);
    writeFileSync(path.join(smokeDir, "job.yaml"), readFileSync(path.join(repo, "examples/smoke/job.yaml")));
    const d = run(["submit", path.join(smokeDir, "job.yaml"), "--dry-run"], {});
    if (d.status !== 0) throw new Error(`brook submit examples/smoke/job.yaml --dry-run beside the data: exit ${d.status} ${d.signal || ""}: ${(d.stderr || "").trim()}`);
    ok(`examples/smoke/job.yaml passes brook submit --dry-run beside the Dockerfiles' data: ${(d.stderr || "").trim().split("\n").pop()}`);
    smokeReady = true;
  } catch (e) {
    fail(`smoke job: ${e.message}`);
  }
  // The test pod's script under /bin/sh, with `brook` on PATH, the smoke job
  // at smokeDir instead of the image's path, $1 = chief.
  const binDir = path.join(scratch, "bin");
  mkdirSync(binDir, { recursive: true });
  symlinkSync(path.resolve(BROOK), path.join(binDir, "brook"));
  const localScript = (s, opts = {}) => {
    let script = s.script.split(SMOKE_DIR).join(smokeDir);
    if (opts.timeout) script = script.replace(/--timeout \d+/g, `--timeout ${opts.timeout}`);
    return script;
  };
  const shEnv = (env) => ({ PATH: `${binDir}:${process.env.PATH}`, HOME: scratch, ...env });
  function runTestScript(s, chief, env, opts) {
    return spawnSync("/bin/sh", ["-c", localScript(s, opts), s.argv0 || "sh", chief], { encoding: "utf8", env: shEnv(env), timeout: 30000 });
  }
  // `brook ps --allow-unauthenticated` comes with the ps-auth change; until
  // this binary has it, a PS render carrying it is checked without it
  // (the rest of its command still runs through --check-config).
  const psHelp = run(["ps", "--help"], {});
  const HAS_PS_AUTH = /--allow-unauthenticated/.test(`${psHelp.stdout}${psHelp.stderr}`);
  // A local port nothing listens on (bound, then closed).
  const closedPort = await new Promise((resolve) => {
    const srv = http.createServer();
    srv.listen(0, "127.0.0.1", () => {
      const port = srv.address().port;
      srv.close(() => resolve(port));
    });
  });
  let checked = 0;
  for (const entry of rendered) {
    const { v, objs } = entry;
    for (const o of objs) {
      const spec = podSpecOf(o);
      if (!spec) continue;
      const replicas = o.kind === "StatefulSet" ? o.spec.replicas : 1;
      for (const c of containersOf(spec)) {
        if (isHelmTest(o) && o.metadata.name === names(entry.release).servingTest) {
          // The serving test's bash script against a port nothing listens
          // on: it must give up after its wait, saying why (exit 1).
          const s = servingTestScript(o);
          const key = JSON.stringify(["serving-test", s.script]);
          if (seen.has(key)) continue;
          seen.add(key);
          const started = Date.now();
          const r = spawnSync("/bin/bash", ["-c", s.script, s.argv0 || "bash", "127.0.0.1", String(closedPort), s.model, "1"], { encoding: "utf8", env: shEnv({}), timeout: 30000 });
          const secs = (Date.now() - started) / 1000;
          if (r.status === 1 && /no model ".*" served at http:\/\/127\.0\.0\.1:\d+ after 1 s .*no connection.*serving\.test\.enabled=false/.test(r.stderr) && secs < 10) ok(`[${v.name}] serving test pod script: with no server it gives up after its wait and says why (exit 1 in ${secs.toFixed(1)} s)`);
          else fail(`[${v.name}] serving test pod script with no server: exit ${r.status} ${r.signal || ""} in ${secs.toFixed(1)} s, want 1 and "no model ... served": ${(r.stderr || "").trim()} ${(r.stdout || "").trim()}`);
          checked++;
          continue;
        }
        if (isHelmTest(o)) {
          // A client script: it must validate the smoke job (spec and data)
          // and fail only for want of a chief (exit 4: unreachable).
          let env;
          try {
            env = localize(containerEnv(objs, o, c, 0), entry);
          } catch (e) {
            fail(`[${v.name}] ${o.metadata.name}/${c.name}: ${e.message}`);
            continue;
          }
          const s = testPodScript(o);
          const key = JSON.stringify([s.script, s.chief, env]);
          if (seen.has(key)) continue;
          seen.add(key);
          const r = runTestScript(s, s.chief, env, { timeout: "1" });
          if (r.status === 4) ok(`[${v.name}] test pod script: smoke job valid, flags accepted (exit 4: no chief here)`);
          else fail(`[${v.name}] test pod script: exit ${r.status} ${r.signal || ""}, want 4 (unreachable): ${(r.stderr || "").trim()} ${(r.stdout || "").trim()}`);
          checked++;
          continue;
        }
        const cmd = c.command || [];
        if (cmd.length && !(cmd.length === 1 && cmd[0] === "brook")) {
          fail(`[${v.name}] ${o.metadata.name}/${c.name}: command ${cmd} is not the image's brook entrypoint`);
          continue;
        }
        for (const podIndex of [...new Set([0, Math.max(0, replicas - 1)])]) {
          let env;
          try {
            env = localize(containerEnv(objs, o, c, podIndex), entry);
          } catch (e) {
            fail(`[${v.name}] ${o.metadata.name}/${c.name}: ${e.message}`);
            continue;
          }
          const key = JSON.stringify([c.args, env]);
          if (seen.has(key)) continue;
          seen.add(key);
          let args = c.args;
          let note = "";
          if (!HAS_PS_AUTH && args[0] === "ps" && args.includes("--allow-unauthenticated")) {
            args = args.filter((a) => a !== "--allow-unauthenticated");
            note = " [without --allow-unauthenticated: needs ps-auth, which this brook lacks]";
          }
          const shown = `brook ${args.join(" ")}${note}`;
          const r = run([...args, "--check-config"], env);
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
    const env = localize(containerEnv(def.objs, ps, c, ps.spec.replicas), def); // one past the last shard
    const r = run([...c.args, "--check-config"], env);
    if (r.status === 2) ok(`brook ps --check-config rejects shard index ${ps.spec.replicas} of ${ps.spec.replicas} (exit 2: ${(r.stderr || "").trim()})`);
    else fail(`brook ps --check-config accepted an out-of-range shard index (exit ${r.status})`);
    const chief = find(def.objs, "Deployment", n.chief).spec.template.spec.containers[0];
    const args = chief.args.filter((a, i, all) => a !== "--ps-statefulset" && all[i - 1] !== "--ps-statefulset");
    const chiefEnv = () => localize(containerEnv(def.objs, find(def.objs, "Deployment", n.chief), chief, 0), def);
    const r2 = run([...args, "--check-config"], chiefEnv());
    if (r2.status === 2) ok(`brook chief --check-config rejects a chief with no PS (exit 2: ${(r2.stderr || "").trim()})`);
    else fail(`brook chief --check-config accepted a chief with no PS list (exit ${r2.status})`);
    // ... and the TLS / token settings the chart gives it.
    const noCa = chiefEnv();
    delete noCa.BROOK_TLS_CA;
    const r3 = run([...chief.args, "--check-config"], noCa);
    if (r3.status === 2) ok(`brook chief --check-config rejects mutual TLS without a CA (exit 2: ${(r3.stderr || "").trim()})`);
    else fail(`brook chief --check-config accepted BROOK_TLS_MUTUAL=true without BROOK_TLS_CA (exit ${r3.status})`);
    const trainer = find(def.objs, "StatefulSet", n.trainer);
    const shortToken = { ...localize(containerEnv(def.objs, trainer, trainer.spec.template.spec.containers[0], 0), def), BROOK_TOKEN: "short" };
    const r4 = run([...trainer.spec.template.spec.containers[0].args, "--check-config"], shortToken);
    if (r4.status === 2) ok(`brook trainer --check-config rejects a short BROOK_TOKEN (exit 2: ${(r4.stderr || "").trim()})`);
    else fail(`brook trainer --check-config accepted a 5-character BROOK_TOKEN (exit ${r4.status})`);
    // ... and brook serve's.
    const mem = rendered.find((x) => x.v.name.startsWith("serving: HPA"));
    if (mem) {
      const sd = find(mem.objs, "Deployment", names(mem.release).serving);
      const sc = sd.spec.template.spec.containers[0];
      const senv = localize(containerEnv(mem.objs, sd, sc, 0), mem);
      const noDir = sc.args.filter((a, i, all) => a !== "--data-dir" && all[i - 1] !== "--data-dir");
      const r6 = run([...noDir, "--check-config"], senv);
      if (r6.status === 2 && /--memory-limit .* needs --data-dir/.test(r6.stderr)) ok(`brook serve --check-config rejects serving.memoryLimit without its --data-dir (exit 2: ${(r6.stderr || "").trim()})`);
      else fail(`brook serve --check-config accepted --memory-limit without --data-dir (exit ${r6.status}): ${(r6.stderr || "").trim()}`);
      const r7 = run([...sc.args, "--job", "j", "--check-config"], senv);
      if (r7.status === 2) ok(`brook serve --check-config rejects --job without --follow-ps (exit 2: ${(r7.stderr || "").trim()})`);
      else fail(`brook serve --check-config accepted --job without --follow-ps (exit ${r7.status})`);
    } else fail("no serving HPA render for the brook serve refusals");
    const open = rendered.find((x) => x.v.name === "tls and token off");
    if (open && HAS_PS_AUTH) {
      const ops = find(open.objs, "StatefulSet", n.ps);
      const oc = ops.spec.template.spec.containers[0];
      const r5 = run([...oc.args.filter((a) => a !== "--allow-unauthenticated"), "--check-config"], localize(containerEnv(open.objs, ops, oc, 0), open));
      if (r5.status === 2) ok(`brook ps --check-config refuses 0.0.0.0 with neither token nor mutual TLS unless --allow-unauthenticated (exit 2: ${(r5.stderr || "").trim()})`);
      else fail(`brook ps --check-config accepted an unauthenticated PS on 0.0.0.0 without --allow-unauthenticated (exit ${r5.status})`);
    } else if (!HAS_PS_AUTH) console.log("skip: brook ps has no --allow-unauthenticated yet (needs ps-auth): its refusal is not checked");
    await liveChief(def, chief, chiefEnv);
  }
  // The default render's generated certificate and token, in the real
  // binary: two PS shards started with the PS pods' env and a chief started
  // with the chief pod's env (its StatefulSet DNS names replaced by the local
  // PS addresses) serve `brook list` to a client with the test pod's env and
  // turn away clients without them; then, with a trainer started with the
  // trainer pod's env, the test pod's own script (the smoke job at
  // smokeDir) submits the smoke job, watches it and exits 0.
  async function startServer(what, args, env, waitForAddress = true) {
    const child = spawn(BROOK, args, { env: { PATH: process.env.PATH, HOME: scratch, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    const s = { what, child, out: "", err: "", address: null };
    child.stdout.on("data", (d) => (s.out += d));
    child.stderr.on("data", (d) => (s.err += d));
    s.exited = new Promise((resolve) => {
      child.on("exit", (code, sig) => resolve(`exit ${code} ${sig || ""}`));
      child.on("error", (e) => resolve(`spawn failed: ${e.message}`));
    });
    for (let i = 0; waitForAddress && i < 150 && !s.address; i++) {
      const m = s.out.match(/listening on (\S+)/);
      if (m) s.address = m[1];
      else if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) break;
      else await new Promise((r) => setTimeout(r, 100));
    }
    if (waitForAddress && !s.address) {
      child.kill("SIGKILL");
      fail(`live ${what} with the generated certificate and token did not start (${await s.exited}): ${s.err.trim().slice(-600)}`);
      return null;
    }
    return s;
  }
  async function stopAll(servers) {
    for (const s of servers) s.child.kill("SIGTERM");
    await Promise.all(servers.map(async (s) => {
      const t = setTimeout(() => s.child.kill("SIGKILL"), 10000);
      await s.exited;
      clearTimeout(t);
    }));
  }
  function setFlag(args, flag, value) {
    const i = args.indexOf(flag);
    if (i < 0) args.push(flag, value);
    else args[i + 1] = value;
    return args;
  }
  // Runs a command without blocking the event loop (the live servers' pipes
  // keep draining): {status, stdout, stderr}.
  function runAsync(cmd, args, env, timeoutMs) {
    return new Promise((resolve) => {
      const child = spawn(cmd, args, { env: { PATH: process.env.PATH, HOME: scratch, ...env }, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      const killer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
      child.on("exit", (code, sig) => {
        clearTimeout(killer);
        resolve({ status: sig || code, stdout, stderr });
      });
      child.on("error", (e) => {
        clearTimeout(killer);
        resolve({ status: `spawn failed: ${e.message}`, stdout, stderr });
      });
    });
  }
  function httpGet(url) {
    return new Promise((resolve) => {
      const req = http.get(url, (res) => {
        let body = "";
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode, body }));
      });
      req.on("error", (e) => resolve({ status: 0, body: e.message }));
      req.setTimeout(5000, () => req.destroy(new Error("timeout")));
    });
  }
  // `brook serve` as the serving Deployment runs it (the args and ConfigMap
  // of the "serving: defaults" render; --model moved under the scratch dir,
  // ports on loopback, BROOK_SERVE_POLL_SECONDS 0.5 instead of 10 to keep
  // this quick), started before any export exists: it must wait
  // (--wait-for-model) with nothing listening; then a job on the live
  // cluster exports there (the chief's <export.dir>/<job id>/), the server
  // loads it, answers the readiness probe's GET and /metrics, and the
  // serving helm test pod's own bash script gets a prediction from it.
  async function liveServing(address, clientEnv, servers) {
    const entry = rendered.find((x) => x.v.name === "serving: defaults on the chart's shared PVC");
    if (!entry) return fail("live serving: no serving render");
    const n = names(entry.release);
    const d = find(entry.objs, "Deployment", n.serving);
    const c = d.spec.template.spec.containers[0];
    const model = path.join(scratch, argValue(c.args, "--model"));
    const env = { ...localize(containerEnv(entry.objs, d, c, 0), entry), BROOK_SERVE_POLL_SECONDS: "0.5" };
    const args = setFlag(setFlag(setFlag(setFlag([...c.args], "--model", model), "--http", "127.0.0.1:0"), "--grpc", "127.0.0.1:0"), "--metrics-listen", "127.0.0.1:0");
    const serve = await startServer("brook serve", args, env, false);
    servers.push(serve);
    await new Promise((r) => setTimeout(r, 1500));
    check("live brook serve (the serving pod's args and ConfigMap) started before any export: waits (--wait-for-model), nothing listening", () => {
      const p = [];
      if (serve.child.exitCode !== null || serve.child.signalCode !== null) p.push(`it exited (${serve.child.exitCode ?? serve.child.signalCode}): ${serve.err.trim().slice(-400)}`);
      if (/listening on/.test(serve.out)) p.push(`listening without a model: ${serve.out.trim()}`);
      if (!/waiting for an export \(--wait-for-model\)/.test(serve.err)) p.push(`stderr does not say it waits: ${serve.err.trim().slice(-400)}`);
      return p;
    });
    // The smoke job with an export into the served directory.
    const jobFile = path.join(smokeDir, "job-export.yaml");
    const spec = readFileSync(path.join(smokeDir, "job.yaml"), "utf8").replace(/^name: .*$/m, "name: helm-test-serving-export");
    writeFileSync(jobFile, `${spec}export: {dir: ${model}}\n`);
    const started = Date.now();
    const sub = await runAsync(BROOK, ["submit", jobFile, "--chief", address, "--timeout", "10"], clientEnv, 30000);
    const id = sub.stdout.trim();
    if (sub.status !== 0 || !id) return fail(`live serving: brook submit of the exporting smoke job: exit ${sub.status}: ${sub.stderr.trim().slice(-400)}`);
    const watch = await runAsync(BROOK, ["status", id, "--chief", address, "--watch", "--timeout", "10"], clientEnv, 90000);
    if (watch.status !== 0) return fail(`live serving: the exporting smoke job ${id}: exit ${watch.status}: ${(watch.stdout + watch.stderr).trim().slice(-600)}`);
    let m = null;
    for (let i = 0; i < 200 && !m; i++) {
      m = serve.out.match(/^brook serve listening on http (\S+):(\d+) grpc (\S+) metrics (\S+):(\d+)$/m);
      if (!m) {
        if (serve.child.exitCode !== null || serve.child.signalCode !== null) break;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    if (!m) return fail(`live brook serve: not listening ${((Date.now() - started) / 1000).toFixed(1)} s after job ${id} began exporting: ${serve.out.trim()} | ${serve.err.trim().slice(-600)}`);
    const port = m[2];
    ok(`live brook serve: job ${id} exported under ${path.relative(scratch, model)}/, the waiting server loaded it and listens (${m[0].replace(/^brook serve /, "")})`);
    const probe = await httpGet(`http://127.0.0.1:${port}${c.readinessProbe.httpGet.path}`);
    if (probe.status === 200 && /"state":"AVAILABLE"/.test(probe.body)) ok(`live brook serve: the readiness/startup probe's GET ${c.readinessProbe.httpGet.path} answers 200 AVAILABLE`);
    else fail(`live brook serve: GET ${c.readinessProbe.httpGet.path}: ${probe.status} ${probe.body}`);
    const metrics = await httpGet(`http://127.0.0.1:${m[5]}${d.spec.template.metadata.annotations["prometheus.io/path"]}`);
    if (metrics.status === 200 && /^brook_serve_model_version [1-9]/m.test(metrics.body)) ok("live brook serve: the scraped metrics path serves brook_serve_model_version");
    else fail(`live brook serve: metrics: ${metrics.status} ${metrics.body.slice(0, 300)}`);
    // The serving helm test pod's script, pointed at this server.
    const pod = find(entry.objs, "Pod", n.servingTest);
    const s = servingTestScript(pod);
    const t0 = Date.now();
    const r = await runAsync("/bin/bash", ["-c", s.script, s.argv0 || "bash", "127.0.0.1", port, s.model, "20"], shEnv({}), 60000);
    const secs = ((Date.now() - t0) / 1000).toFixed(1);
    const reply = r.stdout.trim().split("\n").find((l) => l.startsWith("POST ")) || "";
    if (r.status === 0 && /HTTP 200 \{"predictions":\[[-0-9.e]+\]\}/.test(reply)) ok(`live brook serve: the serving helm test pod's script reads the metadata and predicts, exit 0 in ${secs} s: ${reply}`);
    else fail(`live brook serve: the serving helm test pod's script: exit ${r.status} in ${secs} s, want 0 with predictions: ${r.stdout.trim().slice(-600)} ${r.stderr.trim().slice(-600)} | serve: ${serve.err.trim().slice(-400)}`);
    // A model name the server does not serve: the script says so and fails.
    const wrong = await runAsync("/bin/bash", ["-c", s.script, s.argv0 || "bash", "127.0.0.1", port, "not-this-model", "1"], shEnv({}), 30000);
    if (wrong.status === 1 && /no model "not-this-model" served .* 404/.test(wrong.stderr)) ok("live brook serve: the serving test script fails on a model name the server does not serve (404)");
    else fail(`live brook serve: the serving test script with a wrong model name: exit ${wrong.status}: ${wrong.stderr.trim().slice(-300)}`);
  }
  async function liveChief(def, chiefC, chiefEnv) {
    const n = names(RELEASE);
    const token = unb64(find(def.objs, "Secret", `${n.full}-auth`).data.token);
    const servers = [];
    try {
      const psSet = find(def.objs, "StatefulSet", n.ps);
      const psC = psSet.spec.template.spec.containers[0];
      for (let i = 0; i < psSet.spec.replicas; i++) {
        const env = { ...localize(containerEnv(def.objs, psSet, psC, i), def), BROOK_PS_THREADS: "2" };
        if ("BROOK_PS_TOKEN" in env) env.BROOK_PS_TOKEN = token;
        env.BROOK_PS_DATA_DIR = path.join(scratch, `live-ps-${i}`);
        mkdirSync(env.BROOK_PS_DATA_DIR, { recursive: true });
        const args = setFlag(setFlag([...psC.args], "--listen", "127.0.0.1:0"), "--metrics-listen", "");
        const s = await startServer(`PS shard ${i}`, args, env);
        if (!s) return;
        servers.push(s);
      }
      const env = { ...chiefEnv(), BROOK_CHIEF_TOKEN: token };
      if ("BROOK_PS_TOKEN" in env) env.BROOK_PS_TOKEN = token;
      env.BROOK_CHIEF_STATE_DIR = path.join(scratch, "live-chief-state");
      mkdirSync(env.BROOK_CHIEF_STATE_DIR, { recursive: true });
      const psFlags = ["--ps-statefulset", "--ps-service", "--ps-namespace", "--ps-replicas", "--ps-port"];
      const args = chiefC.args.filter((a, i, all) => !psFlags.includes(a) && !psFlags.includes(all[i - 1]));
      setFlag(setFlag(args, "--listen", "127.0.0.1:0"), "--metrics-listen", "");
      args.push("--ps", servers.map((s) => s.address).join(","));
      const chief = await startServer("chief", args, env);
      if (!chief) return;
      servers.push(chief);
      const address = chief.address;

      const testPod = def.objs.find(isHelmTest);
      const tc = testPod.spec.containers[0];
      const clientEnv = { ...localize(containerEnv(def.objs, testPod, tc, 0), def), BROOK_TOKEN: token };
      const list = (extraEnv, drop = []) => {
        const e = { ...clientEnv, ...extraEnv };
        for (const k of drop) delete e[k];
        return run(["list", "--chief", address, "--timeout", "5"], e);
      };
      const cases = [
        ["test pod env (generated CA, client certificate, token), dialling 127.0.0.1", {}, [], 0],
        [`checking the chief's Service name ${n.chief}.default.svc`, { BROOK_TLS_SERVER_NAME: `${n.chief}.default.svc` }, [], 0],
        ["a wrong token", { BROOK_TOKEN: "wrong-token-0123456789" }, [], 5],
        ["no token", {}, ["BROOK_TOKEN"], 5],
        ["no client certificate (mutual TLS)", { BROOK_TLS_MUTUAL: "false" }, ["BROOK_TLS_CERT", "BROOK_TLS_KEY"], 4],
        ["another CA", { BROOK_TLS_CA: USER_CERT.ca }, [], 4],
        ["a name the certificate does not carry", { BROOK_TLS_SERVER_NAME: "evil.example.com" }, [], 4],
      ];
      for (const [what, extraEnv, drop, want] of cases) {
        const r = list(extraEnv, drop);
        if (r.status === want) ok(`live TLS chief: brook list with ${what}: exit ${want}`);
        else fail(`live TLS chief: brook list with ${what}: exit ${r.status} ${r.signal || ""}, want ${want}: ${(r.stderr || "").trim()} ${(r.stdout || "").trim().slice(0, 200)}`);
      }

      // The helm test pod's script, end to end (needs the smoke data).
      if (!smokeReady) return fail("live TLS chief: the test pod's script not run (no smoke data)");
      const trainerSet = find(def.objs, "StatefulSet", n.trainer);
      const trC = trainerSet.spec.template.spec.containers[0];
      const trEnv = { ...localize(containerEnv(def.objs, trainerSet, trC, 0), def), BROOK_TOKEN: token, BROOK_TRAINER_CPU_THREADS: "2" };
      if ("BROOK_PS_TOKEN" in trEnv) trEnv.BROOK_PS_TOKEN = token;
      const trArgs = setFlag(setFlag([...trC.args], "--chief", address), "--metrics-listen", "");
      const trainer = await startServer("trainer", trArgs, trEnv, false);
      servers.push(trainer);
      const s = testPodScript(testPod);
      const started = Date.now();
      const child = spawn("/bin/sh", ["-c", localScript(s), s.argv0 || "sh", address], { env: shEnv(clientEnv), stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      child.stdout.on("data", (d) => (out += d));
      child.stderr.on("data", (d) => (out += d));
      const killer = setTimeout(() => child.kill("SIGKILL"), 90000);
      const status = await new Promise((resolve) => {
        child.on("exit", (code, sig) => resolve(sig ? sig : code));
        child.on("error", (e) => resolve(`spawn failed: ${e.message}`));
      });
      clearTimeout(killer);
      const secs = ((Date.now() - started) / 1000).toFixed(1);
      const last = out.trim().split("\n").find((l) => /SUCCEEDED after|FAILED|CANCELLED/.test(l)) || out.trim().split("\n").pop();
      if (status === 0 && /SUCCEEDED/.test(out)) {
        ok(`live TLS cluster (chief, ${servers.length - 2} PS, 1 trainer): the helm test pod's script submits the smoke job, watches it and exits 0 in ${secs} s: ${last}`);
        await liveServing(address, clientEnv, servers);
      } else fail(`live TLS cluster: the helm test pod's script: exit ${status} after ${secs} s, want 0: ${out.trim().slice(-800)} | trainer: ${trainer.err.trim().slice(-600)} | chief: ${chief.err.trim().slice(-600)} (live serving not run)`);
    } finally {
      await stopAll(servers);
    }
  }
  if (checked === 0) fail("no container was run through the binary");
  rmSync(scratch, { recursive: true, force: true });
}

rmSync(work, { recursive: true, force: true });
console.log(`helm chart checks: ${passes} ok, ${failures} failed`);
process.exit(failures ? 1 : 0);
