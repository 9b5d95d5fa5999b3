#!/usr/bin/env bash
# make demo: a throwaway testbed, generated traffic, a capture, and a short report.
# Needs root (network namespaces). RINGCAP points at the binary (the Makefile sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
RINGCAP="${RINGCAP:-ringcap}"
PACKETS="${PACKETS:-200000}"
PPS="${PPS:-100000}"
OUT="${OUT:-demo-out}"
source scripts/testbed.sh

[ "$(id -u)" = 0 ] || { echo "make demo needs root (it creates network namespaces)" >&2; exit 2; }
cap_pid=""
cleanup() { [ -n "$cap_pid" ] && kill "$cap_pid" 2>/dev/null; testbed_down; }
trap cleanup EXIT INT TERM

mkdir -p "$OUT"; rm -f "$OUT"/demo.pcapng
echo "== testbed: namespaces $TX_NS -> $RX_NS, veth $TX_IF -> $RX_IF"
testbed_up

echo "== capture: ringcap capture -i $RX_IF -F pcapng -w $OUT/demo.pcapng (ring source, in $RX_NS)"
ip netns exec "$RX_NS" "$RINGCAP" capture -i "$RX_IF" -F pcapng -w "$OUT/demo.pcapng" 2>"$OUT/capture.log" &
cap_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$OUT/capture.log" 2>/dev/null && break; sleep 0.1; done
grep -q "listening on" "$OUT/capture.log" || { cat "$OUT/capture.log" >&2; exit 1; }

echo "== traffic: ringcap gen -i $TX_IF -n $PACKETS --pps $PPS --dist internet --seed 7 (in $TX_NS)"
ip netns exec "$TX_NS" "$RINGCAP" gen -i "$TX_IF" -n "$PACKETS" --pps "$PPS" --dist internet --seed 7 --json \
  >"$OUT/gen.json" 2>"$OUT/gen.log"
sent=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["packets"])' "$OUT/gen.json")
offered=$(rx_packets)
sleep 0.5
kill -INT "$cap_pid"; wait "$cap_pid" || { cat "$OUT/capture.log" >&2; exit 1; }
cap_pid=""

echo "== capture summary"
grep -v "^ *[0-9.]* [kM]\?pps" "$OUT/capture.log" | sed 's/^/   /'
in_file=$(capinfos -M -c "$OUT/demo.pcapng" | awk -F: '/Number of packets/ {gsub(/ /,"",$2); print $2}')

echo "== size distribution of what was captured (ringcap dist -I trace)"
"$RINGCAP" dist -I trace -i "$OUT/demo.pcapng" -O summary -n 100000 --compare internet --plot "$OUT/sizes.svg" | sed 's/^/   /'

echo "== report"
python3 - "$OUT/gen.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"   sent {r['packets']} packets, {r['bytes']/2**20:.1f} MiB in {r['duration_s']:.2f} s: "
      f"{r['pps']/1e3:.1f} kpps, {r['mbps']:.1f} Mb/s; inter-departure CV {r['gap']['cv']:.3f}")
PY
echo "   receiving veth saw $offered packets; capinfos counts $in_file packets in $OUT/demo.pcapng"
if [ "$in_file" = "$sent" ] && [ "$offered" = "$sent" ]; then
  echo "   OK: every packet sent was captured (sent = offered = in the file = $sent)"
else
  echo "   MISMATCH: sent $sent, offered $offered, in the file $in_file" >&2; exit 1
fi
echo "   files: $OUT/demo.pcapng (open it in Wireshark), $OUT/sizes.svg, $OUT/gen.json, $OUT/capture.log"
