#!/usr/bin/env bash
# One change measured in one run (issue 34's check): two ringcap binaries, RINGCAP_BEFORE and RINGCAP, over the
# same files, interleaved (before, after, before, after, ...), each pinned to CPU1, for the paths a refactor of
# the readers, the index and the query can slow down:
#   index     `ringcap index STORE` of a plain pcap-ns file (its .idx and flow table removed before each run)
#   query-idx `ringcap query STORE 'host H' -w /dev/null`, H the source of the trace's 1000th packet (indexed)
#   query-scan the same with --no-index (every record read and filtered)
#   convert   `ringcap convert FILE -o DIR --threads 1` (pcap to Parquet)
# The trace is `ringcap synth` (b-model arrivals, many TCP/UDP flows, heavy-tailed sizes), written once by
# RINGCAP. Figures: CPU seconds (user+sys, from GNU time) and wall seconds, median and min-max over RUNS runs;
# ratio after/before of the medians. Output: Markdown on stdout, raw rows in $OUT/runs.csv.
#
# Environment: RINGCAP, RINGCAP_BEFORE (required), RUNS (5), DURATION (30s), PPS (40000), OUT (/var/tmp/ringcap-ba).
set -euo pipefail

RINGCAP="${RINGCAP:?set RINGCAP}"
BEFORE="${RINGCAP_BEFORE:?set RINGCAP_BEFORE to the older binary}"
RUNS="${RUNS:-5}"
DURATION="${DURATION:-30s}"
PPS="${PPS:-40000}"
OUT="${OUT:-/var/tmp/ringcap-ba}"

rm -rf "$OUT"
mkdir -p "$OUT/store"
trace="$OUT/store/cap-synth-000001.pcap"
"$RINGCAP" synth -w "$trace" -F pcap-ns --duration "$DURATION" --pps "$PPS" --seed 7 -q
host=$(tcpdump -nn -r "$trace" -c 1000 2>/dev/null | tail -1 | awk '{print $3}' | cut -d. -f1-4)
packets=$(capinfos -M -c "$trace" | awk '/Number of packets/ {print $NF}')
echo "trace: $packets packets, $(du -h "$trace" | cut -f1), host $host" >&2
"$RINGCAP" index "$OUT/store" -q

echo "case,binary,run,cpu_s,wall_s" >"$OUT/runs.csv"
measure() { # case binary run command...
  local c=$1 b=$2 r=$3
  shift 3
  /usr/bin/time -f "%U %S %e" -o "$OUT/time" taskset -c 1 "$@" >/dev/null 2>"$OUT/stderr" ||
    { echo "$c/$b failed: $(tail -3 "$OUT/stderr")" >&2; exit 1; }
  awk -v c="$c" -v b="$b" -v r="$r" '{printf "%s,%s,%s,%.3f,%.3f\n", c, b, r, $1 + $2, $3}' "$OUT/time" >>"$OUT/runs.csv"
}
for r in $(seq 1 "$RUNS"); do
  for b in before after; do
    bin=$RINGCAP
    [ $b = before ] && bin=$BEFORE
    rm -f "$OUT"/store/*.idx "$OUT"/store/*.parquet
    measure index $b "$r" "$bin" index "$OUT/store" -q
    measure query-idx $b "$r" "$bin" query "$OUT/store" "host $host" -w /dev/null -q
    measure query-scan $b "$r" "$bin" query "$OUT/store" "host $host" --no-index -w /dev/null -q
    rm -rf "$OUT/parquet"
    measure convert $b "$r" "$bin" convert "$trace" -o "$OUT/parquet" --threads 1 -q
  done
done

python3 - "$OUT/runs.csv" "$RUNS" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(f"| case | before CPU s (min-max) | after CPU s (min-max) | after/before CPU | before wall s | after wall s |")
print("| --- | --- | --- | --- | --- | --- |")
for case in ["index", "query-idx", "query-scan", "convert"]:
    def fig(b, k):
        v = [float(r[k]) for r in rows if r["case"] == case and r["binary"] == b]
        return statistics.median(v), min(v), max(v)
    bc, ac = fig("before", "cpu_s"), fig("after", "cpu_s")
    bw, aw = fig("before", "wall_s"), fig("after", "wall_s")
    print(f"| {case} | {bc[0]:.3f} ({bc[1]:.3f}-{bc[2]:.3f}) | {ac[0]:.3f} ({ac[1]:.3f}-{ac[2]:.3f}) | "
          f"{ac[0] / bc[0]:.2f} | {bw[0]:.3f} | {aw[0]:.3f} |")
print(f"\n{sys.argv[2]} runs each, interleaved, pinned to CPU1.")
EOF
