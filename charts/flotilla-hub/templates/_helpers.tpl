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

{{/* The hub components that serve /metrics, /healthz and /readyz on port http, each with its Service (and
NetworkPolicy), all scraped by the ServiceMonitor: a JSON list (fromJsonArray). The gateway only with
gateway.enabled. */}}
{{- define "flotilla-hub.components" -}}
{{- $components := list "poller" "bundler" "scheduler" -}}
{{- if .Values.gateway.enabled -}}
{{- $components = append $components "gateway" -}}
{{- end -}}
{{- toJson $components -}}
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
{{- include "flotilla-hub.imageRef" (dict "root" . "image" .Values.image "tag" (default .Chart.AppVersion .Values.image.tag)) -}}
{{- end -}}

{{/* An image reference: (dict "root" $ "image" <values with registry, repository> "tag" <tag>) -> [registry/]repository:tag,
the registry being global.imageRegistry when set, else the image's own registry (none: the bare name, for images
loaded into the nodes). */}}
{{- define "flotilla-hub.imageRef" -}}
{{- $registry := default .image.registry ((.root.Values.global | default dict).imageRegistry) -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $registry) .image.repository .tag -}}
{{- else -}}
{{- printf "%s:%s" .image.repository .tag -}}
{{- end -}}
{{- end -}}

{{/* The NATS URL the services use: the embedded server's Service (tls:// with nats.auth), or nats.url (required
then). */}}
{{- define "flotilla-hub.natsUrl" -}}
{{- if .Values.nats.embedded.enabled -}}
{{- printf "%s://%s.%s.svc:%d" (ternary "tls" "nats" .Values.nats.auth.enabled) (include "flotilla-hub.componentName" (dict "root" . "component" "nats")) .Release.Namespace (int .Values.nats.embedded.port) -}}
{{- else -}}
{{- required "nats.url is required when nats.embedded.enabled is false" .Values.nats.url -}}
{{- end -}}
{{- end -}}

{{/* NATS identities (nats.auth) -------------------------------------------------------------------------- */}}
{{/* The Secret of one identity: nats.auth.secrets.<who>, or "<fullname>-nats-<who>" (what `flotilla auth secrets`
prints). (dict "root" $ "who" "server" | "poller" | "bundler" | "scheduler") */}}
{{- define "flotilla-hub.authSecret" -}}
{{- default (printf "%s-nats-%s" (include "flotilla-hub.fullname" .root | trunc 40 | trimSuffix "-") .who) (index .root.Values.nats.auth.secrets .who) -}}
{{- end -}}

{{/* How the hub services authenticate to NATS: "perService" (nats.auth: each its own Secret), "shared"
(nats.credentials or nats.userPassword, external NATS only) or "none" (nats.auth.enabled=false). Fails on a
combination that would leave a value unused. */}}
{{- define "flotilla-hub.identity" -}}
{{- $n := .Values.nats -}}
{{- $shared := or $n.credentials.secretName $n.userPassword.secretName -}}
{{- if and $n.embedded.enabled (or $shared $n.tls.secretName) -}}
{{- fail "nats.credentials, nats.userPassword and nats.tls are for an external NATS (nats.embedded.enabled=false): the embedded server's identities and TLS come from nats.auth (charts/README.md)" -}}
{{- end -}}
{{- if and $n.auth.mutualTls (or $shared (not $n.auth.enabled)) -}}
{{- fail "nats.auth.mutualTls needs nats.auth.enabled and the per-service Secrets (with nats.credentials or nats.userPassword, nats.tls.clientCert gives the client certificate)" -}}
{{- end -}}
{{- if $shared -}}
shared
{{- else if $n.auth.enabled -}}
{{- if $n.tls.secretName -}}
{{- fail "nats.tls goes with nats.credentials or nats.userPassword: with nats.auth each service's Secret carries ca.crt (and tls.crt/tls.key with nats.auth.mutualTls)" -}}
{{- end -}}
perService
{{- else -}}
none
{{- end -}}
{{- end -}}

{{/* The embedded server's config with nats.auth (ConfigMap <name>-config, mounted with the server Secret's files
in /etc/nats). Ports, JetStream and the store come from the command line. */}}
{{- define "flotilla-hub.natsServerConf" -}}
# Rendered by the flotilla-hub chart (nats.auth). Operator mode: the operator, system account and Flotilla account
# JWTs (no seeds) from `flotilla auth secrets`; every client presents a user JWT signed by the account.
include "nats-auth.conf"
# The full resolver keeps account JWTs on the data volume, next to JetStream's store: an account JWT pushed through
# the system account (`flotilla auth revoke`) replaces the preloaded one and outlives a restart.
resolver: {
  type: full
  dir: "/data/resolver"
  allow_delete: false
}
tls {
  cert_file: "/etc/nats/tls.crt"
  key_file: "/etc/nats/tls.key"
  ca_file: "/etc/nats/ca.crt"
  {{- if .Values.nats.auth.mutualTls }}
  # mutual TLS: a client without a certificate signed by ca_file is refused
  verify: true
  {{- end }}
  timeout: 2
}
{{- end -}}

