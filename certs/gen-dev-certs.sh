#!/usr/bin/env bash
# Makes a development CA and a serving certificate signed by it, for `make run` and the tests.
#   certs/gen-dev-certs.sh OUT_DIR [SERVICE] [NAMESPACE]
# Writes OUT_DIR/{ca.crt,ca.key,tls.crt,tls.key}. SANs: SERVICE.NAMESPACE.svc,
# SERVICE.NAMESPACE.svc.cluster.local (what the API server dials), localhost and 127.0.0.1.
# (clientAuth too, so the same script makes client certificates for --client-ca-file tests.)
# An existing, still valid pair is kept unless FORCE=1.
set -euo pipefail
out=${1:?usage: gen-dev-certs.sh OUT_DIR [SERVICE] [NAMESPACE]}
svc=${2:-inplace-webhook}
ns=${3:-inplace-webhook}
days=${DAYS:-365}
mkdir -p "$out"
if [ "${FORCE:-0}" != 1 ] && [ -s "$out/tls.crt" ] && [ -s "$out/tls.key" ] && [ -s "$out/ca.crt" ] &&
   openssl x509 -in "$out/tls.crt" -noout -checkend 86400 >/dev/null 2>&1; then
  echo "$out: keeping the existing certificates"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
  -keyout "$tmp/ca.key" -out "$tmp/ca.crt" -days "$days" -subj "/CN=inplace-webhook-dev-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
  -keyout "$tmp/tls.key" -out "$tmp/tls.csr" -subj "/CN=$svc.$ns.svc" 2>/dev/null
cat > "$tmp/ext.cnf" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:$svc.$ns.svc,DNS:$svc.$ns.svc.cluster.local,DNS:$svc,DNS:localhost,IP:127.0.0.1
EXT
openssl x509 -req -in "$tmp/tls.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" -CAcreateserial \
  -out "$tmp/tls.crt" -days "$days" -extfile "$tmp/ext.cnf" 2>/dev/null
chmod 600 "$tmp/ca.key" "$tmp/tls.key"
for f in ca.crt ca.key tls.crt tls.key; do mv "$tmp/$f" "$out/$f"; done
echo "$out: CA and serving certificate for $svc.$ns.svc"
