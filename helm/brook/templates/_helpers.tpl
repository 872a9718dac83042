{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "brook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object-name prefix: <release>-<chart>, or the release name when it already contains the chart name.
     Kept to 50 characters so "<prefix>-trainer-NN" pod names stay valid DNS labels. */}}
{{- define "brook.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "brook.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "brook.chief.fullname" -}}{{ include "brook.fullname" . }}-chief{{- end }}
{{- define "brook.ps.fullname" -}}{{ include "brook.fullname" . }}-ps{{- end }}
{{- define "brook.trainer.fullname" -}}{{ include "brook.fullname" . }}-trainer{{- end }}
{{- define "brook.serving.fullname" -}}{{ include "brook.fullname" . }}-serving{{- end }}

{{/* The directory `brook serve --model` reads: serving.model, else the
     exports directory on the shared volume. */}}
{{- define "brook.serving.model" -}}
{{- .Values.serving.model | default (printf "%s/exports" (trimSuffix "/" .Values.storage.shared.mountPath)) }}
{{- end }}

{{/* The serving Service's in-cluster address (without a port). */}}
{{- define "brook.serving.host" -}}
{{ include "brook.serving.fullname" . }}.{{ .Release.Namespace }}.svc
{{- end }}

{{/* The PS pods' gRPC addresses in shard order, comma-separated: the names
     the chief dials (its --ps-statefulset), which the certificate's
     wildcard SAN covers. */}}
{{- define "brook.ps.addresses" -}}
{{- $ps := include "brook.ps.fullname" . }}
{{- $out := list }}
{{- range $i := until (int .Values.ps.replicas) }}
{{- $out = append $out (printf "%s-%d.%s.%s.svc.cluster.local:%v" $ps $i $ps $.Release.Namespace $.Values.ps.port) }}
{{- end }}
{{- join "," $out }}
{{- end }}

{{/* The serving ConfigMap's data (YAML): BROOK_SERVE_* from serving.*,
     then values env, then serving.env (last wins); the BROOK_TLS_* client
     settings only with followPs (a plain serving pod mounts no
     certificate). In serving.yaml, not configmap.yaml: the training pods'
     checksum/config hashes that file, and a serving setting must not
     restart them. */}}
{{- define "brook.serving.configData" -}}
{{- $s := .Values.serving }}
{{- $data := dict
      "BROOK_SERVE_MAX_BATCH" (int64 $s.maxBatch)
      "BROOK_SERVE_BATCH_TIMEOUT_MICROS" (int64 $s.batchTimeoutMicros)
      "BROOK_SERVE_WORKERS" (int64 $s.workers)
      "BROOK_SERVE_HTTP_THREADS" (int64 $s.httpThreads)
      "BROOK_SERVE_MAX_REQUEST_BYTES" $s.maxRequestBytes
      "BROOK_SERVE_MAX_QUEUED_EXAMPLES" (int64 $s.maxQueuedExamples)
      "BROOK_SERVE_POLL_SECONDS" $s.pollSeconds }}
{{- if $s.fillMissing }}{{ $_ := set $data "BROOK_SERVE_FILL_MISSING" "true" }}{{ end }}
{{- if $s.followPs }}{{ $_ := set $data "BROOK_SERVE_SYNC_SECONDS" $s.syncSeconds }}{{ end }}
{{- $tls := dict }}
{{- if include "brook.serving.psClient" . }}{{ $tls = include "brook.tlsEnv" . | fromYaml | default dict }}{{ end }}
{{- $data = mergeOverwrite $tls $data (deepCopy .Values.env) (deepCopy $s.env) }}
{{- range $k := keys $data | sortAlpha }}
{{- $v := index $data $k }}
{{- if and (kindIs "float64" $v) (eq $v (float64 (int64 $v))) }}{{ $v = int64 $v }}{{ end }}
{{ $k }}: {{ $v | toString | quote }}
{{- end }}
{{- end }}

{{/* "true" when the serving pods talk to the PS (serving.followPs): only
     then do they get the TLS Secret and the PS token. */}}
{{- define "brook.serving.psClient" -}}
{{- if and .Values.serving.enabled .Values.serving.followPs }}true{{ end }}
{{- end }}

