{{/* Names ------------------------------------------------------------------------------------------------ */}}
{{- define "flotilla-hub.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "flotilla-hub.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<fullname>-<component>", keeping room for the suffix within 63 characters. */}}
{{- define "flotilla-hub.componentName" -}}
{{- printf "%s-%s" (include "flotilla-hub.fullname" .root | trunc 52 | trimSuffix "-") .component -}}
{{- end -}}

{{- define "flotilla-hub.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "flotilla-hub.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels ----------------------------------------------------------------------------------------------- */}}
{{- define "flotilla-hub.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "flotilla-hub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: flotilla
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "poller") */}}
{{- define "flotilla-hub.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flotilla-hub.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Image and NATS --------------------------------------------------------------------------------------- */}}
{{- define "flotilla-hub.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The NATS URL the services use: the embedded server's Service, or nats.url (required then). */}}
{{- define "flotilla-hub.natsUrl" -}}
{{- if .Values.nats.embedded.enabled -}}
{{- printf "nats://%s.%s.svc:%d" (include "flotilla-hub.componentName" (dict "root" . "component" "nats")) .Release.Namespace (int .Values.nats.embedded.port) -}}
{{- else -}}
{{- required "nats.url is required when nats.embedded.enabled is false" .Values.nats.url -}}
{{- end -}}
{{- end -}}

{{/* The size caps every hub service that creates the topology takes (poller, bundler, scheduler). */}}
{{- define "flotilla-hub.storeArgs" -}}
- --store-max-bytes={{ .Values.store.maxBytes }}
{{- with .Values.store.limits }}
{{- $limits := list }}
{{- range $store, $size := . }}
{{- $limits = append $limits (printf "%s=%v" $store $size) }}
{{- end }}
- --store-limits={{ join "," $limits }}
{{- end }}
{{- end -}}

{{/* Garbage collection of the writer's object store (poller: sources, bundler: manifests). */}}
{{- define "flotilla-hub.gcArgs" -}}
- --gc-grace={{ .Values.gc.grace }}
- --gc-interval={{ .Values.gc.interval }}
{{- end -}}

{{/* Arguments every hub service takes. */}}
{{- define "flotilla-hub.commonArgs" -}}
- --nats-url={{ include "flotilla-hub.natsUrl" . }}
- --http-addr=0.0.0.0:{{ .Values.httpPort }}
- --log-level={{ .Values.logLevel }}
- --workspace={{ .Values.workspace }}
{{- if .Values.nats.credentials.secretName }}
- --nats-creds=/etc/flotilla/nats-credentials/{{ .Values.nats.credentials.key }}
{{- end }}
{{- if .Values.nats.tls.secretName }}
- --nats-ca=/etc/flotilla/nats-tls/{{ .Values.nats.tls.caKey }}
{{- if .Values.nats.tls.clientCert }}
- --nats-cert=/etc/flotilla/nats-tls/tls.crt
- --nats-key=/etc/flotilla/nats-tls/tls.key
{{- end }}
{{- end }}
{{- end -}}

{{/* Environment every hub service gets. HOME points at the writable /tmp (helm and kustomize write caches). */}}
{{- define "flotilla-hub.commonEnv" -}}
- name: HOME
  value: /tmp
{{- with .Values.nats.userPassword }}
{{- if .secretName }}
- name: FLOTILLA_NATS_USER
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .usernameKey }}
- name: FLOTILLA_NATS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .passwordKey }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "flotilla-hub.commonVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.nats.credentials.secretName }}
- name: nats-credentials
  mountPath: /etc/flotilla/nats-credentials
  readOnly: true
{{- end }}
{{- if .Values.nats.tls.secretName }}
- name: nats-tls
  mountPath: /etc/flotilla/nats-tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "flotilla-hub.commonVolumes" -}}
- name: tmp
  emptyDir: {}
{{- if .Values.nats.credentials.secretName }}
- name: nats-credentials
  secret:
    secretName: {{ .Values.nats.credentials.secretName }}
    defaultMode: 0440
{{- end }}
{{- if .Values.nats.tls.secretName }}
- name: nats-tls
  secret:
    secretName: {{ .Values.nats.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/* Ports and probes of a hub container. */}}
{{- define "flotilla-hub.portsAndProbes" -}}
ports:
  - name: http
    containerPort: {{ .Values.httpPort }}
    protocol: TCP
{{ include "flotilla-hub.probes" . }}
{{- end -}}

{{/* The probes of a hub container (portsAndProbes; the poller lists its ports itself). */}}
{{- define "flotilla-hub.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  {{- toYaml .Values.probes.liveness | nindent 2 }}
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  {{- toYaml .Values.probes.readiness | nindent 2 }}
{{- end -}}

{{/* Pod-level settings shared by the hub Deployments: (dict "root" $ "values" .Values.poller) */}}
{{- define "flotilla-hub.podSpecCommon" -}}
serviceAccountName: {{ include "flotilla-hub.serviceAccountName" .root }}
automountServiceAccountToken: false
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod template metadata: (dict "root" $ "component" "poller") */}}
{{- define "flotilla-hub.podMetadata" -}}
labels:
  {{- include "flotilla-hub.selectorLabels" . | nindent 2 }}
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .root.Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
