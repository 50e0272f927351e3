#!/bin/sh
# /cgi-bin/slow?N of localhost/httpd-demo: starts the response, waits N seconds (default 1, at most 60),
# then ends it with the line / serves ("httpd-demo v1"). A request to cut short by a stop that is not
# graceful.
n="${QUERY_STRING:-1}"
case "$n" in '' | *[!0-9]*) n=1 ;; esac
[ "$n" -gt 60 ] && n=60
printf 'Content-Type: text/plain\r\n\r\n'
echo "waiting ${n}s"
sleep "$n"
cat /srv/www/index.html
