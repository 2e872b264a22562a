{{- define "flotilla-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "flotilla-agent.fullname" -}}
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

{{- define "flotilla-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "flotilla-agent.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "flotilla-agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "flotilla-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: flotilla
{{- end -}}

{{- define "flotilla-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flotilla-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "flotilla-agent.clusterName" -}}
{{- required "clusterName is required: the name of this cluster on the hub (--set clusterName=...)" .Values.clusterName -}}
{{- end -}}

{{- define "flotilla-agent.agentNamespace" -}}
{{- default .Release.Namespace .Values.agentNamespace -}}
{{- end -}}

{{/* The Secret holding the NATS credentials file: an existing one, or the chart's own made from content. */}}
{{- define "flotilla-agent.natsCredentialsSecret" -}}
{{- if .Values.nats.credentials.secretName -}}
{{- .Values.nats.credentials.secretName -}}
{{- else if .Values.nats.credentials.content -}}
{{- printf "%s-nats-credentials" (include "flotilla-agent.fullname" . | trunc 46 | trimSuffix "-") -}}
{{- end -}}
{{- end -}}

{{/* With nats.registration: the Secret the agent keeps the credentials the hub gave it in (--creds-secret). */}}
{{- define "flotilla-agent.credsSecret" -}}
{{- if .Values.nats.registration.secretName -}}
{{- default (printf "%s-credentials" (include "flotilla-agent.fullname" . | trunc 51 | trimSuffix "-")) .Values.nats.registration.credsSecret -}}
{{- end -}}
{{- end -}}

{{/* The NOTES' words for the agent's TLS to the hub. */}}
{{- define "flotilla-agent.tlsSummary" -}}
TLS{{ with .Values.nats.tls.secretName }} with the CA in Secret {{ . }}{{ end }}{{ if .Values.nats.tls.clientCert }} and a client certificate (mutual TLS){{ end }}
{{- end -}}

{{/* ClusterRole/Binding names carry the namespace: they are cluster-scoped, releases in two namespaces must not clash. */}}
{{- define "flotilla-agent.clusterRoleName" -}}
{{- printf "%s-%s" (include "flotilla-agent.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Unless nats.insecure: the agent has its own identity (credentials or userPassword) and talks TLS (a CA Secret or
a tls:// URL). */}}
{{- define "flotilla-agent.checkNatsSecurity" -}}
{{- $n := .Values.nats -}}
{{- $registration := $n.registration.secretName -}}
{{- if and $registration (or (include "flotilla-agent.natsCredentialsSecret" .) $n.userPassword.secretName) -}}
{{- fail "nats.registration excludes nats.credentials and nats.userPassword: with a registration token the agent connects with the credentials the hub gives it" -}}
{{- end -}}
{{- if and $n.registration.credsSecret (not $registration) -}}
{{- fail "nats.registration.credsSecret is used only with nats.registration.secretName" -}}
{{- end -}}
{{- if not $n.insecure -}}
{{- $cluster := default "<clusterName>" .Values.clusterName -}}
{{- if not (or (include "flotilla-agent.natsCredentialsSecret" .) $n.userPassword.secretName $registration) -}}
{{- fail (printf "nats.credentials is required: the agent's own NATS identity. Issue it from the hub's auth directory with `flotilla auth issue --dir hub-auth --role agent --cluster %s` and `flotilla auth secrets --dir hub-auth --agent %s --kube-namespace %s | kubectl apply -f -`, then set nats.credentials.secretName and nats.tls.secretName to the Secret it prints (flotilla-agent-nats); or, with a hub running the registrar, a registration token (nats.registration). nats.insecure=true connects without credentials (a hub without authentication only)" $cluster $cluster .Release.Namespace) -}}
{{- end -}}
{{- if not (or $n.tls.secretName (hasPrefix "tls://" $n.url)) -}}
{{- fail "nats.tls.secretName is required (the CA of the hub's NATS, key ca.crt; `flotilla auth secrets --agent` puts it in the agent's Secret), or a tls:// nats.url for a server with a public certificate: the creds must not cross the network in clear. nats.insecure=true allows a plain nats:// connection" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The agent's image: [registry/]repository:tag, the registry being global.imageRegistry when set, else
image.registry (none: the bare name, for images loaded into the nodes). */}}
{{- define "flotilla-agent.image" -}}
{{- $registry := default .Values.image.registry ((.Values.global | default dict).imageRegistry) -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $registry) .Values.image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}