{{/* The selector labels of the whole release. */}}
{{- define "brook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "brook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of every object; call with (dict "ctx" $ "component" "chief"). */}}
{{- define "brook.labels" -}}
helm.sh/chart: {{ include "brook.chart" .ctx }}
{{ include "brook.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: brook
app.kubernetes.io/version: {{ .ctx.Values.image.tag | default .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component; call with (dict "ctx" $ "component" "ps"). */}}
{{- define "brook.componentSelectorLabels" -}}
{{ include "brook.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "brook.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "brook.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image reference; call with (dict "ctx" $ "cuda" true|false). */}}
{{- define "brook.image" -}}
{{- $tag := .ctx.Values.image.tag | default .ctx.Chart.AppVersion -}}
{{- if .cuda }}{{ $tag = printf "%s%s" $tag .ctx.Values.image.cudaTagSuffix }}{{ end -}}
{{ printf "%s:%s" .ctx.Values.image.repository $tag }}
{{- end }}

{{/* The chief's in-cluster gRPC address. */}}
{{- define "brook.chief.address" -}}
{{ include "brook.chief.fullname" . }}.{{ .Release.Namespace }}.svc:{{ .Values.chief.port }}
{{- end }}

{{- define "brook.tlsSecretName" -}}
{{- .Values.tls.existingSecret | default (printf "%s-tls" (include "brook.fullname" .)) }}
{{- end }}

{{- define "brook.authSecretName" -}}
{{- .Values.auth.existingSecret | default (printf "%s-auth" (include "brook.fullname" .)) }}
{{- end }}

{{- define "brook.authSecretKey" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.existingSecretKey }}{{ else }}token{{ end }}
{{- end }}

{{/* Pod annotations shared by every Brook pod; call with (dict "ctx" $ "extra" .Values.ps.podAnnotations);
     "config" (optional): the pod's own ConfigMap data, hashed for checksum/config instead of
     configmap.yaml (the serving pods: their settings restart them, not the training pods);
     "noSecrets" true leaves out checksum/secrets (a pod that mounts neither Secret). */}}
{{- define "brook.podAnnotations" -}}
{{- if and .ctx.Values.metrics.enabled .ctx.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .ctx.Values.metrics.port | quote }}
prometheus.io/path: {{ .ctx.Values.metrics.path | quote }}
{{- end }}
checksum/config: {{ .config | default (include (print .ctx.Template.BasePath "/configmap.yaml") .ctx) | sha256sum }}
{{- if not .noSecrets }}
{{- with include "brook.secretsChecksum" .ctx }}
checksum/secrets: {{ . }}
{{- end }}
{{- end }}
{{- with .ctx.Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Volumes every Brook pod has: a writable /tmp (the root filesystem is
     read-only) and, with tls.enabled, the certificates. */}}
{{- define "brook.commonVolumes" -}}
{{ include "brook.tmpVolume" . }}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "brook.tlsSecretName" . }}
    defaultMode: 0440
{{- end }}
{{- end }}

{{/* A pod with no TLS mount (the serving pods without followPs, the serving
     test pod): only /tmp. */}}
{{- define "brook.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 1Gi
{{- end }}

{{- define "brook.tmpVolumeMount" -}}
- name: tmp
  mountPath: /tmp
{{- end }}

{{- define "brook.commonVolumeMounts" -}}
{{ include "brook.tmpVolumeMount" . }}
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: {{ .Values.tls.mountPath }}
  readOnly: true
{{- end }}
{{- end }}

{{/* Environment shared by the client-side pods (trainers, the test pod). */}}
{{- define "brook.clientAuthEnv" -}}
{{- if .Values.auth.enabled }}
- name: BROOK_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "brook.authSecretName" . }}
      key: {{ include "brook.authSecretKey" . }}
{{- end }}
{{- end }}

{{/* BROOK_TLS_* as a container env list (the helm test pod, which has no
     ConfigMap). */}}
{{- define "brook.tlsEnvList" -}}
{{- range $k, $v := include "brook.tlsEnv" . | fromYaml | default dict }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end }}

{{/* The pods' checksum/secrets annotation: a hash of the values that make
     the TLS and token Secrets (user certificate, key, CA, token, Secret names,
     mutual), so pods restart when one changes. Deliberately NOT a hash of
     the rendered Secrets: generated material (genCA / randAlphaNum) is new on
     every render that cannot `lookup` the live Secret (`helm template`,
     --dry-run=client, GitOps renderers), and hashing it would change every
     pod template on every such render and roll the whole cluster each sync.
     On a real install/upgrade the generated material is reused, so it never
     changes under running pods. Empty when neither is enabled. */}}
{{- define "brook.secretsChecksum" -}}
{{- if or .Values.tls.enabled .Values.auth.enabled }}
{{- $tls := ternary (omit .Values.tls "generatedDays") dict .Values.tls.enabled }}
{{- $auth := ternary .Values.auth dict .Values.auth.enabled }}
{{- dict "tls" $tls "auth" $auth | toJson | sha256sum }}
{{- end }}
{{- end }}

{{/* The DNS names the generated certificate carries: every name a Brook
     client dials. */}}
{{- define "brook.tlsDnsNames" -}}
{{- $ns := .Release.Namespace }}
{{- $chief := include "brook.chief.fullname" . }}
{{- $ps := include "brook.ps.fullname" . }}
{{- $names := list $chief (printf "%s.%s" $chief $ns) (printf "%s.%s.svc" $chief $ns) (printf "%s.%s.svc.cluster.local" $chief $ns) }}
{{- $names = concat $names (list (printf "*.%s" $ps) (printf "*.%s.%s" $ps $ns) (printf "*.%s.%s.svc" $ps $ns) (printf "*.%s.%s.svc.cluster.local" $ps $ns)) }}
{{- $names = append $names "localhost" }}
{{- toJson $names }}
{{- end }}

{{/* data of the TLS Secret (base64 values, as YAML): the user's cert/key/ca;
     else the live Secret's material when `lookup` finds one the chart
     generated (helm upgrade); else a fresh CA and certificate. */}}
{{- define "brook.tlsSecretData" -}}
{{- if .Values.tls.cert }}
tls.crt: {{ .Values.tls.cert | b64enc | quote }}
tls.key: {{ .Values.tls.key | b64enc | quote }}
ca.crt: {{ .Values.tls.ca | b64enc | quote }}
{{- else }}
{{- $live := lookup "v1" "Secret" .Release.Namespace (include "brook.tlsSecretName" .) | default dict }}
{{- $liveData := get $live "data" | default dict }}
{{- $generated := get (get (get $live "metadata" | default dict) "annotations" | default dict) "brook.io/generated" }}
{{- if and (eq (toString $generated) "true") (get $liveData "tls.crt") (get $liveData "tls.key") (get $liveData "ca.crt") }}
tls.crt: {{ get $liveData "tls.crt" | quote }}
tls.key: {{ get $liveData "tls.key" | quote }}
ca.crt: {{ get $liveData "ca.crt" | quote }}
{{- else }}
{{- $days := int .Values.tls.generatedDays }}
{{- $ca := genCA (printf "%s-ca" (include "brook.fullname" .)) $days }}
{{- $cert := genSignedCert (include "brook.chief.fullname" .) (list "127.0.0.1") (include "brook.tlsDnsNames" . | fromJsonArray) $days $ca }}
tls.crt: {{ $cert.Cert | b64enc | quote }}
tls.key: {{ $cert.Key | b64enc | quote }}
ca.crt: {{ $ca.Cert | b64enc | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* data of the token Secret: auth.token; else the live Secret's token when
     `lookup` finds one the chart generated; else randAlphaNum 40. */}}
{{- define "brook.authSecretData" -}}
{{- if .Values.auth.token }}
token: {{ .Values.auth.token | b64enc | quote }}
{{- else }}
{{- $live := lookup "v1" "Secret" .Release.Namespace (include "brook.authSecretName" .) | default dict }}
{{- $token := get (get $live "data" | default dict) "token" }}
{{- $generated := get (get (get $live "metadata" | default dict) "annotations" | default dict) "brook.io/generated" }}
{{- if and (eq (toString $generated) "true") $token }}
token: {{ $token | quote }}
{{- else }}
token: {{ randAlphaNum 40 | b64enc | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* BROOK_TLS_* settings for a ConfigMap. */}}
{{- define "brook.tlsEnv" -}}
{{- if .Values.tls.enabled }}
BROOK_TLS_CERT: {{ printf "%s/tls.crt" .Values.tls.mountPath | quote }}
BROOK_TLS_KEY: {{ printf "%s/tls.key" .Values.tls.mountPath | quote }}
BROOK_TLS_CA: {{ printf "%s/ca.crt" .Values.tls.mountPath | quote }}
BROOK_TLS_MUTUAL: {{ .Values.tls.mutual | quote }}
{{- end }}
{{- end }}

{{/* BROOK_PS_TOKEN (auth.enabled): the token every PS RPC carries. The PS
     requires it; the chief and the trainers send it. It is the chief's
     token (one Secret), named explicitly for all three so none falls back
     on a default. */}}
{{- define "brook.psTokenEnv" -}}
{{- if .Values.auth.enabled }}
- name: BROOK_PS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "brook.authSecretName" . }}
      key: {{ include "brook.authSecretKey" . }}
{{- end }}
{{- end }}

