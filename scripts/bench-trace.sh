#!/usr/bin/env bash
# make bench-trace: pcap → Parquet speed (issue 6). A capture made on the testbed (ringcap gen with the
# default "internet" size mix → ringcap capture), then:
#   ringcap convert with 1 and 2 threads, vs tshark -T fields with the same fields over the same packets,
#   ringcap analyze over the converted set (the rates/burstiness pass speed).
# Env: SIZE (capture bytes, default 2GiB; e.g. SIZE=200MiB for a quick check), OUT (default bench-out/trace),
#      TSHARK_PACKETS (default: all, the packets ringcap converts; a number times tshark over the first N only,
#      a quick look that is not a fair ratio), KEEP=1 keeps the capture and the sets.
# Needs root (network namespaces). Results: $OUT/results.md and $OUT/results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/testbed.sh
source scripts/bench/common.sh
resolve_ringcap
[ "$(id -u)" = 0 ] || die "bench-trace needs root (it creates network namespaces)"
have tshark || die "tshark not found (apt-get install tshark, or make deps)"

OUT="${OUT:-bench-out/trace}"
SIZE="${SIZE:-2GiB}"
TSHARK_PACKETS="${TSHARK_PACKETS:-all}"
size_bytes=$($PY - "$SIZE" <<'PY'
import re, sys
m = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]?)(i?B?)\s*", sys.argv[1])
if not m: sys.exit(f"SIZE={sys.argv[1]!r}: write e.g. 2GiB, 500MB, 100000000")
n, p, i = float(m.group(1)), m.group(2), m.group(3)
base = 1024 if i.startswith("i") or (p and not i) else 1000
print(int(n * base ** "_KMGT".index(p or "_")))
PY
)
mkdir -p "$OUT"
cap="$OUT/capture.pcap"
cap_pid=""
cleanup() { [ -n "$cap_pid" ] && stop_pid "$cap_pid"; testbed_down; [ "${KEEP:-0}" = 1 ] || rm -rf "$OUT/set1" "$OUT/set2" "$OUT/report"; }
trap cleanup EXIT INT TERM

# 1. The capture: generate until the file holds SIZE bytes.
if [ -s "$cap" ] && [ "$(stat -c %s "$cap")" -ge "$size_bytes" ]; then
  say "reusing $cap ($(stat -c %s "$cap") bytes)"
else
  rm -f "$cap"
  testbed_up
  ip netns exec "$RX_NS" "$RINGCAP" capture -i "$RX_IF" -F pcap-ns -w "$cap" -q 2>"$OUT/capture.log" &
  cap_pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$OUT/capture.log" 2>/dev/null && break; sleep 0.1; done
  grep -q "listening on" "$OUT/capture.log" || { cat "$OUT/capture.log" >&2; exit 1; }
  seed=1
  say "capturing $size_bytes bytes of ringcap gen --dist internet traffic into $cap"
  while [ "$(stat -c %s "$cap" 2>/dev/null || echo 0)" -lt "$size_bytes" ]; do
    # 1 M packets per round at 300 kpps: a rate the capture keeps up with on 2 cores.
    # Many flows (address and port ranges, walked at random), so flow tables and hashes see variety.
    ip netns exec "$TX_NS" "$RINGCAP" gen -i "$TX_IF" -n 1000000 --pps 300000 --dist internet --seed "$((seed++))" -q \
      --src-ip 10.0.0.1-10.0.3.255 --dst-ip 10.1.0.1-10.1.0.63 --src-port 1024-65000 --dst-port 1-1024 \
      --src-ip-order random --src-port-order random --dst-port-order random --payload half >/dev/null 2>>"$OUT/gen.log"
  done
  stop_pid "$cap_pid"; wait "$cap_pid" 2>/dev/null || true; cap_pid=""
  testbed_down
fi
packets=$(capinfos -M -c "$cap" | awk -F: '/Number of packets/ {gsub(/ /,"",$2); print $2}')
cap_bytes=$(stat -c %s "$cap")
say "capture: $packets packets, $cap_bytes bytes"

