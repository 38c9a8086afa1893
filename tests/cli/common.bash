# common.bash - what the command-line tests share. Each tests/cli/*.sh runs as
# `bash test.sh STRATA SOURCE_DIR` and starts with
#     . "$(dirname "$0")/common.bash" "$@"
# which sets STRATA, SRC, PY (Debian's python3, with the torch reference), a
# temporary directory $tmp removed at exit, and these checks:
#   check NAME CMD...                 the command succeeds
#   expect_rc NAME RC PATTERN CMD...  it exits with RC and its stderr matches PATTERN
#   expect_fail NAME PATTERN CMD...   it fails cleanly (exit 1-127, no crash) and stderr matches PATTERN
#   signal_and_wait SIG PID           sends SIG and waits for PID to end (60 s at most, then
#                                     SIGKILL, so that a lost signal fails the test, not CI's
#                                     clock); sets rc to its exit status
#   run_until LOG PATTERN CMD...      runs CMD in the background, its output in LOG, until a line
#                                     of LOG matches PATTERN (60 s at most), then stops it with
#                                     SIGTERM (signal_and_wait: rc is its exit status)
#   finish                            prints "N passed, M failed" and exits non-zero on any failure
set -uo pipefail
STRATA="$1"
SRC="$2"
PY=/usr/bin/python3
tmp="$(mktemp -d)"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
passes=0
fails=0

check() {
  local name="$1"; shift
  if "$@"; then echo "ok   $name"; passes=$((passes + 1)); else echo "FAIL $name"; fails=$((fails + 1)); fi
}

expect_rc() {
  local name="$1" want="$2" pattern="$3"; shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq "$want" ] && grep -qE -- "$pattern" "$tmp/err"; then echo "ok   $name"; passes=$((passes + 1))
  else echo "FAIL $name (rc=$rc, want $want): $(head -c 300 "$tmp/err")"; fails=$((fails + 1)); fi
}

expect_fail() {
  local name="$1" pattern="$2"; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qE -- "$pattern" "$tmp/err"; then echo "ok   $name"; passes=$((passes + 1))
  else echo "FAIL $name (rc=$rc): $(head -c 300 "$tmp/err")"; fails=$((fails + 1)); fi
}

signal_and_wait() {
  local sig="$1" pid="$2"
  kill -"$sig" "$pid"
  for _ in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && { echo "     (PID $pid still ran 60 s after SIG$sig; killed)"; kill -KILL "$pid"; }
  wait "$pid"
  rc=$?
}

run_until() {
  local log="$1" pattern="$2"
  shift 2
  "$@" >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 1200); do
    grep -qE -- "$pattern" "$log" 2>/dev/null && break
    sleep 0.05
  done
  signal_and_wait TERM "$pid"
}

finish() {
  echo "$passes passed, $fails failed"
  [ "$fails" -eq 0 ]
  exit
}
