#!/usr/bin/env bash
# demo.sh - the main job on a fresh Debian 12 machine: set up and build,
# tokenize the default corpus, train a small GPT (configs/demo.json) for a few
# minutes on the CPU, then sample from it. Extra arguments go to `strata
# train` (for example --steps 200 or --threads 4).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh build
STRATA=build/strata

if [ ! -f data/corpus-gpt2/train.tok ] || [ ! -f data/corpus-gpt2/val.tok ]; then
  "$STRATA" prepare data/corpus --out data/corpus-gpt2 --overwrite
fi

"$STRATA" train --config configs/demo.json --data data/corpus-gpt2 --overwrite "$@"

echo
echo "== a sample from runs/demo/model.safetensors:"
"$STRATA" sample --model runs/demo/model.safetensors --prompt "And it came to pass" --tokens 60 --seed 7
