#!/usr/bin/env bash
# data_inputs.sh STRATA SOURCE_DIR - inputs are what they claim to be (issue
# 15): raw uint16 ids are read only from a *.bin file or with --data-format
# u16, text is recognized and sent to `strata prepare`, ids past the
# model's vocabulary and data smaller than one batch are refused before the
# first step, validation on the training data itself is warned about,
# initial weights that give a NaN loss are named as the cause, and a
# directory given as a token file is named as such; nanoGPT's .bin files and
# prepared datasets still train.
. "$(dirname "$0")/common.bash" "$@"
FX="$SRC/tests/fixtures/gpt_small_init.safetensors"   # 2 layers, d 48, context 32, vocab 101

"$PY" - "$tmp" <<'PY'
import struct, sys
d = sys.argv[1]
ramp = [(i * 7 + (i // 13)) % 101 for i in range(4000)]
open(f"{d}/train.bin", "wb").write(struct.pack(f"<{len(ramp)}H", *ramp))
open(f"{d}/val.bin", "wb").write(struct.pack("<1000H", *ramp[:1000]))
open(f"{d}/tokens.u16", "wb").write(struct.pack(f"<{len(ramp)}H", *ramp))
open(f"{d}/notes.txt", "w").write("These are my notes, not token ids.\n" * 100)
open(f"{d}/small.bin", "wb").write(struct.pack("<40H", *ramp[:40]))
late = list(ramp); late[3000] = 150   # past the vocabulary, 90 batches in
open(f"{d}/late_bad.bin", "wb").write(struct.pack(f"<{len(late)}H", *late))
PY
mkdir -p "$tmp/ds" "$tmp/smallval" && cp "$tmp/train.bin" "$tmp/val.bin" "$tmp/ds/"
cp "$tmp/train.bin" "$tmp/smallval/train.bin" && cp "$tmp/small.bin" "$tmp/smallval/val.bin"
# A small model (vocab 101) and one with GPT-2's vocabulary, under which any
# ASCII text read as uint16 is a valid id.
run() { "$STRATA" train --init "$FX" --n-head 4 --batch 2 --seq 16 --steps 2 --eval-batches 1 --threads 1 "$@"; }
run_gpt2() { "$STRATA" train --n-layer 1 --n-head 2 --d-model 16 --batch 2 --seq 16 --steps 2 --eval-batches 1 \
               --threads 1 "$@"; }

# --- which files hold raw token ids ------------------------------------------------
expect_rc "a text file is refused with the advice to run strata prepare" 1 \
  "notes.txt: this is a text file, not token ids; tokenize it first with 'strata prepare .*notes.txt --out DIR'" \
  run_gpt2 --data "$tmp/notes.txt" --run-dir "$tmp/r_text"
check "  and no run was written" test ! -e "$tmp/r_text/metrics.jsonl"
expect_rc "eval: a text file is refused too" 1 "notes.txt: this is a text file" \
  "$STRATA" eval --model "$FX" --n-head 4 --tokens "$tmp/notes.txt" --batch 1 --seq 16
expect_rc "decode: a text file is refused too" 1 "notes.txt: this is a text file" \
  "$STRATA" decode --tokens "$tmp/notes.txt"
expect_rc "raw ids in a file not named *.bin are refused, naming both ways to read them" 1 \
  "tokens.u16: not a token file: .*named \*\.bin.*--data-format u16" run --data "$tmp/tokens.u16" --run-dir "$tmp/r_u16"
run --data "$tmp/tokens.u16" --data-format u16 --run-dir "$tmp/r_u16" >"$tmp/u16.log" 2>&1
check "--data-format u16 reads them" test $? -eq 0
check "  and run.json records it (a resumed run reads them the same way)" \
  grep -qE '"data-format":\s*"u16"' "$tmp/r_u16/run.json"
"$STRATA" eval --model "$FX" --n-head 4 --tokens "$tmp/tokens.u16" --data-format u16 --batch 1 --seq 16 >/dev/null 2>&1
check "eval --data-format u16 reads them" test $? -eq 0
"$STRATA" decode --tokens "$tmp/tokens.u16" --data-format u16 --count 3 >/dev/null 2>&1
check "decode --data-format u16 reads them" test $? -eq 0
expect_rc "an unknown --data-format is a usage error" 2 "--data-format must be auto or u16, not 'uint16'" \
  run --data "$tmp/tokens.u16" --data-format uint16 --run-dir "$tmp/r_fmt"
run --data "$tmp/train.bin" --run-dir "$tmp/r_bin" >/dev/null 2>&1
check "a nanoGPT *.bin file still trains" test $? -eq 0
run --data "$tmp/ds" --run-dir "$tmp/r_ds" >/dev/null 2>&1
check "a nanoGPT directory (train.bin, val.bin) still trains" test $? -eq 0
mkdir -p "$tmp/text"
printf 'Some text to tokenize, with a few words in it. %.0s' $(seq 100) >"$tmp/text/a.txt"
"$STRATA" prepare "$tmp/text" --out "$tmp/prepared" >/dev/null 2>&1
run_gpt2 --data "$tmp/prepared" --run-dir "$tmp/r_prep" --batch 1 >/dev/null 2>&1
check "a prepared dataset (train.tok, val.tok) still trains" test $? -eq 0

# --- validation data that is the training data -------------------------------------
run --data "$tmp/train.bin" --run-dir "$tmp/r_same" >/dev/null 2>"$tmp/same.err"
check "one file for both: a warning that validation is the training data" \
  grep -q "^strata: warning: the validation data is the training data itself ($tmp/train.bin).*'strata prepare'" \
  "$tmp/same.err"
check "  once" test "$(grep -c warning "$tmp/same.err")" -eq 1
mkdir -p "$tmp/linked" && cp "$tmp/train.bin" "$tmp/linked/" && ln -s train.bin "$tmp/linked/val.bin"
run --data "$tmp/linked" --run-dir "$tmp/r_linked" >/dev/null 2>"$tmp/linked.err"
check "a val.bin linked to train.bin: the same warning" grep -q "the validation data is the training data" "$tmp/linked.err"
run --data "$tmp/ds" --run-dir "$tmp/r_split" >/dev/null 2>"$tmp/split.err"
check "a dataset with its own validation split: no warning" bash -c "! grep -q warning '$tmp/split.err'"

# --- ids past the model's vocabulary, anywhere in the file: before the first step ---
expect_rc "an id past the vocabulary is refused up front, naming the file and the position" 1 \
  "late_bad.bin: token 3000 is 150, past the model's vocabulary of 101; the data needs a model with a larger vocabulary" \
  run --data "$tmp/late_bad.bin" --steps 200 --run-dir "$tmp/r_late"
check "  before any step" bash -c "! grep -q '^step' '$tmp/out'"
mkdir -p "$tmp/lateval" && cp "$tmp/train.bin" "$tmp/lateval/" && cp "$tmp/late_bad.bin" "$tmp/lateval/val.bin"
expect_rc "  in the validation file too" 1 "lateval/val.bin: token 3000 is 150" \
  run --data "$tmp/lateval" --run-dir "$tmp/r_lateval"

# --- initial weights that give a non-finite loss ----------------------------------
"$PY" - "$SRC" "$FX" "$tmp" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/tools")
import gpt2_reference as ref
t, meta = ref.load_safetensors(sys.argv[2])
t = dict(t); w = t["h.1.mlp.c_fc.weight"].clone(); w[3, 5] = float("nan"); t["h.1.mlp.c_fc.weight"] = w
ref.save_safetensors(f"{sys.argv[3]}/nan.safetensors", t)
PY
expect_rc "--init weights with a NaN are named as the cause, not the learning rate" 1 \
  "nan.safetensors: these initial weights give a non-finite (validation )?loss \(-?nan.*\).* before any training: the file holds NaN.*lowering --lr cannot help" \
  "$STRATA" train --init "$tmp/nan.safetensors" --n-head 4 --data "$tmp/ds" --batch 2 --seq 16 --steps 2 \
  --eval-batches 1 --threads 1 --run-dir "$tmp/r_nan"
check "  (not 'lower --lr')" bash -c "! grep -q 'lower --lr or enable --clip' '$tmp/err'"

# --- data smaller than one batch -------------------------------------------------
expect_rc "training data smaller than one batch is refused with the numbers, not wrapped" 1 \
  "small.bin: holds 40 tokens, fewer than one batch of 4 sequences of 16 tokens needs \(4 x 16 \+ 1 = 65\)" \
  run --data "$tmp/small.bin" --batch 4 --run-dir "$tmp/r_small"
run --data "$tmp/small.bin" --batch 2 --run-dir "$tmp/r_small2" >/dev/null 2>&1
check "  one batch that fits (2 x 16 + 1 = 33 of 40) trains" test $? -eq 0
expect_rc "validation data smaller than one micro-batch is refused before training" 1 \
  "smallval/val.bin: holds 40 tokens, fewer than one batch of 4 sequences of 16 tokens needs" \
  run --data "$tmp/smallval" --batch 8 --micro-batch 4 --run-dir "$tmp/r_smallval"
check "  before any step" test ! -e "$tmp/r_smallval/metrics.jsonl"

# --- a directory where a token file is expected --------------------------------------
expect_rc "eval --tokens DIR names the files to give, not an internal function" 1 \
  "ds: is a directory, not a token file; name a file in it \(for a dataset from 'strata prepare': train.tok or val.tok\)" \
  "$STRATA" eval --model "$FX" --n-head 4 --tokens "$tmp/ds" --batch 1 --seq 16
check "  (no internal name in it)" bash -c "! grep -q dataset_resolve '$tmp/err'"

finish
