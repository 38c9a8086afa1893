#!/usr/bin/env bash
# test.sh - set up, build, and run the whole test suite twice: once in the
# optimized build and once under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh build
echo "== tests (release build)"
(cd build && ctest --output-on-failure -j1)

scripts/setup.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DSTRATA_SANITIZE=ON -DSTRATA_NATIVE=ON
echo "== tests (ASan + UBSan build)"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS=suppressions="$PWD/../tests/lsan.supp" \
  ctest --output-on-failure -j1)

# A short fuzzing pass over every parser target (scripts/fuzz.sh 600 for a real session).
echo "== fuzz smoke (15 s per target)"
scripts/fuzz.sh 15