{{/* With nats.auth.lookupSecrets: every Secret nats.auth needs exists with its keys, else fail naming what is
missing and the commands that make it. */}}
{{- define "flotilla-hub.checkAuthSecrets" -}}
{{- $auth := .Values.nats.auth -}}
{{- if and $auth.enabled $auth.lookupSecrets -}}
{{- $wanted := list -}}
{{- if .Values.nats.embedded.enabled -}}
{{- $wanted = append $wanted (list "server" (list "nats-auth.conf" "tls.crt" "tls.key" "ca.crt")) -}}
{{- end -}}
{{- if eq (include "flotilla-hub.identity" .) "perService" -}}
{{- $keys := ternary (list "nats.creds" "ca.crt" "tls.crt" "tls.key") (list "nats.creds" "ca.crt") $auth.mutualTls -}}
{{- range list "poller" "bundler" "scheduler" -}}
{{- $wanted = append $wanted (list . $keys) -}}
{{- end -}}
{{- if .Values.gateway.enabled -}}
{{- $wanted = append $wanted (list "gateway" $keys) -}}
{{- end -}}
{{- end -}}
{{- if $auth.registrar.enabled -}}
{{- $wanted = append $wanted (list "registrar" (list "registrar-signing.nk" "account.jwt")) -}}
{{- end -}}
{{- $problems := list -}}
{{- range $wanted -}}
{{- $name := include "flotilla-hub.authSecret" (dict "root" $ "who" (index . 0)) -}}
{{- $secret := lookup "v1" "Secret" $.Release.Namespace $name -}}
{{- if not $secret -}}
{{- $problems = append $problems (printf "Secret %s is missing" $name) -}}
{{- else -}}
{{- range $key := index . 1 -}}
{{- if not (hasKey (default dict $secret.data) $key) -}}
{{- $problems = append $problems (printf "Secret %s has no key %s" $name $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $problems -}}
{{- fail (printf "nats.auth: %s (namespace %s). The hub's NATS identities and TLS come from `flotilla auth init`: run `flotilla auth init --dir hub-auth %s` once, then `flotilla auth secrets --dir hub-auth --kube-namespace %s --release %s%s | kubectl apply -f -`, and install again. Renderers without a cluster (helm template, helm lint, GitOps tools) cannot look Secrets up: set nats.auth.lookupSecrets=false there. nats.auth.enabled=false runs NATS without authentication or TLS" (join "; " $problems) .Release.Namespace (ternary "--mutual-tls" "--tls" $auth.mutualTls) .Release.Namespace .Release.Name (ternary " --registrar" "" $auth.registrar.enabled)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* nats.auth.registrar: only with the per-service identities (the registrar's key belongs to the account the
chart's server trusts), and agentCredsTtl only with the registrar. */}}
{{- define "flotilla-hub.checkRegistrar" -}}
{{- $r := .Values.nats.auth.registrar -}}
{{- if and $r.enabled (ne (include "flotilla-hub.identity" .) "perService") -}}
{{- fail "nats.auth.registrar needs nats.auth.enabled and the per-service Secrets (its signing key belongs to the account of `flotilla auth init`; with nats.credentials or nats.userPassword there is none)" -}}
{{- end -}}
{{- if and $r.agentCredsTtl (not $r.enabled) -}}
{{- fail "nats.auth.registrar.agentCredsTtl is used only with nats.auth.registrar.enabled=true" -}}
{{- end -}}
{{- end -}}

{{/* The scheduler's registrar arguments (--registration-signing-key, ...), from the registrar Secret mounted at
/etc/flotilla/registrar. */}}
{{- define "flotilla-hub.registrarArgs" -}}
{{- $r := .Values.nats.auth.registrar -}}
{{- if $r.enabled }}
- --registration-signing-key=/etc/flotilla/registrar/registrar-signing.nk
- --registration-account=/etc/flotilla/registrar/account.jwt
{{- with $r.agentCredsTtl }}
- --agent-creds-ttl={{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The size caps every hub service that creates the topology takes (poller, bundler, scheduler). */}}
{{- define "flotilla-hub.storeArgs" -}}
{{- if and (gt (int .Values.store.replicas) 1) .Values.nats.embedded.enabled }}
{{- fail (printf "store.replicas=%v needs a JetStream cluster of at least that many nodes: the embedded NATS is one server. Point the hub at a NATS cluster (nats.embedded.enabled=false, nats.url listing its nodes), or keep store.replicas=1" .Values.store.replicas) }}
{{- end }}
- --store-max-bytes={{ .Values.store.maxBytes }}
- --store-replicas={{ .Values.store.replicas }}
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

{{/* Arguments every hub service takes: (dict "root" $ "component" "poller"). */}}
{{- define "flotilla-hub.commonArgs" -}}
{{- $root := .root -}}
{{- $n := $root.Values.nats -}}
- --nats-url={{ include "flotilla-hub.natsUrl" $root }}
- --http-addr=0.0.0.0:{{ $root.Values.httpPort }}
- --log-level={{ $root.Values.logLevel }}
- --workspace={{ $root.Values.workspace }}
{{- if eq (include "flotilla-hub.identity" $root) "perService" }}
- --nats-creds=/etc/flotilla/nats/nats.creds
- --nats-ca=/etc/flotilla/nats/ca.crt
{{- if $n.auth.mutualTls }}
- --nats-cert=/etc/flotilla/nats/tls.crt
- --nats-key=/etc/flotilla/nats/tls.key
{{- end }}
{{- end }}
{{- if $n.credentials.secretName }}
- --nats-creds=/etc/flotilla/nats-credentials/{{ $n.credentials.key }}
{{- end }}
{{- if $n.tls.secretName }}
- --nats-ca=/etc/flotilla/nats-tls/{{ $n.tls.caKey }}
{{- if $n.tls.clientCert }}
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

{{/* (dict "root" $ "component" "poller") */}}
{{- define "flotilla-hub.commonVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if eq (include "flotilla-hub.identity" .root) "perService" }}
- name: nats-identity
  mountPath: /etc/flotilla/nats
  readOnly: true
{{- end }}
{{- if .root.Values.nats.credentials.secretName }}
- name: nats-credentials
  mountPath: /etc/flotilla/nats-credentials
  readOnly: true
{{- end }}
{{- if .root.Values.nats.tls.secretName }}
- name: nats-tls
  mountPath: /etc/flotilla/nats-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* (dict "root" $ "component" "poller"): the component's own NATS identity Secret with nats.auth. */}}
{{- define "flotilla-hub.commonVolumes" -}}
{{- $n := .root.Values.nats -}}
- name: tmp
  emptyDir: {}
{{- if eq (include "flotilla-hub.identity" .root) "perService" }}
- name: nats-identity
  secret:
    secretName: {{ include "flotilla-hub.authSecret" (dict "root" .root "who" .component) }}
    defaultMode: 0440
{{- end }}
{{- if $n.credentials.secretName }}
- name: nats-credentials
  secret:
    secretName: {{ $n.credentials.secretName }}
    defaultMode: 0440
{{- end }}
{{- if $n.tls.secretName }}
- name: nats-tls
  secret:
    secretName: {{ $n.tls.secretName }}
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

{{/* Pod-level settings shared by the hub Deployments: (dict "root" $ "values" .Values.poller ["serviceAccount" name]) */}}
{{- define "flotilla-hub.podSpecCommon" -}}
{{- if .serviceAccount }}
{{- /* The gateway: its own ServiceAccount, whose token it uses to reach the API server. */}}
serviceAccountName: {{ .serviceAccount }}
automountServiceAccountToken: true
{{- else }}
serviceAccountName: {{ include "flotilla-hub.serviceAccountName" .root }}
automountServiceAccountToken: false
{{- end }}
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

{{/* Pod template metadata: (dict "root" $ "component" "poller" ["annotations" (dict ...)]) */}}
{{- define "flotilla-hub.podMetadata" -}}
labels:
  {{- include "flotilla-hub.selectorLabels" . | nindent 2 }}
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with merge (dict) (default dict .annotations) .root.Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Fleet's CRDs and the gateway (rbac.yaml, gateway.yaml) ---------------------------------------------- */}}
{{/* The gateway's ServiceAccount, "<fullname>-gateway", the one identity that may write Bundles and
BundleDeployments (gateway.enabled). */}}
{{- define "flotilla-hub.gatewayServiceAccount" -}}
{{- include "flotilla-hub.componentName" (dict "root" . "component" "gateway") -}}
{{- end -}}

{{/* The gateway's user name as the API server sees it: system:serviceaccount:<namespace>:<name>. */}}
{{- define "flotilla-hub.gatewayUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "flotilla-hub.gatewayServiceAccount" .) -}}
{{- end -}}