{{/* "true" when the PS has neither a token (auth.enabled) nor mutual TLS:
     it then needs --allow-unauthenticated to listen on the pod's address,
     and NOTES.txt warns. */}}
{{- define "brook.psUnauthenticated" -}}
{{- if not (or .Values.auth.enabled (and .Values.tls.enabled .Values.tls.mutual)) }}true{{ end }}
{{- end }}

{{/* The chart's own volumes of one role's pods, as a JSON list of
     {name, mountPath} (storage.data: chief and trainers; storage.shared:
     chief and every PS, read-only in the serving pods); call with
     (dict "ctx" $ "role" "chief"). */}}
{{- define "brook.builtinMounts" -}}
{{- $v := .ctx.Values }}
{{- $m := list (dict "name" "tmp" "mountPath" "/tmp") }}
{{- if and $v.tls.enabled (or (ne .role "serving") (include "brook.serving.psClient" .ctx)) }}{{ $m = append $m (dict "name" "tls" "mountPath" $v.tls.mountPath) }}{{ end }}
{{- if and (eq .role "serving") $v.serving.memoryLimit (ne (toString $v.serving.memoryLimit) "0") }}{{ $m = append $m (dict "name" "data" "mountPath" "/var/lib/brook/serving") }}{{ end }}
{{- if eq .role "chief" }}{{ $m = append $m (dict "name" "state" "mountPath" "/var/lib/brook/chief") }}{{ end }}
{{- if eq .role "ps" }}{{ $m = append $m (dict "name" "data" "mountPath" "/var/lib/brook/ps") }}{{ end }}
{{- if and $v.storage.data.enabled (has .role (list "chief" "trainer")) }}
{{- $m = append $m (dict "name" "brook-data" "mountPath" $v.storage.data.mountPath) }}
{{- end }}
{{- if and $v.storage.shared.enabled (has .role (list "chief" "ps" "serving")) }}
{{- $m = append $m (dict "name" "brook-shared" "mountPath" $v.storage.shared.mountPath) }}
{{- end }}
{{- toJson $m }}
{{- end }}

