#!/usr/bin/env bash
# fsck.sh STRATA SOURCE_DIR - `strata fsck` on the store of a real (tiny)
# offloaded run: clean exits 0 and changes nothing; one flipped byte inside a
# committed tensor's chunk exits 1 naming that tensor and chunk (and flipping
# it back makes the store clean again); a truncated manifest or data file, a
# missing directory, and a store in use by another process exit 1 with the
# reason; bad usage exits 2.
. "$(dirname "$0")/common.bash" "$@"

"$PY" -c "
import array, random
random.seed(3)
array.array('H', [random.randrange(101) for _ in range(4000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
"$STRATA" train --n-layer 2 --d-model 64 --n-head 2 --vocab 101 --data "$tmp/tokens.bin" --batch 2 --micro-batch 1 \
  --seq 16 --steps 1 --eval-batches 1 --threads 2 --schedule vertical --offload weights,optim \
  --run-dir "$tmp/run" >"$tmp/train.log" 2>&1
check "a tiny run with weights and optimizer state on the SSD leaves a store" test -f "$tmp/run/store/strata-store.manifest"
store="$tmp/run/store"
fsck() { "$STRATA" fsck "$@" >"$tmp/fsck.out" 2>"$tmp/fsck.err"; }

# Clean: the run directory or the store directory; nothing on disk changes.
state() { (cd "$store" && ls -A --full-time && md5sum strata-store.*) ; }
state >"$tmp/state.before"
check "clean store: exit 0 (given the run directory)" fsck "$tmp/run"
check "  summary line: N tensors, M chunks checked, 0 damaged" \
  grep -qE "^12 tensors, 12 chunks checked, 0 damaged$" "$tmp/fsck.out"
check "clean store: exit 0 (given the store directory)" fsck "$store"
check "--verbose lists every tensor's chunks with path, file and offset" fsck --verbose "$store"
check "  a master tensor among them" grep -qE "^tensor master\[1,[0-9]+\]: 199936 bytes, 1 chunks$" "$tmp/fsck.out"
cp "$tmp/fsck.out" "$tmp/listing.out"
state >"$tmp/state.after"
check "fsck changed nothing in the store (files, sizes, times, contents)" cmp -s "$tmp/state.before" "$tmp/state.after"

# One flipped byte inside master[1,...]'s chunk 0, at the file offset fsck listed.
read -r tensor file offset < <("$PY" - "$tmp/fsck.out" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
for i, l in enumerate(lines):
    m = re.match(r"tensor (master\[1,\d+\]):", l)
    if m:
        c = re.match(r"  chunk 0: tensor offset 0, \d+ bytes: path 0 (\S+) offset (\d+)$", lines[i + 1])
        print(m.group(1), c.group(1), c.group(2))
        break
PY
)
check "  the listing gave a file and offset for it" test -f "$file" -a -n "$offset"
flip() { "$PY" -c "
import sys
f = open(sys.argv[1], 'r+b'); f.seek(int(sys.argv[2])); b = f.read(1)
f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0x20])); f.close()" "$@"; }
flip "$file" $((offset + 1000))
tname="${tensor//[/\\[}"; tname="${tname//]/\\]}"
expect_rc "one flipped byte: exit 1, the damaged tensor named" 1 "damaged.*1 bad chunk in 1 tensor.*$tname" \
  "$STRATA" fsck "$tmp/run"
check "  stdout names the tensor" grep -qE "^damaged tensor $tname \(1 chunks\)$" "$tmp/out"
check "  then its chunk 0 with the path, file and file offset fsck listed" \
  grep -qF "  chunk 0: tensor offset 0, 199936 bytes: path 0 $file offset $offset: checksum mismatch" "$tmp/out"
check "  summary: 1 damaged" grep -qE "^12 tensors, 12 chunks checked, 1 damaged \(in 1 tensor\)$" "$tmp/out"
flip "$file" $((offset + 1000))
check "flipped back: clean again" fsck "$store"

# A byte inside a second committed tensor, from the same listing.
read -r file2 offset2 < <("$PY" - "$tmp/listing.out" "$tensor" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
for i, l in enumerate(lines):
    m = re.match(r"tensor (\S+): \d+ bytes", l)
    if m and m.group(1) != sys.argv[2]:
        c = re.match(r"  chunk 0: tensor offset 0, (\d+) bytes: path 0 (\S+) offset (\d+)$", lines[i + 1])
        if c and int(c.group(1)) > 100:
            print(c.group(2), c.group(3))
            break
PY
)
flip "$file" $((offset + 1000))
flip "$file2" $((offset2 + 50))
expect_rc "two damaged tensors: exit 1, 2 bad chunks" 1 "2 bad chunks in 2 tensors" "$STRATA" fsck "$store"
check "  both named on stdout" test "$(grep -c '^damaged tensor' "$tmp/out")" -eq 2
flip "$file" $((offset + 1000))
flip "$file2" $((offset2 + 50))
flip "$file" 100

# Held by another process (flock, as a training run holds it): refused, untouched.
expect_rc "store in use by another process: exit 1, says so" 1 "in use by another process" \
  flock -x "$store/strata-store.lock" "$STRATA" fsck "$tmp/run"

# Damage the files themselves.
cp -a "$store" "$tmp/copy"
truncate -s 100 "$tmp/copy/strata-store.manifest"
expect_rc "truncated manifest: exit 1, a clear message" 1 "damaged \\(bad manifest\\).*strata-store.manifest.*(manifest|magic)" \
  "$STRATA" fsck "$tmp/copy"
rm -rf "$tmp/copy"; cp -a "$store" "$tmp/copy"
truncate -s 8192 "$tmp/copy/strata-store.data"
expect_rc "truncated data file: exit 1, naming the tensor past its end" 1 "truncated data file.*beyond the end of .*strata-store.data" \
  "$STRATA" fsck "$tmp/copy"
rm -rf "$tmp/copy"; cp -a "$store" "$tmp/copy"
rm "$tmp/copy/strata-store.manifest"
expect_rc "no manifest: exit 1" 1 "no store in .*no strata-store.manifest" "$STRATA" fsck "$tmp/copy"
expect_rc "missing directory: exit 1" 1 "does not exist" "$STRATA" fsck "$tmp/nonexistent"
mkdir "$tmp/run2"; echo '{}' >"$tmp/run2/run.json"
expect_rc "run directory without a store: exit 1" 1 "run directory without a store" "$STRATA" fsck "$tmp/run2"
expect_rc "no argument: usage error, exit 2" 2 "fsck" "$STRATA" fsck
expect_rc "unknown flag: usage error, exit 2" 2 "unknown flag" "$STRATA" fsck --bogus "$store"
expect_rc "two arguments: usage error, exit 2" 2 "one PATH" "$STRATA" fsck "$store" "$store"
check "--help mentions that only committed tensors are checked" \
  bash -c "'$STRATA' fsck --help | grep -q 'Only committed tensors are checked'"
finish
