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

{{/* Pod annotations shared by every Brook pod; call with (dict "ctx" $ "extra" .Values.ps.podAnnotations "config" "<configmap template>"). */}}
{{- define "brook.podAnnotations" -}}
{{- if and .ctx.Values.metrics.enabled .ctx.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .ctx.Values.metrics.port | quote }}
prometheus.io/path: {{ .ctx.Values.metrics.path | quote }}
{{- end }}
checksum/config: {{ include (print .ctx.Template.BasePath "/configmap.yaml") .ctx | sha256sum }}
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
- name: tmp
  emptyDir:
    sizeLimit: 1Gi
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "brook.tlsSecretName" . }}
    defaultMode: 0440
{{- end }}
{{- end }}

{{- define "brook.commonVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
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

{{/* BROOK_TLS_* settings for a ConfigMap. */}}
{{- define "brook.tlsEnv" -}}
{{- if .Values.tls.enabled }}
BROOK_TLS_CERT: {{ printf "%s/tls.crt" .Values.tls.mountPath | quote }}
BROOK_TLS_KEY: {{ printf "%s/tls.key" .Values.tls.mountPath | quote }}
BROOK_TLS_CA: {{ printf "%s/ca.crt" .Values.tls.mountPath | quote }}
BROOK_TLS_MUTUAL: {{ .Values.tls.mutual | quote }}
{{- end }}
{{- end }}

{{/* Checks values that the schema cannot express. */}}
{{- define "brook.validate" -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) (or (not .Values.tls.cert) (not .Values.tls.key)) }}
{{- fail "tls.enabled: set tls.existingSecret, or both tls.cert and tls.key" }}
{{- end }}
{{- if and .Values.auth.enabled (not .Values.auth.existingSecret) (not .Values.auth.token) }}
{{- fail "auth.enabled: set auth.existingSecret or auth.token" }}
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
{{- end }}
