#!/usr/bin/env bash
# generate.sh - greedy generation with a KV cache: Strata's gpt_decoder
# (build/bench_generate) against plain PyTorch (bench/torch_generate.py), same
# weights, prompt, number of new tokens and threads, in alternating rounds.
#
#   bench/generate.sh [ROUNDS [THREADS]]   (default 3 rounds, 2 threads; models in $GEN_MODELS or /tmp/strata-gen-models)
#
# Models: configs/demo.json's shape (4 layers, 4 heads, d_model 256, n_ctx 256,
# GPT-2's vocabulary), gpt2-124m and smollm2-135m (Llama: grouped-query
# attention, SwiGLU, a 49152-token tied head), random weights (GPT-2's init),
# written once by torch_generate.py --write as safetensors (a model directory
# for Llama) that both sides load. The prompt is 16 token ids; the demo model
# generates 128 tokens, the others 64.
# Each round runs Strata (3 repeats, median) then PyTorch (3 repeats, median)
# and takes their ratio; the table gives every round, the median of the
# ratios, and whether both sides generated the same greedy ids. Before the
# first round bench_generate measures this machine's memory read rate.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-3}"
THREADS="${2:-2}"
MODELS="${GEN_MODELS:-/tmp/strata-gen-models}"
cmake --build build --target bench_generate -j2 >/dev/null
mkdir -p "$MODELS"
# GPT-2 shapes are one file, Llama's a directory
model_path() { case "$1" in smollm2-*) echo "$MODELS/$1" ;; *) echo "$MODELS/$1.safetensors" ;; esac; }
for m in demo gpt2-124m smollm2-135m; do
  [ -s "$(model_path "$m")" ] || /usr/bin/python3 bench/torch_generate.py --write "$(model_path "$m")" --model "$m"
done
# ids below 49152, valid in every model's vocabulary (smollm2's is the smallest)
PROMPT=$(/usr/bin/python3 -c "print(','.join(str((i * 7919 + 13) % 49152) for i in range(16)))")
LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for t in 1 2; do
  build/bench_generate --weights "$MODELS/demo.safetensors" --n-head 4 --new 1 --repeats 1 --threads $t --bandwidth | head -1 >&2
done
printf '| model | new tokens | threads | round | Strata tokens/s | PyTorch tokens/s | Strata / PyTorch | same greedy ids |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- |\n'
for spec in "demo 4 128" "gpt2-124m 12 64" "smollm2-135m 0 64"; do
  read -r M NH NEW <<<"$spec"
  ratios=()
  for r in $(seq "$ROUNDS"); do
    OMP_NUM_THREADS=$THREADS build/bench_generate --weights "$(model_path "$M")" --n-head "$NH" --prompt "$PROMPT" \
      --new "$NEW" --threads $THREADS --repeats 3 >"$LOG/s.txt"
    /usr/bin/python3 bench/torch_generate.py --weights "$(model_path "$M")" --prompt "$PROMPT" --new "$NEW" \
      --threads $THREADS --repeats 3 >"$LOG/t.txt"
    s=$(awk '/^tokens\/s / {print $2}' "$LOG/s.txt")
    t=$(awk '/^tokens\/s / {print $2}' "$LOG/t.txt")
    same=$(cmp -s <(grep '^ids ' "$LOG/s.txt") <(grep '^ids ' "$LOG/t.txt") && echo yes || echo no)
    ratio=$(awk "BEGIN{printf \"%.2f\", $s / $t}")
    ratios+=("$ratio")
    echo "round $r $M: strata $s tok/s, pytorch $t tok/s; load $(cut -d' ' -f1 /proc/loadavg)" >&2
    printf '| %s | %s | %s | %s | %s | %s | %sx | %s |\n' "$M" "$NEW" "$THREADS" "$r" "$s" "$t" "$ratio" "$same"
  done
  med=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
  printf '| %s | %s | %s | median of %s rounds | | | **%sx** | |\n' "$M" "$NEW" "$THREADS" "$ROUNDS" "$med"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
