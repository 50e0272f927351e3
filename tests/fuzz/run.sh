#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS, with a corpus seeded from tests/fixtures/.
#   tests/fuzz/run.sh BUILD_DIR SECONDS
# Crashes are written to BUILD_DIR/fuzz/crashes/<target>/ and fail the run; turn each into a
# regression case under tests/fuzz/regressions/ (replayed by the unit tests).
set -euo pipefail
build=${1:?build dir}
seconds=${2:-60}
src=$(cd "$(dirname "$0")/../.." && pwd)
work="$build/fuzz"
mkdir -p "$work"

seed_review() {
  local dir=$1
  mkdir -p "$dir"
  local i=0
  while IFS= read -r -d '' f; do
    for route in 0 1 2 3; do
      { printf "\\x$(printf %02x $route)"; cat "$f"; } > "$dir/seed-$i-$route"
    done
    i=$((i + 1))
  done < <(find "$src/tests/fixtures" -name '*.json' ! -name '*.expected.json' -print0)
}

seed_patch() {
  local dir=$1
  mkdir -p "$dir"
  local i=0
  local files=()
  while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$src/tests/fixtures" -name '*.json' ! -name '*.expected.json' -print0 | sort -z)
  for ((j = 0; j + 1 < ${#files[@]}; j++)); do
    { cat "${files[$j]}"; printf '\0'; cat "${files[$((j + 1))]}"; } > "$dir/seed-$i"
    i=$((i + 1))
  done
}

seed_http() {
  local dir=$1
  mkdir -p "$dir"
  local body
  body=$(head -c 1500 "$src/tests/fixtures/cases/mutate-pods/"*.json 2>/dev/null | head -c 1500)
  printf 'POST /mutate/pods?timeout=10s HTTP/1.1\r\nHost: svc:443\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' "${#body}" "$body" > "$dir/seed-length"
  printf 'POST /mutate/pods HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n' > "$dir/seed-chunked"
  printf 'GET /healthz HTTP/1.1\r\n\r\nGET /readyz HTTP/1.0\r\nConnection: keep-alive\r\n\r\nPOST /x HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc' > "$dir/seed-pipelined"
  printf 'POST /validate/pods HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n0123456789' > "$dir/seed-continue"
  printf '\r\n\r\nPUT / HTTP/2.0\r\nA: b\r\n folded\r\n\r\n' > "$dir/seed-bad"
}

status=0
for target in fuzz_review fuzz_json_patch fuzz_http; do
  corpus="$work/corpus/$target"
  crashes="$work/crashes/$target"
  mkdir -p "$crashes"
  if [ ! -d "$corpus" ]; then
    case $target in
      fuzz_review) seed_review "$corpus" ;;
      fuzz_json_patch) seed_patch "$corpus" ;;
      fuzz_http) seed_http "$corpus" ;;
    esac
  fi
  # Regression inputs found earlier are part of the corpus too.
  if [ -d "$src/tests/fuzz/regressions/$target" ]; then cp -n "$src/tests/fuzz/regressions/$target"/* "$corpus"/ 2>/dev/null || true; fi
  echo "== $target for ${seconds}s (corpus $(ls "$corpus" | wc -l) files)"
  if ! "$build/$target" "$corpus" -max_total_time="$seconds" -max_len=1048576 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$crashes/" -print_final_stats=1 2>"$work/$target.log"; then
    status=1
    echo "!! $target found a crash: $(ls "$crashes")"
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|Done [0-9]+ runs" "$work/$target.log" || tail -3 "$work/$target.log"
done
exit $status
