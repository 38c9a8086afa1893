#!/usr/bin/env bash
# iobench_vs_fio.sh - `strata iobench` against fio, same parameters, same
# files, same run: sequential O_DIRECT writes then reads with io_uring.
# Rounds alternate which tool goes first, so drift on a shared disk hits
# both; the ratio is taken per round (same minutes) and summarized by its
# median.
#
# usage: bench/iobench_vs_fio.sh STRATA DIR[,DIR...] [SIZE] [BLOCK] [QD] [ROUNDS]
#        defaults: SIZE 2G per directory, BLOCK 1M, QD 8, ROUNDS 5
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
STRATA=$1 PATHS=$2 SIZE=${3:-2G} BLOCK=${4:-1M} QD=${5:-8} ROUNDS=${6:-5}
command -v fio >/dev/null || { echo "fio is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
SIZE_B=$(numfmt --from=iec "$SIZE")
BLOCK_B=$(numfmt --from=iec "$BLOCK")
FILE=strata-iobench.dat
IFS=, read -r -a DIRS <<<"$PATHS"
cleanup() { for d in "${DIRS[@]}"; do rm -f "$d/$FILE"; done; }
trap cleanup EXIT

strata_pass() {   # prints "write_gbps read_gbps" (combined over paths)
  local out
  out=$("$STRATA" iobench --path "$PATHS" --size "$SIZE_B" --block "$BLOCK_B" --qd "$QD" --engine uring --keep)
  echo "$out" >&2
  if [ ${#DIRS[@]} -gt 1 ]; then echo "$out" | awk '$1 == "combined" {print $2, $3}'
  else echo "$out" | tail -n 1 | awk '{print $(NF-1), $NF}'; fi
}

fio_rw() {   # $1 = write|read; prints GB/s (10^9 B/s) over all paths
  local jobs=()
  for i in "${!DIRS[@]}"; do jobs+=(--name="p$i" --filename="${DIRS[$i]}/$FILE"); done
  fio --output-format=json --ioengine=io_uring --direct=1 --rw="$1" --bs="$BLOCK_B" --iodepth="$QD" \
      --size="$SIZE_B" --group_reporting "${jobs[@]}" |
    python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print('%.3f' % (j['$1']['bw_bytes']/1e9))"
}

fio_pass() {   # prints "write_gbps read_gbps"
  local w r
  w=$(fio_rw write)
  r=$(fio_rw read)
  echo "fio: write $w GB/s, read $r GB/s" >&2
  echo "$w $r"
}

echo "== $(date -u +%FT%TZ) $(uname -r), $(fio --version)"
echo "== strata: $STRATA iobench --path $PATHS --size $SIZE_B --block $BLOCK_B --qd $QD --engine uring --keep"
echo "== fio:    fio --ioengine=io_uring --direct=1 --rw=write|read --bs=$BLOCK_B --iodepth=$QD --size=$SIZE_B --group_reporting, one job per path, same files"
# Lay the files out once (not timed), so both tools overwrite allocated blocks.
"$STRATA" iobench --path "$PATHS" --size "$SIZE_B" --block "$BLOCK_B" --qd "$QD" --rw write --keep >/dev/null

results=()
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then s=$(strata_pass 2>/dev/null); f=$(fio_pass 2>/dev/null)
  else f=$(fio_pass 2>/dev/null); s=$(strata_pass 2>/dev/null); fi
  results+=("$s $f")
  printf 'round %d: strata write %s read %s | fio write %s read %s\n' "$r" $s $f
done

printf '%s\n' "${results[@]}" | python3 -c '
import sys, statistics as st
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
sw, sr, fw, fr = (list(c) for c in zip(*rows))
print("%-8s %14s %14s %18s" % ("", "strata GB/s", "fio GB/s", "ratio strata/fio"))
for name, s, f in (("write", sw, fw), ("read", sr, fr)):
    ratios = [a / b for a, b in zip(s, f)]
    print("%-8s %14.3f %14.3f %11.3f (median of per-round ratios; min %.3f, max %.3f)"
          % (name, st.median(s), st.median(f), st.median(ratios), min(ratios), max(ratios)))
'
