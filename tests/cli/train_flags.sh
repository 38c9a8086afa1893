#!/usr/bin/env bash
# train_flags.sh STRATA SOURCE_DIR - `strata train`'s flags checked before a
# run starts: flags that crashed (--log-every 0), were silently ignored
# (--n-head with --model, an --n-ctx/--vocab other than --init's) or truncated (values
# past INT_MAX), values that wrote invalid JSON (--eval-batches 0) or NaN
# weights (--beta1 2), and a repeated --config are refused, and a refused run
# writes nothing.
. "$(dirname "$0")/common.bash" "$@"
FX="$SRC/tests/fixtures/gpt_small_init.safetensors"   # 2 layers, d 48, context 32, vocab 101
python3 - "$tmp" <<'PY'
import struct, sys
d = sys.argv[1]
ramp = [(i * 7 + (i // 13)) % 101 for i in range(4000)]
open(f"{d}/train.bin", "wb").write(struct.pack(f"<{len(ramp)}H", *ramp))
open(f"{d}/val.bin", "wb").write(struct.pack("<1000H", *ramp[:1000]))
PY
mkdir -p "$tmp/ds" && cp "$tmp/train.bin" "$tmp/val.bin" "$tmp/ds/"
run() { "$STRATA" train --init "$FX" --n-head 4 --data "$tmp/ds" --batch 2 --seq 16 --steps 3 --eval-batches 1 \
          --threads 1 "$@"; }

# Flags that crashed or produced nonsense are usage errors (exit 2).
expect_rc "--log-every 0 is a usage error, not SIGFPE" 2 "--log-every" run --log-every 0 --run-dir "$tmp/r1"
expect_rc "--eval-batches 0 is a usage error, not NaN in metrics" 2 "--eval-batches" \
  run --eval-batches 0 --run-dir "$tmp/r2"
expect_rc "--seq past INT_MAX is out of range, not truncated to 16" 2 "--seq 4294967312: must be in \[1, " \
  run --seq 4294967312 --run-dir "$tmp/r3"
expect_rc "--seed ' -1' is refused, not wrapped" 2 "--seed" run --seed " -1" --run-dir "$tmp/r3b"
expect_rc "a run directory with a comma is refused (its default store is a list split at commas)" 1 \
  "--run-dir .*holds a comma" run --run-dir "$tmp/a,b"
check "  and nothing is made" test ! -e "$tmp/a,b" -a ! -e "$tmp/a" -a ! -e "b"
expect_rc "--optimizer-io names the orders it knows" 2 "phased, interleaved or alternating" \
  run --optimizer-io sideways --run-dir "$tmp/r3c"
expect_rc "--optimizer-io needs the executor" 2 "need --schedule vertical or horizontal" \
  run --optimizer-io phased --schedule memory --run-dir "$tmp/r3d"
expect_rc "--grad-buffers below three is refused" 2 "--grad-buffers 2: from 3 to 7" \
  run --grad-buffers 2 --run-dir "$tmp/r3e"
expect_rc "--grad-buffers above seven is refused" 2 "grad-buffers" \
  run --grad-buffers 8 --run-dir "$tmp/r3f"
expect_rc "--grad-buffers needs the executor" 2 "need --schedule vertical or horizontal" \
  run --grad-buffers 6 --schedule memory --run-dir "$tmp/r3g"
printf '{"steps": 2}\n' >"$tmp/c1.json"
expect_rc "--config twice is a usage error" 2 "--config" \
  run --config "$tmp/c1.json" --config "$tmp/c1.json" --run-dir "$tmp/r4"
# Values the trainer cannot use fail with a message (exit 1).
expect_rc "--beta1 2 is a usage error" 2 "--beta1 2: must be in \[0, 1\]" run --beta1 2 --run-dir "$tmp/r5"
expect_rc "--beta2 1 is a usage error" 2 "--beta2 1: must be below 1" run --beta2 1 --run-dir "$tmp/r5"
# every value out of its range is a usage error (exit 2), in one form: "--FLAG VALUE: must be ..."
expect_rc "--lr 0 is a usage error" 2 "--lr 0: must be positive" run --lr 0 --run-dir "$tmp/r5"
expect_rc "--min-lr above --lr is a usage error" 2 "--min-lr 0.1: must be at most --lr 0.01" run --lr 0.01 --min-lr 0.1 --run-dir "$tmp/r5"
expect_rc "--steps 0 is a usage error" 2 "--steps 0: must be at least 1" run --steps 0 --run-dir "$tmp/r5"
expect_rc "--alpha 2 is a usage error" 2 "--alpha 2: must be in \[0, 1\]" run --alpha 2 --run-dir "$tmp/r5"
expect_rc "--batch 3 with --micro-batch 2 is a usage error" 2 "--batch 3: must be a multiple of --micro-batch 2" \
  run --batch 3 --micro-batch 2 --run-dir "$tmp/r5"
check "--help shows the defaults" bash -c "'$STRATA' train --help | grep -q -- '--steps N  *optimizer steps (default 100)'"
check "  and not a 0 that means 'not given'" bash -c "! '$STRATA' train --help | grep -q -- '--n-layer N .*(default 0)'"
# Shape flags that would be ignored are refused.
expect_rc "--n-ctx other than --init's is refused" 1 "--n-ctx 8: the model in .* has n-ctx 32" run --n-ctx 8 --run-dir "$tmp/r6"
expect_rc "--vocab other than --init's is refused" 1 "--vocab 5000: the model in .* has vocab 101" run --vocab 5000 --run-dir "$tmp/r6"
check "--n-ctx and --vocab that agree with --init's are accepted" run --n-ctx 32 --vocab 101 --run-dir "$tmp/ok8"
expect_rc "--n-head with --model is refused" 1 "--model" \
  "$STRATA" train --model gpt2-tiny --n-head 2 --n-ctx 16 --vocab 101 --data "$tmp/ds" --batch 2 --seq 16 \
  --steps 1 --run-dir "$tmp/r7"
check "  nothing was written for refused runs" bash -c "! ls '$tmp'/r[1-7]* >/dev/null 2>&1"

finish
