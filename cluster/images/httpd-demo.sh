#!/bin/sh
# The entrypoint of localhost/httpd-demo: busybox httpd in the foreground on $PORT (default 8080), serving
# /srv/www (/ names the version, /healthz says ok, /cgi-bin/slow?N answers after N seconds), stopped
# gracefully. On SIGTERM or SIGINT it keeps serving for STOP_DELAY_SECONDS (default 0: the time the
# endpoints take to drop the pod), then closes the listener (SIGTERM to httpd's accepting process), waits
# up to DRAIN_SECONDS (default 30) for the requests in flight (each one a process httpd forked) to end,
# and exits 0. The wait matters: when a container's PID 1 exits, the kernel kills everything left in it.
# shellcheck disable=SC2317  # stop() and its helpers run from the trap
set -u
port="${PORT:-8080}"
delay="${STOP_DELAY_SECONDS:-0}"
drain="${DRAIN_SECONDS:-30}"
case "$delay" in '' | *[!0-9]*) echo "httpd-demo: STOP_DELAY_SECONDS=$delay is not a number of seconds" >&2; exit 2 ;; esac
case "$drain" in '' | *[!0-9]*) echo "httpd-demo: DRAIN_SECONDS=$drain is not a number of seconds" >&2; exit 2 ;; esac

log() { echo "httpd-demo: $*" >&2; }

# comm PID: the process's name as /proc/PID/stat has it, "(httpd)".
comm() { read -r _ c _ <"/proc/$1/stat" 2>/dev/null && echo "$c"; }

# inflight NAME: is a live (not zombie) process named NAME, other than this shell, still there?
inflight() {
  for f in /proc/[0-9]*/stat; do
    read -r pid c state _ <"$f" 2>/dev/null || continue
    [ "$pid" != "$$" ] && [ "$c" = "$1" ] && [ "$state" != Z ] && return 0
  done
  return 1
}

stop() {
  trap '' TERM INT
  log "stopping: serving ${delay}s more, then closing the listener"
  [ "$delay" -gt 0 ] && sleep "$delay"
  name="$(comm "$httpd")"
  kill -TERM "$httpd" 2>/dev/null
  wait "$httpd" 2>/dev/null
  i=0
  while [ -n "$name" ] && inflight "$name" && [ "$i" -lt $((drain * 10)) ]; do
    sleep 0.1
    i=$((i + 1))
  done
  inflight "$name" && log "requests still in flight after ${drain}s; exiting anyway"
  log "stopped"
  exit 0
}

trap stop TERM INT
httpd -f -p "$port" -h /srv/www &
httpd=$!
log "$(tr -d '\n' </srv/www/index.html) listening on :$port (pid $httpd)"
wait "$httpd"
rc=$?
log "httpd exited with status $rc"
exit "$rc"
