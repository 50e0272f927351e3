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

status=0
for target in fuzz_review fuzz_json_patch; do
  corpus="$work/corpus/$target"
  crashes="$work/crashes/$target"
  mkdir -p "$crashes"
  if [ ! -d "$corpus" ]; then
    if [ "$target" = fuzz_review ]; then seed_review "$corpus"; else seed_patch "$corpus"; fi
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
