#!/usr/bin/env bash
# make_corpus.sh - assembles the default training corpus in data/corpus/ (or
# the directory given as $1) from Debian 12 packages alone, so that any fresh
# machine can build it without other downloads:
#
#   kjv.txt            the King James Bible (packages bible-kjv, bible-kjv-text),
#                      one verse per line, as printed by the `bible` program
#   python-docs/...    the reStructuredText sources of the Python 3.11
#                      documentation (package python3.11-doc): tutorial, library
#                      and language reference, HOWTOs; English prose with code
#
# About 15 MB of text in about 500 files: archaic narrative English plus modern
# technical English and Python code. Idempotent: when the corpus is there and
# was made from the same package versions (recorded in DEST/.sources, a hidden
# file that `strata prepare` skips), it does nothing. The corpus is
# built in a temporary directory and renamed into place, so an interrupted run
# never leaves half a corpus. Tokenize it with
#   strata prepare data/corpus --out data/corpus-gpt2
set -euo pipefail
cd "$(dirname "$0")/.."

DEST="${1:-data/corpus}"
PACKAGES=(bible-kjv bible-kjv-text python3.11-doc)
DOCS=/usr/share/doc/python3.11/html/_sources

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "make_corpus: missing Debian packages: ${missing[*]}" >&2
  echo "make_corpus: install them with: apt-get install ${missing[*]} (scripts/setup.sh does)" >&2
  exit 1
fi

stamp="$(for p in "${PACKAGES[@]}"; do dpkg-query -W -f='${Package} ${Version}\n' "$p"; done)"
if [ -f "$DEST/.sources" ] && [ "$(sed -n '/^packages:/,$p' "$DEST/.sources" | tail -n +2)" = "$stamp" ]; then
  echo "make_corpus: $DEST is up to date ($(du -sb "$DEST" | cut -f1) bytes)"
  exit 0
fi

mkdir -p "$(dirname "$DEST")"
tmp="$(mktemp -d "$(dirname "$DEST")/.corpus.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# The whole Bible, Genesis 1:1 to Revelation 22:21; a wide line width keeps
# each verse on one line (the default wraps at $COLUMNS).
bible -l10000 gen1:1-rev22:21 >"$tmp/kjv.txt"
if [ "$(wc -c <"$tmp/kjv.txt")" -lt 4000000 ]; then
  echo "make_corpus: 'bible' printed only $(wc -c <"$tmp/kjv.txt") bytes; expected about 4.3 MB" >&2
  exit 1
fi

if [ ! -d "$DOCS" ]; then
  echo "make_corpus: $DOCS is missing although python3.11-doc is installed" >&2
  exit 1
fi
(cd "$DOCS" && find . -name '*.rst.txt' -type f -print0) | while IFS= read -r -d '' f; do
  mkdir -p "$tmp/python-docs/$(dirname "$f")"
  cp "$DOCS/$f" "$tmp/python-docs/$f"
done

kjv_bytes=$(wc -c <"$tmp/kjv.txt")
doc_files=$(find "$tmp/python-docs" -type f | wc -l)
doc_bytes=$(find "$tmp/python-docs" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
total=$((kjv_bytes + doc_bytes))
{
  echo "Default Strata corpus, made by scripts/make_corpus.sh from Debian packages:"
  echo "  kjv.txt       King James Bible (public domain): $kjv_bytes bytes"
  echo "  python-docs/  Python 3.11 documentation sources (PSF License): $doc_files files, $doc_bytes bytes"
  echo "  total         $total bytes"
  echo "packages:"
  echo "$stamp"
} >"$tmp/.sources"

rm -rf "$DEST.old"
[ -e "$DEST" ] && mv "$DEST" "$DEST.old"
mv "$tmp" "$DEST"
rm -rf "$DEST.old"
trap - EXIT
chmod 755 "$DEST"
awk -v d="$DEST" -v k="$kjv_bytes" -v n="$doc_files" -v p="$doc_bytes" -v t="$total" 'BEGIN {
  printf "make_corpus: wrote %s: King James Bible (%.1f MB) + Python 3.11 docs (%d files, %.1f MB) = %.1f MB\n",
         d, k / 1e6, n, p / 1e6, t / 1e6 }'
