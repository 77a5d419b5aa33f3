{{/*
Names. Kubernetes names used as DNS labels (Services) are at most 63 characters, and the chart appends
suffixes of up to 13 characters ("-webhook-cert"), so the base name is cut to 50 characters and any
trailing "-" left by the cut is dropped.
*/}}
{{- define "llmaz.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: "<release>-<chart>", or the release name alone when it already contains the
chart name (release "llmaz" gives "llmaz", not "llmaz-llmaz"). Cut to 50 characters (see above).
*/}}
{{- define "llmaz.fullname" -}}
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

{{/* Chart name and version for the helm.sh/chart label (label values are at most 63 characters). */}}
{{- define "llmaz.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object of the chart. */}}
{{- define "llmaz.labels" -}}
helm.sh/chart: {{ include "llmaz.chart" . }}
{{ include "llmaz.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: llmaz
{{- end }}

{{/*
Selector labels: fixed per release and component, never user labels (a selector cannot change after
the Deployment exists).
*/}}
{{- define "llmaz.selectorLabels" -}}
app.kubernetes.io/name: {{ include "llmaz.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The operator's ServiceAccount name. */}}
{{- define "llmaz.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create }}
{{- default (include "llmaz.fullname" .) .Values.operator.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.operator.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The llmaz image: repository@digest when a digest is set, else repository:tag (tag defaults to appVersion). */}}
{{- define "llmaz.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "llmaz.webhookServiceName" -}}
{{- printf "%s-webhook" (include "llmaz.fullname" .) }}
{{- end }}

{{- define "llmaz.webhookSecretName" -}}
{{- printf "%s-webhook-cert" (include "llmaz.fullname" .) }}
{{- end }}

{{- define "llmaz.webhookEnabled" -}}
{{- if .Values.operator.config.webhook.enabled }}true{{ end }}
{{- end }}

{{/* Where the init container installs extra plugin packages (on the operator's PYTHONPATH). */}}
{{- define "llmaz.pluginsDir" -}}
/opt/llmaz/plugins
{{- end }}

{{/*
The operator's config file: operator.config plus what the chart knows better than the user: the
Lease (named after the release, in its namespace; leader election on with more than one replica),
backend image overrides from backendRuntime, and the model loader image (the llmaz image).
*/}}
{{- define "llmaz.operatorConfig" -}}
{{- $cfg := deepCopy .Values.operator.config }}
{{- $le := deepCopy (default dict $cfg.leaderElection) }}
{{- if gt (int .Values.operator.replicas) 1 }}
{{- $_ := set $le "enabled" true }}
{{- end }}
{{- $_ := set $le "leaseName" (include "llmaz.fullname" .) }}
{{- $_ := set $le "leaseNamespace" .Release.Namespace }}
{{- $_ := set $cfg "leaderElection" $le }}
{{- $backends := dict }}
{{- range $name, $backend := .Values.backendRuntime }}
{{- $override := dict }}
{{- with $backend.image }}
{{- with .repository }}{{ $_ := set $override "image" . }}{{ end }}
{{- with .tag }}{{ $_ := set $override "version" (toString .) }}{{ end }}
{{- end }}
{{- $_ := set $backends $name $override }}
{{- end }}
{{- if $backends }}
{{- $_ := set $cfg "backends" $backends }}
{{- end }}
{{- $loader := deepCopy (default dict $cfg.modelLoader) }}
{{- if not $loader.image }}
{{- $_ := set $loader "image" (include "llmaz.image" .) }}
{{- end }}
{{- $_ := set $cfg "modelLoader" $loader }}
{{- if .Values.gateway.create }}
{{- $integrations := deepCopy (default dict $cfg.integrations) }}
{{- if not $integrations.gatewayNamespace }}
{{- $_ := set $integrations "gatewayNamespace" .Release.Namespace }}
{{- end }}
{{- $_ := set $cfg "integrations" $integrations }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* Security context of every container of the chart (Pod Security "restricted"). */}}
{{- define "llmaz.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
Name of cluster-scoped objects (ClusterRole, ClusterRoleBinding, webhook configurations): the
fullname plus the release namespace, so releases of the same name in two namespaces do not collide.
These names are not DNS labels (up to 253 characters), so nothing is cut.
*/}}
{{- define "llmaz.clusterScopedName" -}}
{{- printf "%s-%s" (include "llmaz.fullname" .) .Release.Namespace }}
{{- end }}

{{/*
The Envoy Service of the Gateway the chart creates: "<fullname>-gateway" (fullname is at most 50
characters, so this is a DNS label), set through the Gateway's EnvoyProxy.
*/}}
{{- define "llmaz.gatewayServiceName" -}}
{{- printf "%s-gateway" (include "llmaz.fullname" .) }}
{{- end }}

{{/*
The OpenAI API base URL of that Gateway, as pods of the release namespace reach it. Envoy Gateway runs
the proxy (and its Service) in its own namespace: the release's, when installed with this chart.
"<service>.<namespace>.svc" resolves under any cluster domain.
*/}}
{{- define "llmaz.gatewayURL" -}}
{{- printf "http://%s.%s.svc:%d/v1" (include "llmaz.gatewayServiceName" .) .Release.Namespace (int .Values.gateway.port) }}
{{- end }}

{{/*
The ConfigMap that gives Open WebUI the gateway URL (OPENAI_API_BASE_URL). The open-webui chart takes
values without templates, so values.global.yaml names it literally in open-webui.extraEnvFrom; like the
open-webui chart's own objects, its name does not depend on the release.
*/}}
{{- define "llmaz.openWebuiEnvName" -}}
open-webui-llmaz-gateway
{{- end }}