# 2. convert with 1 and 2 threads (the page cache is warmed by the first read).
cat "$cap" >/dev/null
for t in 1 2; do
  rm -rf "$OUT/set$t"
  /usr/bin/time -f "%e %M" -o "$OUT/time$t" "$RINGCAP" convert "$cap" -o "$OUT/set$t" --threads "$t" --json -q >"$OUT/convert$t.json"
  say "convert --threads $t: $($PY -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.2f Mpps, %.2f s, %.2f Mpps per CPU second, output %d bytes" % (r["mpps"], r["seconds"], r["mpps_per_cpu"], r["output_bytes"]))' "$OUT/convert$t.json")"
done

# 3. tshark with the same fields, on the same packets (unless TSHARK_PACKETS limits it).
fields=(frame.time_epoch frame.len frame.cap_len eth.src eth.dst eth.type vlan.id ip.version ip.src ip.dst
        ipv6.src ipv6.dst ip.len ip.ttl ip.proto tcp.srcport tcp.dstport udp.srcport udp.dstport tcp.flags
        udp.length icmp.type icmp.code)
targs=(); for f in "${fields[@]}"; do targs+=(-e "$f"); done
start=$(date +%s.%N)
count=(); [ "$TSHARK_PACKETS" = all ] || count=(-c "$TSHARK_PACKETS")
tshark -r "$cap" "${count[@]}" -T fields "${targs[@]}" 2>/dev/null | wc -l >"$OUT/tshark.rows"
end=$(date +%s.%N)
tshark_rows=$(cat "$OUT/tshark.rows")
tshark_s=$($PY -c "print($end - $start)")
say "tshark: $tshark_rows rows in $tshark_s s"

# 4. analyze over the 2-thread set.
"$RINGCAP" analyze "$OUT/set2" --report "$OUT/report" --json >"$OUT/analyze.json"

$PY - "$OUT" "$packets" "$cap_bytes" "$tshark_rows" "$tshark_s" <<'PY'
import json, sys
out, packets, cap_bytes, t_rows, t_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
c = {t: json.load(open(f"{out}/convert{t}.json")) for t in (1, 2)}
a = json.load(open(f"{out}/analyze.json"))
tshark_pps = t_rows / t_s
res = {
    "packets": packets, "capture_bytes": cap_bytes,
    "convert": {t: {"mpps": c[t]["mpps"], "seconds": c[t]["seconds"], "output_bytes": c[t]["output_bytes"],
                    "cpu_seconds": c[t]["cpu_seconds"], "mpps_per_cpu": c[t]["mpps_per_cpu"],
                    "x_tshark": c[t]["mpps"] * 1e6 / tshark_pps} for t in (1, 2)},
    "tshark": {"packets": t_rows, "seconds": t_s, "pps": tshark_pps},
    "analyze": {"rates_mpps": a["timing"]["rates_mpps"], "rates_s": a["timing"]["rates_s"],
                "traffic_mpps": a["timing"]["traffic_mpps"], "total_s": a["timing"]["total_s"]},
}
json.dump(res, open(f"{out}/results.json", "w"), indent=2)
md = [f"# bench-trace: {packets} packets, {cap_bytes/2**30:.2f} GiB pcap", "",
      "| tool | packets/s (wall) | × tshark | time | packets per CPU second | output |", "|---|---|---|---|---|---|"]
for t in (1, 2):
    r = res["convert"][t]
    md.append(f"| ringcap convert --threads {t} | {r['mpps']:.2f} M | {r['x_tshark']:.0f} | {r['seconds']:.2f} s | {r['mpps_per_cpu']:.2f} M | "
              f"{r['output_bytes']/2**20:.1f} MiB ({100*r['output_bytes']/cap_bytes:.1f} % of the pcap) |")
md.append(f"| tshark -T fields (23 fields, {t_rows} packets) | {tshark_pps/1e3:.1f} k | 1 | {t_s:.2f} s | | text to wc |")
md += ["", f"ringcap analyze: rates/burstiness pass {res['analyze']['rates_mpps']:.1f} M rows/s "
       f"({res['analyze']['rates_s']:.2f} s); sizes+flows pass {res['analyze']['traffic_mpps']:.1f} M rows/s; "
       f"whole report {res['analyze']['total_s']:.2f} s."]
open(f"{out}/results.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
