#!/usr/bin/env bash
# fetch_tokenizers.sh - the reference that Strata's tokenizer.json support is
# tested against, unpacked into vendor/node_modules (or the directory given
# as $1): Hugging Face's tokenizers library (Rust, 0.22) as a native Node
# binding (@anush008/tokenizers and its prebuilt linux-x64-gnu module), and
# the Llama 3 vocabulary and merges (llama3-tokenizer-js). Each tarball comes
# from `npm pack` and is checked against a known sha256 before it is unpacked;
# nothing is installed globally and no package scripts run.
# tools/make_tokenizer_json.js then builds vocab/{gpt2,llama3}-tokenizer.json.
# Idempotent: does nothing when the packages are already there and verified.
set -euo pipefail
cd "$(dirname "$0")/.."

DEST="${1:-vendor/node_modules}"
PACKAGES=(
  "@anush008/tokenizers@0.6.0|anush008-tokenizers-0.6.0.tgz|99adb724530009f5b9926ab2a8e4fbd8db0fa89ecc4504e1dd086b3e4c66afed"
  "@anush008/tokenizers-linux-x64-gnu@0.6.0|anush008-tokenizers-linux-x64-gnu-0.6.0.tgz|f8db409cd5b52a2fac2fd963eacf5c33b3d5841c2520ca168c447b2f5cb4a281"
  "llama3-tokenizer-js@1.2.0|llama3-tokenizer-js-1.2.0.tgz|51084690c7239708a3eb6adead1173bfd61b1f4d31cb0b8487e12ba466346ff0"
)

# vendor/node_modules/<name>/.strata-sha256 records the tarball it came from.
dir_of() { local spec="$1"; echo "$DEST/${spec%@*}"; }
have() { [ -f "$(dir_of "$1")/.strata-sha256" ] && [ "$(cat "$(dir_of "$1")/.strata-sha256")" = "$2" ]; }

todo=()
for entry in "${PACKAGES[@]}"; do
  IFS='|' read -r spec tgz sha <<<"$entry"
  have "$spec" "$sha" || todo+=("$entry")
done
if [ ${#todo[@]} -eq 0 ]; then
  echo "fetch_tokenizers: packages in $DEST are present and verified"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "fetch_tokenizers: npm is not installed (apt-get install npm)" >&2
  exit 1
fi
case "$(uname -m)-$(uname -s)" in
  x86_64-Linux) ;;
  *) echo "fetch_tokenizers: the reference binding is fetched for x86_64 Linux (glibc) only, not $(uname -m)-$(uname -s)" >&2
     exit 1 ;;
esac

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for entry in "${todo[@]}"; do
  IFS='|' read -r spec tgz sha <<<"$entry"
  echo "fetch_tokenizers: npm pack $spec"
  if ! (cd "$tmp" && npm pack --silent "$spec" >npm.log 2>&1); then
    echo "fetch_tokenizers: 'npm pack $spec' failed (is the npm registry reachable?):" >&2
    sed 's/^/  /' "$tmp/npm.log" >&2
    exit 1
  fi
  if [ ! -f "$tmp/$tgz" ]; then
    echo "fetch_tokenizers: npm pack $spec produced no $tgz" >&2
    exit 1
  fi
  got="$(sha256sum "$tmp/$tgz" | cut -d' ' -f1)"
  if [ "$got" != "$sha" ]; then
    echo "fetch_tokenizers: $tgz has sha256 $got, expected $sha" >&2
    exit 1
  fi
  # Unpack beside the destination, then swap it in: an interrupted run never
  # leaves a half-unpacked package under the final name.
  final="$(dir_of "$spec")"
  mkdir -p "$(dirname "$final")"
  stage="$final.tmp.$$"
  rm -rf "$stage"
  mkdir -p "$stage"
  tar -xzf "$tmp/$tgz" -C "$stage" --strip-components=1
  echo "$sha" >"$stage/.strata-sha256"
  rm -rf "$final"
  mv "$stage" "$final"
done
echo "fetch_tokenizers: unpacked ${#todo[@]} package(s) into $DEST (sha256 verified)"
