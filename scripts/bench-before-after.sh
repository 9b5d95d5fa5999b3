#!/usr/bin/env bash
# One change measured in one run (issue 34's check): two ringcap binaries, RINGCAP_BEFORE and RINGCAP, over the
# same files, interleaved (before, after, before, after, ...), each pinned to CPU1, for the paths a refactor of
# the readers, the index and the query can slow down:
#   index     `ringcap index STORE` of a plain pcap-ns file (its .idx and flow table removed before each run)
#   query-idx `ringcap query STORE 'host H' -w /dev/null`, H the source of the trace's 1000th packet (indexed;
#             100 in a row per measured run)
#   query-scan the same with --no-index (every record read and filtered; 10 in a row)
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
# GNU time counts in 10 ms steps: a command shorter than that is run N times in one measured shell, and the
# figures are divided by N (the shell's own cost is in them, the same for both binaries).
measure() { # case binary run repeat command...
  local c=$1 b=$2 r=$3 n=$4
  shift 4
  /usr/bin/time -f "%U %S %e" -o "$OUT/time" taskset -c 1 bash -c 'n=$1; shift; for _ in $(seq "$n"); do "$@" || exit; done' _ "$n" "$@" >/dev/null 2>"$OUT/stderr" ||
    { echo "$c/$b failed: $(tail -3 "$OUT/stderr")" >&2; exit 1; }
  awk -v c="$c" -v b="$b" -v r="$r" -v n="$n" '{printf "%s,%s,%s,%.5f,%.5f\n", c, b, r, ($1 + $2) / n, $3 / n}' "$OUT/time" >>"$OUT/runs.csv"
}
for r in $(seq 1 "$RUNS"); do
  for b in before after; do
    bin=$RINGCAP
    [ $b = before ] && bin=$BEFORE
    rm -f "$OUT"/store/*.idx "$OUT"/store/*.parquet
    measure index $b "$r" 1 "$bin" index "$OUT/store" -q
    measure query-idx $b "$r" 100 "$bin" query "$OUT/store" "host $host" -w /dev/null -q
    measure query-scan $b "$r" 10 "$bin" query "$OUT/store" "host $host" --no-index -w /dev/null -q
    rm -rf "$OUT/parquet"
    measure convert $b "$r" 1 "$bin" convert "$trace" -o "$OUT/parquet" --threads 1 -q
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
    print(f"| {case} | {bc[0]:.4f} ({bc[1]:.4f}-{bc[2]:.4f}) | {ac[0]:.4f} ({ac[1]:.4f}-{ac[2]:.4f}) | "
          f"{ac[0] / bc[0]:.2f} | {bw[0]:.4f} | {aw[0]:.4f} |")
print(f"\n{sys.argv[2]} runs each, interleaved, pinned to CPU1.")
EOF
