#!/usr/bin/env bash
# Compressed frame size vs query cost (issue 11): two captures of the same traffic at once (one veth, as
# bench-query.sh's stenographer comparison), `--compress auto -C FILE_SIZE`, one with --frame-size OLD (1MiB) and
# one with the default (INDEXED_FRAME_SIZE when indexing); traffic as bench-query.sh (1024 random source
# hosts × 100 random source ports to one destination, --payload half). Then `ringcap index` catches up on
# files the live indexer skipped, and host / 5-tuple / port queries run on both stores, interleaved,
# cold (after drop_caches) and warm (repeated at once), RUNS times: wall ms, elapsed_ms, bytes_read and
# packets from `--json`. Output: CSV lines on stdout; store sizes and index sizes on stderr.
# Environment: PACKETS (3000000), PPS (100000), RUNS (3), FILE_SIZE (256MB), BENCH_DIR
# (/var/tmp/ringcap-bench-frames), OLD (frame size of the first store, `f1m` in the output; 1MiB), NEW (frame
# size of the second store; empty = the default).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench/common.sh
source scripts/testbed.sh
PACKETS="${PACKETS:-3000000}"; PPS="${PPS:-100000}"; RUNS="${RUNS:-3}"; FILE_SIZE="${FILE_SIZE:-256MB}"
BENCH_DIR="${BENCH_DIR:-/var/tmp/ringcap-bench-frames}"; OLD="${OLD:-1MiB}"; NEW="${NEW:-}"
PROGRESS=1
json_field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d.get(sys.argv[2]); print("-" if v is None else v)' "$1" "$2"; }
resolve_ringcap
[ "$(id -u)" = 0 ] || die "run as root"
rm -rf "$BENCH_DIR"; mkdir -p "$BENCH_DIR/f1m" "$BENCH_DIR/fnew"
trap testbed_down EXIT
testbed_up ""
new_args=(); [ -n "$NEW" ] && new_args=(--frame-size "$NEW")
cap() { ip netns exec "$RX_NS" taskset -c 1 "$RINGCAP" capture -i "$RX_IF" -w "$1/cap" -C "$FILE_SIZE" --compress auto -q "${@:2}" >"$1.out" 2>"$1.log" & echo $!; }
P1="$(cap "$BENCH_DIR/f1m" --frame-size "$OLD")"; P2="$(cap "$BENCH_DIR/fnew" "${new_args[@]}")"
sleep 2
say "sending $PACKETS packets at $PPS pps"
ip netns exec "$TX_NS" taskset -c 0 "$RINGCAP" gen -i "$TX_IF" -n "$PACKETS" --pps "$PPS" --seed 7 --src-ip 10.0.0.0-10.0.3.255 \
  --src-ip-order random --src-port 1024-1123 --src-port-order random --dst-ip 10.9.0.1 --dst-port 5001 --payload half -q
sleep 3
kill -INT "$P1" "$P2"
# Not children of this shell (started in $(…)): poll until both have written their last file.
while kill -0 "$P1" 2>/dev/null || kill -0 "$P2" 2>/dev/null; do sleep 0.2; done
for s in f1m fnew; do tail -n 3 "$BENCH_DIR/$s.log" >&2; "$RINGCAP" index "$BENCH_DIR/$s" -q >&2; done
for s in f1m fnew; do
  data=$(find "$BENCH_DIR/$s" -name 'cap-*.zst' -printf '%s\n' | awk '{ n += $1 } END { print n }')
  idx=$(find "$BENCH_DIR/$s" -name '*.idx' -printf '%s\n' | awk '{ n += $1 } END { print n }')
  raw=$(for f in "$BENCH_DIR/$s"/cap-*.zst; do zstd -dc "$f" | wc -c; done | awk '{ n += $1 } END { print n }')
  say "$s: $(ls "$BENCH_DIR/$s"/cap-*.zst | wc -l) files, $data B of zstd, $raw B of pcap (ratio $(awk -v a="$raw" -v b="$data" 'BEGIN { printf "%.3f", a / b }')), index $idx B = $(awk -v a="$idx" -v b="$data" 'BEGIN { printf "%.2f", 100 * a / b }') %"
done
MID="$(ls "$BENCH_DIR/f1m"/cap-*.zst | sed -n 2p)"
read -r SRC DST <<<"$(zstd -dc "$MID" | tcpdump -r - -nn -q -c 1 udp 2>/dev/null | awk '{ d = $5; sub(/:$/, "", d); print $3, d }')"
SRC_IP="${SRC%.*}"; SRC_PORT="${SRC##*.}"
declare -A Q=([host]="host $SRC_IP" [5tuple]="udp and src host $SRC_IP and src port $SRC_PORT and dst host 10.9.0.1 and dst port 5001" [port]="port $SRC_PORT")
echo "store,query,cache,run,wall_ms,elapsed_ms,packets,bytes_read"
for run in $(seq "$RUNS"); do for q in host 5tuple port; do for s in f1m fnew; do for cache in cold warm; do
  [ "$cache" = cold ] && { sync; echo 3 >/proc/sys/vm/drop_caches; }
  t0=$(date +%s%N)
  "$RINGCAP" query "$BENCH_DIR/$s" "${Q[$q]}" -w /dev/null --json -q >"$BENCH_DIR/q.json"
  t1=$(date +%s%N)
  echo "$s,$q,$cache,$run,$(( (t1 - t0) / 1000000 )),$(json_field "$BENCH_DIR/q.json" elapsed_ms),$(json_field "$BENCH_DIR/q.json" packets),$(json_field "$BENCH_DIR/q.json" bytes_read)"
done; done; done; done
