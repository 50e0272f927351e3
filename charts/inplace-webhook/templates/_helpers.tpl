{{/* Chart name, truncated to the 63 characters of a label value. */}}
{{- define "inplace-webhook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the prefix of every resource name. */}}
{{- define "inplace-webhook.fullname" -}}
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

{{/* Chart name and version, for the helm.sh/chart label. */}}
{{- define "inplace-webhook.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the webhook pods; never change them (Deployment selectors are immutable). */}}
{{- define "inplace-webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "inplace-webhook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels on every object of the chart. */}}
{{- define "inplace-webhook.labels" -}}
helm.sh/chart: {{ include "inplace-webhook.chart" . }}
{{ include "inplace-webhook.selectorLabels" . }}
app.kubernetes.io/version: {{ include "inplace-webhook.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Image tag: image.tag, else the chart's appVersion. */}}
{{- define "inplace-webhook.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/* ServiceAccount name. */}}
{{- define "inplace-webhook.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "inplace-webhook.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The webhook pods' ServiceAccount: no RBAC, no token mounted (DESIGN.md §9.4). */}}
{{- define "inplace-webhook.webhookServiceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- printf "%s-webhook" (include "inplace-webhook.serviceAccountName" .) | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- "default" }}
{{- end }}
{{- end }}

{{/* The controller Deployment (the loop) and its Service (/loopz, /metrics on the probe port). */}}
{{- define "inplace-webhook.controllerName" -}}
{{- printf "%s-controller" (include "inplace-webhook.fullname" . | trunc 52 | trimSuffix "-") }}
{{- end }}

{{- define "inplace-webhook.controllerSelectorLabels" -}}
{{ include "inplace-webhook.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{/* What the webhook pods poll (--loop-status-url). */}}
{{- define "inplace-webhook.loopStatusUrl" -}}
{{- printf "http://%s.%s.svc:%d/loopz" (include "inplace-webhook.controllerName" .) .Release.Namespace (int64 .Values.server.probePort) }}
{{- end }}

{{/* The identity the API server reports for the loop's own requests (--controller-user). */}}
{{- define "inplace-webhook.controllerUser" -}}
{{- if .Values.controllerUser }}
{{- .Values.controllerUser }}
{{- else }}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "inplace-webhook.serviceAccountName" .) }}
{{- end }}
{{- end }}

{{/*
matchConditions of both Deployment webhooks (CEL, GA since Kubernetes 1.30, the chart's floor): the API server
does not call them at all
- for a Deployment being deleted (deletionTimestamp set) or a DELETE: the garbage collector's removal of the
  foregroundDeletion finalizer (kubectl delete --cascade=foreground, Argo CD's default) and other writes of a
  deletion go through even while no webhook pod answers (failurePolicy Fail); the webhook admits them unchanged
  anyway (DESIGN.md §8.7);
- for the loop's own writes (--controller-user, the same value): the webhook exempts exactly that user, so its
  state changes and final unpause never wait on a webhook pod (DESIGN.md §4a).
Both expressions are false, never an error, for every request (a DELETE has no object: `&&` is false before
it is read); an error would be judged by failurePolicy.
*/}}
{{- define "inplace-webhook.deploymentMatchConditions" -}}
- name: not-being-deleted
  expression: request.operation != 'DELETE' && !has(object.metadata.deletionTimestamp)
- name: not-the-controller
  expression: request.userInfo.username != {{ include "inplace-webhook.controllerUser" . | quote }}
{{- end }}

{{/* The Service the API server calls, and the DNS names it verifies in the serving certificate. */}}
{{- define "inplace-webhook.serviceName" -}}
{{- include "inplace-webhook.fullname" . }}
{{- end }}

{{- define "inplace-webhook.dnsNames" -}}
{{- $svc := include "inplace-webhook.serviceName" . -}}
- {{ printf "%s.%s.svc" $svc .Release.Namespace }}
- {{ printf "%s.%s.svc.cluster.local" $svc .Release.Namespace }}
{{- end }}

{{/* The Secret with tls.crt/tls.key that the pods mount. */}}
{{- define "inplace-webhook.tlsSecretName" -}}
{{- if eq .Values.certificates.mode "secret" }}
{{- required "certificates.secret.name is required when certificates.mode is secret" .Values.certificates.secret.name }}
{{- else }}
{{- printf "%s-tls" (include "inplace-webhook.fullname" .) }}
{{- end }}
{{- end }}

{{/* cert-manager object names (mode certManager). */}}
{{- define "inplace-webhook.certManagerServingCertificate" -}}
{{- printf "%s-serving" (include "inplace-webhook.fullname" .) }}
{{- end }}

{{/*
Certificates for mode helm, as YAML {caCert, tlsCert, tlsKey, caBundle} (PEM). Re-uses the Secret that an
earlier install wrote (lookup; empty under `helm template`/--dry-run, where fresh ones are generated) so
that the CA, and with it every webhook's caBundle, stays the same across upgrades. With
certificates.helm.rotate a new CA and certificate are generated, and caBundle trusts the new CA and the
old one: the pods keep serving the old certificate until the kubelet refreshes the Secret volume (up to
a minute or two), and the API server must accept both meanwhile. Called once per render, in
webhooks.yaml, which writes the Secret and both configurations.
*/}}
{{- define "inplace-webhook.helmCertificates" -}}
{{- $secretName := include "inplace-webhook.tlsSecretName" . }}
{{- $old := get (lookup "v1" "Secret" .Release.Namespace $secretName) "data" | default dict }}
{{- $oldCA := get $old "ca.crt" | b64dec }}
{{- if and $oldCA (get $old "tls.crt") (get $old "tls.key") (not .Values.certificates.helm.rotate) }}
caCert: {{ $oldCA | quote }}
tlsCert: {{ get $old "tls.crt" | b64dec | quote }}
tlsKey: {{ get $old "tls.key" | b64dec | quote }}
caBundle: {{ $oldCA | quote }}
{{- else }}
{{- $days := int .Values.certificates.helm.validityDays }}
{{- $ca := genCA (printf "%s-ca" (include "inplace-webhook.fullname" .)) $days }}
{{- $svc := include "inplace-webhook.serviceName" . }}
{{- $cn := printf "%s.%s.svc" $svc .Release.Namespace }}
{{- $cert := genSignedCert $cn nil (list $cn (printf "%s.cluster.local" $cn)) $days $ca }}
caCert: {{ $ca.Cert | quote }}
tlsCert: {{ $cert.Cert | quote }}
tlsKey: {{ $cert.Key | quote }}
caBundle: {{ printf "%s%s" $ca.Cert (ternary (printf "\n%s" $oldCA) "" (ne $oldCA "")) | quote }}
{{- end }}
{{- end }}

{{/* caBundle for mode secret: accepts PEM or base64 of PEM, returns base64. */}}
{{- define "inplace-webhook.secretCABundle" -}}
{{- $bundle := required "certificates.secret.caBundle is required when certificates.mode is secret" .Values.certificates.secret.caBundle }}
{{- if contains "-----BEGIN" $bundle }}
{{- $bundle | b64enc }}
{{- else }}
{{- $bundle | replace "\n" "" | trim }}
{{- end }}
{{- end }}

{{/* clientConfig.service of every webhook, without the path. */}}
{{- define "inplace-webhook.webhookService" -}}
name: {{ include "inplace-webhook.serviceName" . }}
namespace: {{ .Release.Namespace }}
port: {{ .Values.service.port }}
{{- end }}

{{/*
namespaceSelector of every webhook: never kube-system, never the release namespace (a webhook that gates
the namespace it runs in can deadlock its own recovery), nor webhooks.excludeNamespaces. Namespaces carry
kubernetes.io/metadata.name, set by the API server.
*/}}
{{- define "inplace-webhook.namespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
      {{- toYaml (concat (list "kube-system" .Release.Namespace) .Values.webhooks.excludeNamespaces | uniq) | nindent 6 }}
{{- end }}

{{/* objectSelector of every webhook: the opt-in label (on the Deployment and on its pod template). */}}
{{- define "inplace-webhook.objectSelector" -}}
matchLabels:
  inplace-webhook.io/enabled: "true"
{{- end }}