{{/* A role's storage volumes and its extraVolumes (the volumes list
     entries beyond tmp/tls and the role's own state or data volume). */}}
{{- define "brook.storageVolumes" -}}
{{- $v := .ctx.Values }}
{{- $data := $v.storage.data }}
{{- $shared := $v.storage.shared }}
{{- if and $data.enabled (has .role (list "chief" "trainer")) }}
- name: brook-data
  {{- if $data.existingClaim }}
  persistentVolumeClaim:
    claimName: {{ $data.existingClaim }}
    readOnly: true
  {{- else }}
  hostPath:
    path: {{ $data.hostPath }}
    type: Directory
  {{- end }}
{{- end }}
{{- if and $shared.enabled (has .role (list "chief" "ps" "serving")) }}
- name: brook-shared
  {{- if $shared.hostPath }}
  hostPath:
    path: {{ $shared.hostPath }}
    type: Directory
  {{- else }}
  persistentVolumeClaim:
    claimName: {{ $shared.existingClaim | default (include "brook.sharedClaimName" .ctx) }}
    {{- if eq .role "serving" }}
    readOnly: true
    {{- end }}
  {{- end }}
{{- end }}
{{- with (index $v .role).extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "brook.storageVolumeMounts" -}}
{{- $v := .ctx.Values }}
{{- if and $v.storage.data.enabled (has .role (list "chief" "trainer")) }}
- name: brook-data
  mountPath: {{ $v.storage.data.mountPath }}
  readOnly: true
{{- end }}
{{- if and $v.storage.shared.enabled (has .role (list "chief" "ps" "serving")) }}
- name: brook-shared
  mountPath: {{ $v.storage.shared.mountPath }}
  {{- if eq .role "serving" }}
  readOnly: true
  {{- end }}
{{- end }}
{{- with (index $v .role).extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "brook.sharedClaimName" -}}
{{ include "brook.fullname" . }}-shared
{{- end }}

