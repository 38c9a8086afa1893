#!/usr/bin/env bash
# fuzz.sh - build the libFuzzer targets (fuzz/fuzz_*.c) with clang, ASan and
# UBSan into build-fuzz/, then run each for a number of seconds.
#
#   scripts/fuzz.sh                  every target, 60 s each
#   scripts/fuzz.sh 600              every target, 600 s each
#   scripts/fuzz.sh 300 model_safetensors  only fuzz_model_safetensors, 300 s
#
# Environment: FUZZ_ARGS (extra libFuzzer flags, e.g. "-max_len=8192"),
# BUILD_JOBS (parallel compile jobs, default 2).
#
# A target starts from the seeds in fuzz/seeds/<name>/ (read only) and grows
# its corpus in build-fuzz/corpus/<name>/, which later runs reuse. A crash or
# broken invariant leaves its input in build-fuzz/crashes/<name>-*, to be
# replayed with `build-fuzz/fuzz_<name> FILE`; the script then exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH="${1:-60}"
shift || true
case "$SECONDS_EACH" in ''|*[!0-9]*) echo "fuzz.sh: seconds must be a number, got '$SECONDS_EACH'" >&2; exit 2;; esac

if [ $# -gt 0 ]; then
  TARGETS=("$@")
else
  TARGETS=()
  for src in fuzz/fuzz_*.c; do
    name="$(basename "$src" .c)"
    TARGETS+=("${name#fuzz_}")
  done
fi
[ ${#TARGETS[@]} -gt 0 ] || { echo "fuzz.sh: no fuzz targets under fuzz/" >&2; exit 2; }

BUILD=build-fuzz
CC=clang cmake -S . -B "$BUILD" -DSTRATA_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
for t in "${TARGETS[@]}"; do
  if ! cmake --build "$BUILD" -j"${BUILD_JOBS:-2}" --target "fuzz_$t" >"$BUILD/build_$t.log" 2>&1; then
    grep -v -E '^\[ *[0-9]+%\]' "$BUILD/build_$t.log" | tail -40 >&2
    echo "fuzz.sh: building fuzz_$t failed (full log: $BUILD/build_$t.log)" >&2
    exit 1
  fi
done

status=0
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/corpus/$t"
  mkdir -p "$corpus" "$BUILD/crashes"
  seeds=()
  [ -d "fuzz/seeds/$t" ] && seeds=("fuzz/seeds/$t")
  echo "== fuzz_$t: ${SECONDS_EACH}s (corpus $corpus, log $BUILD/fuzz_$t.log)"
  set +e
  # shellcheck disable=SC2086
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    "$BUILD/fuzz_$t" "$corpus" "${seeds[@]}" \
    -max_total_time="$SECONDS_EACH" -artifact_prefix="$BUILD/crashes/$t-" -print_final_stats=1 ${FUZZ_ARGS:-} \
    >"$BUILD/fuzz_$t.log" 2>&1
  rc=$?
  set -e
  # the start, the end (executions, coverage), the final stats, any failure
  grep -E '#[0-9]+[[:space:]]+(INITED|DONE)|ERROR|SUMMARY|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|Test unit written' \
    "$BUILD/fuzz_$t.log" || true
  if [ $rc -ne 0 ]; then
    echo "fuzz.sh: fuzz_$t failed (exit $rc); see $BUILD/fuzz_$t.log and $BUILD/crashes/" >&2
    status=1
  fi
done
exit $status
