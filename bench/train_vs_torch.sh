#!/usr/bin/env bash
# train_vs_torch.sh - Strata's in-memory training throughput against PyTorch's
# on the CPU, same model, batch, precision and thread count, in one run.
#
#   bench/train_vs_torch.sh [--model NAME] [ROUNDS]   (gpt2-124m, 2 rounds)
#
# NAME is gpt2-124m or a Llama shape both sides know by name (smollm2-135m:
# Strata's llama kernels against tools/llama_reference.py's Llama).
# For the model at (B=4, T=64) and (B=8, T=256) with 2 threads, fp32, each
# round runs Strata then PyTorch back to back and prints both (stderr); the
# table reports the best round of each (the machine is shared: the best round
# is the least disturbed), the median of the per-round ratios, and Strata's
# model FLOP/s as a fraction of the sgemm rate that bench_train measures in
# the same process just before training.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=gpt2-124m
if [ "${1:-}" = --model ]; then MODEL="$2"; shift 2; fi
ROUNDS="${1:-2}"
THREADS=2
cmake --build build --target bench_train strata -j2 >/dev/null
# Both sides on the OpenBLAS kernels strata runs: neither bench_train nor
# PyTorch starts itself again with them, and on a CPU that OpenBLAS does not
# know both would run its generic ones (docs/BENCHMARKS.md, "OpenBLAS's
# kernels on a CPU it does not know"). A set the user named is kept.
OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$(build/strata version | sed -n 's/^matrix products: OpenBLAS, \(.*\) kernels$/\1/p')}
export OPENBLAS_CORETYPE
echo "OpenBLAS kernels: $OPENBLAS_CORETYPE" >&2
LOG=$(mktemp -d)
printf '| model | B x T | threads | Strata tokens/s (best) | PyTorch tokens/s (best) | ratio of bests | median per-round ratio | Strata model GFLOP/s | sgemm GFLOP/s | fraction of sgemm |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for shape in "4 64 5 1" "8 256 3 1"; do
  read -r B T STEPS WARM <<<"$shape"
  best_s=0; best_t=0; best_flops=0; best_gemm=0; ratios=()
  for r in $(seq "$ROUNDS"); do
    OMP_NUM_THREADS=$THREADS build/bench_train --model "$MODEL" --batch "$B" --seq "$T" --steps "$STEPS" \
      --warmup "$WARM" --threads "$THREADS" >"$LOG/s$r.txt"
    /usr/bin/python3 bench/torch_train.py --model "$MODEL" --batch "$B" --seq "$T" --steps "$STEPS" \
      --warmup "$WARM" --threads "$THREADS" --precision fp32 >"$LOG/t$r.txt" 2>&1
    s=$(awk '/^tokens\/s [0-9]/ {print $2}' "$LOG/s$r.txt")
    t=$(awk '/^tokens\/s [0-9]/ {print $2}' "$LOG/t$r.txt")
    flops=$(sed -n 's/.*model \([0-9.]*\) GFLOP\/s.*/\1/p' "$LOG/s$r.txt")
    gemm=$(sed -n 's/^sgemm 2048^3: \([0-9.]*\) GFLOP.*/\1/p' "$LOG/s$r.txt")
    echo "round $r B=$B T=$T: strata $s tok/s ($flops GFLOP/s, sgemm $gemm), pytorch $t tok/s" >&2
    ratios+=("$(awk "BEGIN{print $s / $t}")")
    if awk "BEGIN{exit !($s > $best_s)}"; then best_s=$s; best_flops=$flops; best_gemm=$gemm; fi
    if awk "BEGIN{exit !($t > $best_t)}"; then best_t=$t; fi
  done
  med=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
  awk -v M="$MODEL" -v B="$B" -v T="$T" -v th=$THREADS -v s="$best_s" -v t="$best_t" -v f="$best_flops" -v g="$best_gemm" -v m="$med" \
    'BEGIN{printf "| %s fp32 | %d x %d | %d | %.1f | %.1f | %.2fx | %.2fx | %.1f | %.1f | %.0f%% |\n", M, B, T, th, s, t, s/t, m, f, g, 100*f/g}'
done
rm -rf "$LOG"
