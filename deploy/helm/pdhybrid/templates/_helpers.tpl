{{- define "pdhybrid.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "pdhybrid.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The selector of one component (gateway, prefill, decode, colo). */}}
{{- define "pdhybrid.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "pdhybrid.colo" -}}
{{- eq (.Values.gateway.config.mechanism | default "kvcache-centric") "pd-colo" -}}
{{- end -}}

{{/* The worker roles the chart deploys, as a list. */}}
{{- define "pdhybrid.roles" -}}
{{- if .Values.workers.enabled -}}
{{- if eq (include "pdhybrid.colo" .) "true" -}}["colo"]{{- else -}}["prefill", "decode"]{{- end -}}
{{- else -}}[]{{- end -}}
{{- end -}}
