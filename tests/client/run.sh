#!/usr/bin/env bash
# Usage: run.sh CLIENT_TESTS_BINARY SOURCE_DIR [doctest args...]
# Starts the test API server twice on free loopback ports, plain HTTP and HTTPS (a dev CA from
# certs/gen-dev-certs.sh, plus an unrelated CA for the negative TLS test), both with a token
# file, runs the client tests against them and always stops the servers (their logs are printed
# when the tests fail).
set -euo pipefail
bin=$1
src=$2
shift 2

tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server NAME [server.py args...]: starts it, waits for its port file, prints the port.
start_server() {
  local name=$1
  shift
  python3 "$src/tests/apiserver/server.py" --port 0 --port-file "$tmp/$name.port" \
    --token-file "$tmp/token" --log-file "$tmp/$name.log" "$@" >"$tmp/$name.out" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 1 200); do
    [ -s "$tmp/$name.port" ] && break
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the test API server ($name) exited before listening:" >&2
      cat "$tmp/$name.out" >&2
      return 1
    fi
    sleep 0.05
  done
  if [ ! -s "$tmp/$name.port" ]; then
    echo "the test API server ($name) did not write its port file" >&2
    cat "$tmp/$name.out" >&2
    return 1
  fi
}

printf 'client-test-token-1\n' >"$tmp/token"
"$src/certs/gen-dev-certs.sh" "$tmp/certs" >/dev/null
"$src/certs/gen-dev-certs.sh" "$tmp/other-ca" >/dev/null
start_server plain
start_server tls --tls-cert "$tmp/certs/tls.crt" --tls-key "$tmp/certs/tls.key"
plain_port=$(tr -d '[:space:]' <"$tmp/plain.port")
tls_port=$(tr -d '[:space:]' <"$tmp/tls.port")

rc=0
IW_TEST_APISERVER="http://127.0.0.1:$plain_port" \
  IW_TEST_APISERVER_TLS="https://127.0.0.1:$tls_port" \
  IW_TEST_CA_FILE="$tmp/certs/ca.crt" \
  IW_TEST_OTHER_CA_FILE="$tmp/other-ca/ca.crt" \
  IW_TEST_TOKEN_FILE="$tmp/token" \
  "$bin" "$@" || rc=$?
if [ "$rc" -ne 0 ]; then
  for name in plain tls; do
    echo "--- test API server log ($name, last 40 lines)" >&2
    tail -n 40 "$tmp/$name.out" "$tmp/$name.log" >&2 || true
  done
fi
exit "$rc"
