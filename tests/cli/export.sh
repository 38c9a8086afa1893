#!/usr/bin/env bash
# export.sh STRATA SOURCE_DIR - a run commits its store when it saves its
# weights (its state on the SSD or in memory alike), and `strata export`
# writes the weights of that commit: the same bytes as the run's
# model.safetensors; the committed store passes fsck; what cannot be
# exported is refused with the reason.
. "$(dirname "$0")/common.bash" "$@"
"$PY" -c "
import array, random
random.seed(3)
array.array('H', [random.randrange(101) for _ in range(20000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
run() { "$STRATA" train --n-layer 3 --d-model 64 --n-head 2 --vocab 101 --data "$tmp/tokens.bin" --batch 4 \
          --micro-batch 2 --seq 16 --steps 3 --eval-batches 1 --threads 2 --alpha 0.25 --clip 0 "$@"; }
run --offload weights,optim,grads --run-dir "$tmp/run" >"$tmp/train.log" 2>&1
check "a run with its optimizer state on the SSD commits its store at the end" \
  grep -qE "^committed step 3 in [0-9.]+ s" "$tmp/train.log"
mkdir -p "$tmp/exported" "$tmp/x" "$tmp/y"
check "export writes the commit's weights" "$STRATA" export "$tmp/run" --out "$tmp/exported/model.safetensors"
check "  byte for byte the run's model.safetensors" cmp "$tmp/exported/model.safetensors" "$tmp/run/model.safetensors"
check "  with config.json beside it" cmp "$tmp/exported/config.json" "$tmp/run/config.json"
check "  and it evaluates" "$STRATA" eval --model "$tmp/exported/model.safetensors" --tokens "$tmp/tokens.bin" --batch 1 --seq 16
check "the committed store passes fsck" "$STRATA" fsck "$tmp/run"
run --offload acts --run-dir "$tmp/run2" >"$tmp/train2.log" 2>&1
check "a run whose optimizer state stays in memory commits it too: export is its model.safetensors" \
  bash -c "'$STRATA' export '$tmp/run2' --out '$tmp/x/model.safetensors' >/dev/null && cmp '$tmp/x/model.safetensors' '$tmp/run2/model.safetensors'"
run --schedule memory --offload none --alpha 0 --run-dir "$tmp/run3" >"$tmp/train3.log" 2>&1
check "  and so does the in-memory trainer" \
  bash -c "'$STRATA' export '$tmp/run3' --out '$tmp/y/model.safetensors' >/dev/null && cmp '$tmp/y/model.safetensors' '$tmp/run3/model.safetensors'"
expect_fail "export of a directory with no store" "does not exist|no store|without a store" \
  "$STRATA" export "$tmp/nowhere" --out "$tmp/x.safetensors"
expect_rc "export without --out: usage error" 2 "--out" "$STRATA" export "$tmp/run"
# an existing file is not replaced unless asked
cp "$tmp/exported/model.safetensors" "$tmp/kept.safetensors"
expect_fail "export over an existing --out is refused" "model.safetensors exists; pass --overwrite" \
  "$STRATA" export "$tmp/run2" --out "$tmp/exported/model.safetensors"
check "  and leaves it as it was" cmp "$tmp/exported/model.safetensors" "$tmp/kept.safetensors"
mkdir -p "$tmp/conf" && echo '{"mine": 1}' >"$tmp/conf/config.json"
expect_fail "export beside an existing config.json is refused" "config.json exists; pass --overwrite" \
  "$STRATA" export "$tmp/run2" --out "$tmp/conf/model.safetensors"
check "  and writes nothing" bash -c "[ ! -e '$tmp/conf/model.safetensors' ] && grep -q mine '$tmp/conf/config.json'"
check "export --overwrite replaces them" \
  bash -c "'$STRATA' export '$tmp/run2' --out '$tmp/exported/model.safetensors' --overwrite >/dev/null && cmp '$tmp/exported/model.safetensors' '$tmp/run2/model.safetensors'"
finish
