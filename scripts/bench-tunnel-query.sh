#!/usr/bin/env bash
# Issue 36's query target: an inner-host query over a VXLAN store is as fast (± 20 %) as the same query over
# the same traffic unencapsulated.
#
# What is measured and how:
#   1. `ringcap synth` writes DURATION of b-model traffic (pareto flow sizes) as a plain pcap-ns file; the same
#      packets wrapped in VXLAN as AWS mirroring sends them (scripts/bench/vxlan-wrap.py: +50 bytes a packet,
#      VNI 42) make the second file; `ringcap index` indexes both (index and flow table next to each).
#   2. Hosts from the flow table (DuckDB): the client with the median packet count (`median`) and the busiest
#      server (`top`).
#   3. ROUNDS rounds; each runs `ringcap query plain 'host H'` and `ringcap query vxlan 'vxlan and host H'`
#      (packets to /dev/null, warm page cache) in turn, the order reversed every other round, each pinned to
#      CPU 1 (taskset); CPU = utime + stime of the whole process from wait4() (scripts/bench/rusage.py).
#      Both answers must have the same packet count (else exit 1).
#   Report: per host, median (min-max) CPU of each, the median of the per-round ratios, and the bytes each
#   query read (ringcap's --json bytes_read): the VXLAN file is bigger, which no decoder can skip.
# Environment: DURATION (20s), PPS (100000), ROUNDS (11), BENCH_DIR (/var/tmp/ringcap-bench-tunnel),
#   RINGCAP (binary), KEEP=1 (reuse the files in BENCH_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
R="${RINGCAP:-$HOME/.cache/ringcap-target/release/ringcap}"
DIR="${BENCH_DIR:-/var/tmp/ringcap-bench-tunnel}"
ROUNDS="${ROUNDS:-11}"
say() { echo "bench-tunnel: $*" >&2; }

if [ "${KEEP:-0}" != 1 ] || [ ! -f "$DIR/v/vxlan.pcap.idx" ]; then
  rm -rf "$DIR" && mkdir -p "$DIR/p" "$DIR/v"
  say "synth ${DURATION:-20s} at ${PPS:-100000} pps"
  "$R" synth -w "$DIR/p/plain.pcap" -F pcap-ns --duration "${DURATION:-20s}" --pps "${PPS:-100000}" --seed 7 \
    --flow-size pareto:1.2:300B:100MB >&2
  python3 scripts/bench/vxlan-wrap.py "$DIR/p/plain.pcap" "$DIR/v/vxlan.pcap" >&2
  "$R" index -q "$DIR/p" "$DIR/v" >&2
fi

hosts=$(python3 - "$DIR/p/plain.pcap.flows.parquet" <<'EOF'
import sys, duckdb
t = sys.argv[1]
c = duckdb.connect()
clients = f"select src as h, sum(packets) as p from '{t}' group by src"
median = c.sql(f"with x as ({clients}) select h from x order by abs(p - (select quantile_disc(p, 0.5) from x)), h limit 1").fetchall()[0][0]
top = c.sql(f"select dst from '{t}' group by dst order by sum(packets) desc limit 1").fetchall()[0][0]
print(f"median={median} top={top}")
EOF
)

cpu() { # CPU seconds of one query: cpu FILE_OR_DIR EXPR
  python3 scripts/bench/rusage.py "$DIR/ru" "$DIR/pid" -- taskset -c 1 "$R" query "$1" "$2" -q -w /dev/null
  awk '{ printf "%.4f\n", ($1 + $2) / 1e9 }' "$DIR/ru"
}
count() { "$R" query "$1" "$2" -q -w /dev/null --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["packets"], r.get("bytes_read", "?"))'; }

echo "## Inner-host query over a VXLAN store vs the same traffic unwrapped ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo
echo "\`$0\` (ROUNDS=$ROUNDS, $(git rev-parse --short HEAD)); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| host | packets | bytes read plain / vxlan | CPU s plain, median (min-max) | CPU s vxlan | vxlan/plain (median of rounds) |"
echo "|---|---:|---:|---:|---:|---:|"
for hv in $hosts; do
  name=${hv%%=*} h=${hv#*=}
  read -r np bp < <(count "$DIR/p" "host $h")
  read -r nv bv < <(count "$DIR/v" "vxlan and host $h")
  [ "$np" = "$nv" ] || { say "packet counts differ for $h: plain $np, vxlan $nv"; exit 1; }
  plain=() vx=() ratio=()
  for i in $(seq "$ROUNDS"); do
    if [ $((i % 2)) = 1 ]; then a=$(cpu "$DIR/p" "host $h"); b=$(cpu "$DIR/v" "vxlan and host $h")
    else b=$(cpu "$DIR/v" "vxlan and host $h"); a=$(cpu "$DIR/p" "host $h"); fi
    plain+=("$a") vx+=("$b") ratio+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", (a > 0 ? b / a : 0) }')")
  done
  stat() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
  echo "| $name $h | $np | $bp / $bv | $(stat "${plain[@]}") | $(stat "${vx[@]}") | $(stat "${ratio[@]}") |"
done
