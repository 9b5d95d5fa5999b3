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
store_pid=""
cleanup() { [ -n "$cap_pid" ] && kill "$cap_pid" 2>/dev/null; [ -n "$store_pid" ] && kill "$store_pid" 2>/dev/null; testbed_down; }
trap cleanup EXIT INT TERM

mkdir -p "$OUT"; rm -rf "$OUT"/demo.pcapng "$OUT"/store; mkdir -p "$OUT"/store
echo "== testbed: namespaces $TX_NS -> $RX_NS, veth $TX_IF -> $RX_IF"
testbed_up

echo "== capture: ringcap capture -i $RX_IF -F pcapng -w $OUT/demo.pcapng (ring source, in $RX_NS)"
ip netns exec "$RX_NS" "$RINGCAP" capture -i "$RX_IF" -F pcapng -w "$OUT/demo.pcapng" 2>"$OUT/capture.log" &
cap_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$OUT/capture.log" 2>/dev/null && break; sleep 0.1; done
grep -q "listening on" "$OUT/capture.log" || { cat "$OUT/capture.log" >&2; exit 1; }

echo "== time machine: ringcap capture -i $RX_IF -w $OUT/store/demo -C 8MB --compress auto (rotated, compressed, indexed)"
ip netns exec "$RX_NS" "$RINGCAP" capture -i "$RX_IF" -w "$OUT/store/demo" -C 8MB --compress auto -q 2>"$OUT/store.log" &
store_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$OUT/store.log" 2>/dev/null && break; sleep 0.1; done
grep -q "listening on" "$OUT/store.log" || { cat "$OUT/store.log" >&2; exit 1; }

echo "== traffic: ringcap gen -i $TX_IF -n $PACKETS --pps $PPS --dist internet --seed 7 (in $TX_NS)"
ip netns exec "$TX_NS" "$RINGCAP" gen -i "$TX_IF" -n "$PACKETS" --pps "$PPS" --dist internet --seed 7 --json \
  --src-ip 10.0.0.1-10.0.0.100 --src-port 1024-1123 --payload half \
  >"$OUT/gen.json" 2>"$OUT/gen.log"
sent=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["packets"])' "$OUT/gen.json")
offered=$(rx_packets)
sleep 0.5
kill -INT "$cap_pid"; wait "$cap_pid" || { cat "$OUT/capture.log" >&2; exit 1; }
cap_pid=""
kill -INT "$store_pid"; wait "$store_pid" || { cat "$OUT/store.log" >&2; exit 1; }
store_pid=""

echo "== capture summary"
grep -v "^ *[0-9.]* [kM]\?pps" "$OUT/capture.log" | sed 's/^/   /'
in_file=$(capinfos -M -c "$OUT/demo.pcapng" | awk -F: '/Number of packets/ {gsub(/ /,"",$2); print $2}')

echo "== query: ringcap query $OUT/store 'host 10.0.0.42 and after <first second + 0.5 s>' --explain"
grep "index:" "$OUT/store.log" | sed 's/^/   /'
first=$(tcpdump -r "$OUT/demo.pcapng" -c 1 -tt 2>/dev/null | awk '{print $1}')
after=$(python3 -c "import sys; print('@%.6f' % (float(sys.argv[1]) + 0.5))" "$first")
"$RINGCAP" query "$OUT/store" "host 10.0.0.42 and after $after" --explain -w "$OUT/host42.pcap" 2>&1 | sed 's/^/   /'
got=$(capinfos -M -c "$OUT/host42.pcap" | awk -F: '/Number of packets/ {gsub(/ /,"",$2); print $2}')
want=$(tcpdump -r "$OUT/demo.pcapng" -tt 'host 10.0.0.42' 2>/dev/null | awk -v a="${after#@}" '$1 >= a' | wc -l)
if [ "$got" = "$want" ]; then
  echo "   OK: $got packets, as many as tcpdump -r finds in the same second half ($OUT/host42.pcap: open it in Wireshark)"
else
  echo "   MISMATCH: query gave $got packets, tcpdump -r $want" >&2; exit 1
fi

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