{{/* Checks storage and <role>.extraVolumes / extraVolumeMounts: what the
     schema cannot say (which of the alternatives is set, names that must
     match, paths that must not collide). */}}
{{- define "brook.validateStorage" -}}
{{- $data := .Values.storage.data }}
{{- $shared := .Values.storage.shared }}
{{- if $data.enabled }}
{{- if and $data.existingClaim $data.hostPath }}
{{- fail "storage.data.existingClaim and storage.data.hostPath are exclusive: name a PVC holding the data, or a directory on the node (single-node clusters)" }}
{{- end }}
{{- if not (or $data.existingClaim $data.hostPath) }}
{{- fail "storage.data.enabled needs storage.data.existingClaim (a PVC holding the training data) or storage.data.hostPath (an absolute directory on the node, single-node clusters); or leave it off and mount the data with chief.extraVolumes and trainer.extraVolumes" }}
{{- end }}
{{- end }}
{{- if $shared.enabled }}
{{- $set := list }}
{{- range $k := list "existingClaim" "size" "hostPath" }}{{ if index $shared $k }}{{ $set = append $set (printf "storage.shared.%s" $k) }}{{ end }}{{ end }}
{{- if gt (len $set) 1 }}
{{- fail (printf "%s are exclusive: use an existing ReadWriteMany PVC (existingClaim), have the chart create one (size), or a directory on the node (hostPath, single-node clusters)" (join " and " $set)) }}
{{- end }}
{{- if eq (len $set) 0 }}
{{- fail "storage.shared.enabled needs storage.shared.existingClaim (an existing ReadWriteMany PVC), storage.shared.size (the chart creates a ReadWriteMany PVC of that size, e.g. 100Gi) or storage.shared.hostPath (single-node clusters): checkpoints and exports go there" }}
{{- end }}
{{- if and $shared.size (not (has "ReadWriteMany" $shared.accessModes)) }}
{{- fail (printf "storage.shared.accessModes %v: the chief and every PS mount the shared volume at once, from any node, so the PVC must be ReadWriteMany" $shared.accessModes) }}
{{- end }}
{{- end }}
{{- range $what := list (list "storage.data" $data) (list "storage.shared" $shared) }}
{{- $s := index $what 1 }}
{{- if and $s.hostPath (has ".." (splitList "/" $s.hostPath)) }}
{{- fail (printf "%s.hostPath %s: a \"..\" segment (Kubernetes refuses it); give the directory itself" (index $what 0) $s.hostPath) }}
{{- end }}
{{- end }}
{{- $reserved := list "/tmp" "/var/lib/brook/chief" "/var/lib/brook/ps" "/var/lib/brook/serving" }}
{{- if .Values.tls.enabled }}{{ $reserved = append $reserved .Values.tls.mountPath }}{{ end }}
{{- range $what := list (list "storage.data" $data) (list "storage.shared" $shared) }}
{{- $s := index $what 1 }}
{{- if $s.enabled }}
{{- $p := trimSuffix "/" $s.mountPath }}
{{- range $r := $reserved }}
{{- if or (eq $p $r) (hasPrefix (printf "%s/" $p) $r) (hasPrefix (printf "%s/" $r) $p) }}
{{- fail (printf "%s.mountPath %s: it would overlap %s, which the Brook pods mount already; pick another path" (index $what 0) $s.mountPath $r) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if and $data.enabled $shared.enabled }}
{{- $a := trimSuffix "/" $data.mountPath }}
{{- $b := trimSuffix "/" $shared.mountPath }}
{{- if or (eq $a $b) (hasPrefix (printf "%s/" $a) $b) (hasPrefix (printf "%s/" $b) $a) }}
{{- fail (printf "storage.data.mountPath %s and storage.shared.mountPath %s overlap: the chief mounts both" $data.mountPath $shared.mountPath) }}
{{- end }}
{{- end }}
{{- range $role := list "chief" "ps" "trainer" "serving" }}
{{- $values := index $.Values $role }}
{{- $builtin := include "brook.builtinMounts" (dict "ctx" $ "role" $role) | fromJsonArray }}
{{- $names := list }}
{{- $paths := list }}
{{- range $builtin }}{{ $names = append $names .name }}{{ $paths = append $paths .mountPath }}{{ end }}
{{- range $i, $vol := $values.extraVolumes }}
{{- if has $vol.name $names }}
{{- fail (printf "%s.extraVolumes[%d]: the %s pods have a volume named %q already (%s); rename it" $role $i $role $vol.name (join ", " $names)) }}
{{- end }}
{{- $names = append $names $vol.name }}
{{- end }}
{{- range $i, $m := $values.extraVolumeMounts }}
{{- if not (has $m.name $names) }}
{{- fail (printf "%s.extraVolumeMounts[%d] (mountPath %s): no volume named %q in the %s pods; add it to %s.extraVolumes (volumes there now: %s)" $role $i $m.mountPath $m.name $role $role (join ", " $names)) }}
{{- end }}
{{- $p := trimSuffix "/" $m.mountPath }}
{{- range $q := $paths }}
{{- if eq $p $q }}
{{- fail (printf "%s.extraVolumeMounts[%d]: mountPath %s is mounted already in the %s container; pick another path" $role $i $m.mountPath $role) }}
{{- end }}
{{- if or (hasPrefix (printf "%s/" $p) $q) (hasPrefix (printf "%s/" $q) $p) }}
{{- fail (printf "%s.extraVolumeMounts[%d]: mountPath %s overlaps %s, mounted already in the %s container (one would hide or nest in the other); pick another path" $role $i $m.mountPath $q $role) }}
{{- end }}
{{- end }}
{{- $paths = append $paths $p }}
{{- end }}
{{- end }}
{{- end }}

