{{/* The chart's name, or nameOverride. */}}
{{- define "flowd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: the release's, with the chart's unless it already holds it. */}}
{{- define "flowd.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The labels of every object. */}}
{{- define "flowd.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "flowd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The labels that select the instances; the migration Job's pods lack the component. */}}
{{- define "flowd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flowd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "flowd.serverSelectorLabels" -}}
{{ include "flowd.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{- define "flowd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "flowd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "flowd.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{- define "flowd.keysSecret" -}}
{{- required "keys.existingSecret: name the existing Secret holding FLOWD_KEY_ENCRYPTION_KEY, FLOWD_SESSION_KEY and FLOWD_DATA_KEY" .Values.keys.existingSecret }}
{{- end }}

{{/* The pod's security context: the image's non-root user, the runtime's seccomp profile. */}}
{{- define "flowd.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ int .Values.runAsUser }}
runAsGroup: {{ int .Values.runAsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Every container's security context: nothing to escalate to, nothing to write. */}}
{{- define "flowd.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The variables a chart sets itself, and the names that hold secrets: neither
may come from env or otel, so that a secret never lands in a rendered object.
*/}}
{{- define "flowd.checkEnv" -}}
{{- $owned := list "FLOWD_ADDR" "FLOWD_OPS_ADDR" "FLOWD_BASE_URL" "FLOWD_MIGRATE_ON_START" "FLOWD_CITUS" "FLOWD_SHUTDOWN_DELAY" "GOMEMLIMIT" }}
{{- $secret := "^(DATABASE_URL|FLOWD_(KEY_ENCRYPTION_KEY|SESSION_KEY|DATA_KEY|DATA_KEY_PREVIOUS)|.*_SECRET|.*PASSWORD.*|.*_TOKEN|OTEL_EXPORTER_OTLP(_TRACES)?_HEADERS)$" }}
{{- range $name, $_ := .Values.env }}
{{- if has $name $owned }}
{{- fail (printf "env.%s: the chart sets it; see the values baseUrl, ports, migrations, database.citus, shutdownDelay and resources" $name) }}
{{- end }}
{{- if regexMatch $secret $name }}
{{- fail (printf "env.%s holds a secret: name its Secret in secretEnv (or keys/database) instead" $name) }}
{{- end }}
{{- if hasPrefix "OTEL_" $name }}
{{- fail (printf "env.%s: put OpenTelemetry's variables in otel" $name) }}
{{- end }}
{{- end }}
{{- range $name, $_ := .Values.otel }}
{{- if not (hasPrefix "OTEL_" $name) }}
{{- fail (printf "otel.%s: only OTEL_* variables go here; others go in env" $name) }}
{{- end }}
{{- if regexMatch $secret $name }}
{{- fail (printf "otel.%s holds a secret: name its Secret in secretEnv instead" $name) }}
{{- end }}
{{- end }}
{{- range $name, $ref := .Values.secretEnv }}
{{- if or (has $name $owned) (hasKey $.Values.env $name) (hasKey $.Values.otel $name) }}
{{- fail (printf "secretEnv.%s is set elsewhere too" $name) }}
{{- end }}
{{- if not (and (kindIs "map" $ref) $ref.name $ref.key) }}
{{- fail (printf "secretEnv.%s: give the Secret as {name: …, key: …}" $name) }}
{{- end }}
{{- end }}
{{- end }}

{{/* DATABASE_URL from its Secret, and FLOWD_CITUS: what every flowd command needs. */}}
{{- define "flowd.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.existingSecret | default (include "flowd.keysSecret" .) }}
      key: {{ required "database.urlKey: name the Secret's key holding the PostgreSQL URL" .Values.database.urlKey }}
- name: FLOWD_CITUS
  value: {{ .Values.database.citus | toString | quote }}
{{- end }}

{{/* Settings from env, secretEnv and otel, in a stable order. */}}
{{- define "flowd.extraEnv" -}}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- range $name, $value := .Values.otel }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- range $name, $ref := .Values.secretEnv }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name }}
      key: {{ $ref.key }}
      {{- if $ref.optional }}
      optional: true
      {{- end }}
{{- end }}
{{- end }}

{{/* GOMEMLIMIT as 90 % of the memory limit, so that the collector works harder before the kernel kills. */}}
{{- define "flowd.gomemlimit" -}}
{{- $limit := dig "limits" "memory" "" .Values.resources | toString }}
{{- if $limit }}
{{- if hasSuffix "Gi" $limit }}
{{- printf "%dMiB" (div (mul (trimSuffix "Gi" $limit | int) 1024 9) 10) }}
{{- else if hasSuffix "Mi" $limit }}
{{- printf "%dMiB" (div (mul (trimSuffix "Mi" $limit | int) 9) 10) }}
{{- else }}
{{- fail (printf "resources.limits.memory: give it in Mi or Gi, not %q" $limit) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The host of baseUrl, for the Ingress. */}}
{{- define "flowd.host" -}}
{{- .Values.ingress.host | default (urlParse (include "flowd.baseUrl" .)).hostname }}
{{- end }}

{{- define "flowd.baseUrl" -}}
{{- $u := required "baseUrl: give flowd's public address, e.g. https://consent.example.com (FLOWD_BASE_URL)" .Values.baseUrl }}
{{- if not (regexMatch "^https?://[^/?#]+(/[^?#]*)?$" $u) }}
{{- fail (printf "baseUrl: %q is not an absolute http(s) URL without a query" $u) }}
{{- end }}
{{- $u }}
{{- end }}