{{/* Checks values that the schema cannot express. */}}
{{- define "brook.validate" -}}
{{- if and .Values.auth.enabled (not .Values.tls.enabled) }}
{{- fail "auth.enabled=true needs tls.enabled=true: Brook clients (trainers, brook list/submit) refuse to send the chief's token in plaintext to a non-loopback address; keep TLS on, or set auth.enabled=false too" }}
{{- end }}
{{- if .Values.tls.enabled }}
{{- $t := .Values.tls }}
{{- if and $t.existingSecret (or $t.cert $t.key $t.ca) }}
{{- fail "tls.existingSecret and tls.cert/tls.key/tls.ca are exclusive: name a Secret, or give the PEM values (or neither: the chart generates a certificate)" }}
{{- end }}
{{- if ne (empty $t.cert) (empty $t.key) }}
{{- fail "tls.cert and tls.key go together: set both (your certificate and its private key), or neither to have the chart generate them" }}
{{- end }}
{{- if and $t.cert (not $t.ca) }}
{{- if $t.mutual }}
{{- fail "tls.cert/tls.key with tls.mutual=true need tls.ca: the CA that signed tls.cert, which servers verify client certificates against and clients verify servers against" }}
{{- else }}
{{- fail "tls.cert/tls.key need tls.ca: the CA that signed tls.cert, which every Brook client verifies the servers against" }}
{{- end }}
{{- end }}
{{- if and $t.ca (not $t.cert) (not $t.existingSecret) }}
{{- fail "tls.ca is used only with tls.cert and tls.key (a generated certificate brings its own CA)" }}
{{- end }}
{{- end }}
{{- if and .Values.metrics.podMonitor.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.podMonitor.enabled needs metrics.enabled" }}
{{- end }}
{{- if and .Values.metrics.podMonitor.enabled .Values.metrics.serviceMonitor.enabled }}
{{- fail "metrics.podMonitor.enabled and metrics.serviceMonitor.enabled: pick one (with both every pod is scraped twice)" }}
{{- end }}
{{- if and .Values.metrics.podMonitor.enabled (not (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PodMonitor")) }}
{{- fail "metrics.podMonitor.enabled: the cluster has no monitoring.coreos.com/v1 PodMonitor (install the Prometheus Operator CRDs; with `helm template` pass --api-versions monitoring.coreos.com/v1/PodMonitor)" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor")) }}
{{- fail "metrics.serviceMonitor.enabled: the cluster has no monitoring.coreos.com/v1 ServiceMonitor (install the Prometheus Operator CRDs; with `helm template` pass --api-versions monitoring.coreos.com/v1/ServiceMonitor)" }}
{{- end }}
{{- if eq (int .Values.chief.port) (int .Values.metrics.port) }}
{{- fail "chief.port and metrics.port must differ" }}
{{- end }}
{{- if eq (int .Values.ps.port) (int .Values.metrics.port) }}
{{- fail "ps.port and metrics.port must differ" }}
{{- end }}
{{- include "brook.validateStorage" . }}
{{- include "brook.validateServing" . }}
{{- end }}

{{/* Checks serving.* (serving.enabled only). */}}
{{- define "brook.validateServing" -}}
{{- $s := .Values.serving }}
{{- if $s.enabled }}
{{- if not (or .Values.storage.shared.enabled $s.extraVolumeMounts) }}
{{- fail "serving.enabled needs the exports it serves: storage.shared.enabled (the volume the chief and every PS write export.dir to, mounted read-only in the serving pods), or serving.extraVolumes and serving.extraVolumeMounts holding serving.model" }}
{{- end }}
{{- $model := trimSuffix "/" (include "brook.serving.model" .) }}
{{- $under := false }}
{{- $mounts := list }}
{{- range (include "brook.builtinMounts" (dict "ctx" . "role" "serving") | fromJsonArray) }}
{{- if eq .name "brook-shared" }}{{ $mounts = append $mounts .mountPath }}{{ end }}
{{- end }}
{{- range $s.extraVolumeMounts }}{{ $mounts = append $mounts .mountPath }}{{ end }}
{{- range $mounts }}
{{- $p := trimSuffix "/" . }}
{{- if or (eq $model $p) (hasPrefix (printf "%s/" $p) $model) }}{{ $under = true }}{{ end }}
{{- end }}
{{- if not $under }}
{{- fail (printf "serving.model %s is on no volume of the serving pods (mounted: %s): point it under storage.shared.mountPath (where jobs' export.dir is) or under one of serving.extraVolumeMounts" $model (join ", " $mounts | default "none")) }}
{{- end }}
{{- $ports := dict }}
{{- range $what := list (list "serving.httpPort" $s.httpPort) (list "serving.grpcPort" $s.grpcPort) (list "metrics.port" .Values.metrics.port) }}
{{- if or (ne (index $what 0) "metrics.port") $.Values.metrics.enabled }}
{{- $k := toString (int (index $what 1)) }}
{{- if hasKey $ports $k }}
{{- fail (printf "%s and %s are both %s: the serving pods listen on each" (get $ports $k) (index $what 0) $k) }}
{{- end }}
{{- $_ := set $ports $k (index $what 0) }}
{{- end }}
{{- end }}
{{- if $s.hpa.enabled }}
{{- if gt (int $s.hpa.minReplicas) (int $s.hpa.maxReplicas) }}
{{- fail (printf "serving.hpa.minReplicas %v is above serving.hpa.maxReplicas %v" $s.hpa.minReplicas $s.hpa.maxReplicas) }}
{{- end }}
{{- if not (dig "requests" "cpu" "" ($s.resources | default dict)) }}
{{- fail "serving.hpa.enabled needs serving.resources.requests.cpu: the HPA's CPU target is a percentage of it" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
