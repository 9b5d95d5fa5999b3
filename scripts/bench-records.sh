#!/usr/bin/env bash
# Header-record benchmark (issue 7, seed 001): the probe striping records to two collectors, next to
# `ringcap capture -w` of full packets in the same run.
#
# `ringcap gen` sends at full speed with its default size distribution from CPU0 of the Tx namespace (the
# receive softirq runs there too). In the Rx namespace:
#   records  `ringcap capture -i RX --records tcp://127.0.0.1:P1,tcp://127.0.0.1:P2 --key K` pinned to CPU1,
#            two `ringcap collect` on loopback pinned to CPU0 (writing to BENCH_DISK_DIR)
#   pcap     `ringcap capture -i RX -w FILE` pinned to CPU1 (full packets to BENCH_DISK_DIR)
#   kafka    (TOOLS="records kafka") the probe producing to one Apache Kafka broker (KRaft, jars from
#            scripts/kafka-jars.sh, a 2-partition topic per run made with jshell + Kafka's admin client) on the
#            Rx loopback, pinned to CPU0; one `ringcap collect --listen kafka://` consumes after the probe has
#            drained (stored: its records_stored; coll_cpu_ns: the broker's CPU during the run, not the consumer's)
# Runs are interleaved (records, pcap, records, pcap, ...) so drift hits both alike.
#
# Measured per run:
#   offered       receiving veth's rx_packets / rx_bytes delta
#   captured      the probe's (or capture -w's) own summary: packets captured, drops by stage
#   stored        records stored by the two collectors (sum of their --json records_stored); should equal
#                 offered; record_bytes: the records' bytes (48 per IPv4 packet)
#   bytes_pct     record bytes / offered bytes (records); pcap file bytes / offered bytes (pcap)
#   cpu_ns        utime+stime of the probe / capturer from wait4() (scripts/bench/rusage.py), collectors not
#                 included; ns_per_pkt = cpu_ns / offered
#   coll_cpu_ns   CPU of the two collectors until the probe has drained (receive, check, spool, fdatasync and
#                 ack; the conversion to Parquet at exit not included); coll_ns_per_rec = coll_cpu_ns / stored
#
# Environment: RUNS (3), PACKETS (5000000), TOOLS ("records pcap"), BENCH_DISK_DIR (/var/tmp/ringcap-bench),
#   OUT_DIR (bench-out), RINGCAP, PROGRESS=1. A smoke test: RUNS=1 PACKETS=200000.
# Output: bench-out/records-YYYYmmdd-HHMMSS.csv and Markdown on stdout for BENCHMARKS.md.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/testbed.sh
source scripts/testbed.sh
# shellcheck source=scripts/bench/common.sh
source scripts/bench/common.sh

RUNS="${RUNS:-3}"
PACKETS="${PACKETS:-5000000}"
TOOLS="${TOOLS:-records pcap}"
BENCH_DISK_DIR="${BENCH_DISK_DIR:-/var/tmp/ringcap-bench}"
OUT_DIR="${OUT_DIR:-bench-out}"
PORT1=54001
PORT2=54002
resolve_ringcap

[ "$(id -u)" = 0 ] || die "run as root (network namespaces, packet sockets)"
for t in taskset ip; do have "$t" || die "$t is missing: run 'make deps'"; done
[ "$PACKETS" -ge 1000 ] || die "PACKETS=$PACKETS is too small"
ringcap_has gen || die "ringcap gen is not available ($RINGCAP gen --help failed)"
ringcap_has collect || die "ringcap collect is not available ($RINGCAP collect --help failed)"
"$RINGCAP" capture --help 2>&1 | grep -q -- --records || die "this ringcap capture has no --records"
DISK_FS="$(check_real_disk "$BENCH_DISK_DIR")"

mkdir -p "$OUT_DIR"
STAMP="$(date +%Y%m%d-%H%M%S)"
CSV="$OUT_DIR/records-$STAMP.csv"
WORK="$(mktemp -d /tmp/bench-records.XXXXXX)"
KEEP_WORK=0
on_exit() {
  bench_cleanup
  rm -rf "$BENCH_DISK_DIR"/records-"$$"-* "$BENCH_DISK_DIR"/kafka-"$$" 2>/dev/null || true
  if [ "$KEEP_WORK" = 1 ]; then say "logs of failed runs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap on_exit EXIT
trap 'say "interrupted: stopping and cleaning up"; exit 130' INT
trap 'say "terminated: stopping and cleaning up"; exit 143' TERM

testbed_up ""   # no RPS: the receive softirq runs on the sending CPU (CPU0)
ip -n "$RX_NS" link set lo up   # the collectors listen on the Rx namespace's loopback
KEY="$WORK/key"
(umask 077; head -c 32 /dev/urandom >"$KEY")
GEN_CMD=("$RINGCAP" gen -i "$TX_IF" -n "$PACKETS" --dst-mac "$DST_MAC" --src-mac "$SRC_MAC" --cpu 0 -q)

echo "tool,run,offered,offered_bytes,captured,drops,stored,record_bytes,out_bytes,bytes_pct,cpu_ns,ns_per_pkt,coll_cpu_ns,coll_ns_per_rec,status,drop_detail" >"$CSV"

# "captured drops detail" from a ringcap capture summary (tcpdump's lines + "drops by stage: a N, b M").
parse_summary() {
  awk '/packets captured/ { c = $1 } /dropped by kernel/ { d = $1 }
       /drops by stage:/ { st = $0; sub(/.*drops by stage: */, "", st); n = split(st, kv, /, */); sum = 0
         for (i = 1; i <= n; i++) { split(kv[i], p, " "); sum += p[2]; det = det (det ? ";" : "") p[1] "=" p[2] } }
       END { if (det != "") d = sum
         printf "%s %s %s\n", (c == "" ? "-" : c), (d == "" ? "-" : d), (det == "" ? "kernel=" d : det) }' "$1"
}

# Start a collector in the Rx namespace on CPU0; sets CPID.
start_collector() {
  local port="$1" dir="$2" log="$3" i
  ip netns exec "$RX_NS" taskset -c 0 "$RINGCAP" collect --listen "tcp://127.0.0.1:$port" -o "$dir" \
    --key "$KEY" --json -q --rotate-seconds 3600 >"$log.json" 2>"$log" &
  CPID=$!
  BG_PIDS+=("$CPID")
  for ((i = 0; i < 400; i++)); do
    grep -q "listening on" "$log" 2>/dev/null && return 0
    kill -0 "$CPID" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# One Kafka broker in the Rx namespace on CPU0 for the kafka tool (started once, used by every kafka run).
KAFKA_PORT=54092
KAFKA_PID=""
kafka_up() {
  [ -n "$KAFKA_PID" ] && return 0
  local d="$WORK/kafka" i
  KAFKA_JARS="$(scripts/kafka-jars.sh)" || die "kafka-jars.sh failed"
  mkdir -p "$d"
  printf '%s\n' process.roles=broker,controller node.id=1 \
    "controller.quorum.voters=1@127.0.0.1:$((KAFKA_PORT + 1))" \
    "listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$((KAFKA_PORT + 1))" \
    "advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT" controller.listener.names=CONTROLLER \
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT "log.dirs=$BENCH_DISK_DIR/kafka-$$" \
    offsets.topic.replication.factor=1 transaction.state.log.replication.factor=1 \
    transaction.state.log.min.isr=1 >"$d/server.properties"
  java -cp "$KAFKA_JARS/*" kafka.tools.StorageTool format -t cmluZ2NhcC1rYWZrYS10ZQ -c "$d/server.properties" \
    >"$d/format.log" 2>&1 || die "formatting the Kafka storage failed: $(tail -3 "$d/format.log")"
  ip netns exec "$RX_NS" taskset -c 0 java -Xmx512m -cp "$KAFKA_JARS/*" kafka.Kafka "$d/server.properties" \
    >"$d/broker.log" 2>&1 &
  KAFKA_PID=$!
  BG_PIDS+=("$KAFKA_PID")
  for ((i = 0; i < 120; i++)); do
    ip netns exec "$RX_NS" bash -c "exec 3<>/dev/tcp/127.0.0.1/$KAFKA_PORT" 2>/dev/null && return 0
    sleep 0.5
  done
  die "the Kafka broker did not start: $(tail -3 "$d/broker.log")"
}

# A fresh 2-partition topic (jshell + the admin client in the broker's jars).
kafka_topic() {
  local t="$1"
  printf '%s\n' \
    "var p = new java.util.Properties(); p.put(\"bootstrap.servers\", \"127.0.0.1:$KAFKA_PORT\");" \
    "var a = org.apache.kafka.clients.admin.Admin.create(p);" \
    "a.createTopics(java.util.List.of(new org.apache.kafka.clients.admin.NewTopic(\"$t\", 2, (short) 1))).all().get();" \
    "a.close();" "/exit" |
    ip netns exec "$RX_NS" jshell -q --class-path "$(ls "$KAFKA_JARS"/*.jar | paste -sd:)" >"$WORK/topic-$t.log" 2>&1
}

fail_row() {
  local tool="$1" run="$2" why="$3" log="$4"
  KEEP_WORK=1
  say "$tool (run $run): $why; last lines of its output:"
  tail -n 5 "$log" >&2 || true
  echo "$tool,$run,,,,,,,,,,,,,failed: $why," >>"$CSV"
}

run_one() {
  local tool="$1" run="$2"
  local k0=0 tag="$tool-$run" log ru pidf wpid tpid p0 b0 p1 b1 rc=0 status=ok c1 c2 d1 d2 out
  log="$WORK/$tag.log"; ru="$WORK/$tag.ru"; pidf="$WORK/$tag.pid"
  local base="$BENCH_DISK_DIR/records-$$-$tag"
  rm -rf "$base"; mkdir -p "$base"
  if [ "$tool" = kafka ]; then
    kafka_up
    kafka_topic "rec$run" || { fail_row "$tool" "$run" "topic not created" "$WORK/topic-rec$run.log"; return 0; }
    k0=$(cpu_tree_ns "$KAFKA_PID")   # the broker's CPU of this run only, not its start-up or the topic's creation
    CMD=("$RINGCAP" capture -i "$RX_IF" --records "kafka://127.0.0.1:$KAFKA_PORT/rec$run" --key "$KEY" --cpus 1 -q)
  elif [ "$tool" = records ]; then
    d1="$base/c1"; d2="$base/c2"
    start_collector "$PORT1" "$d1" "$WORK/$tag.c1" || { fail_row "$tool" "$run" "collector 1 did not start" "$WORK/$tag.c1"; return 0; }
    c1=$CPID
    start_collector "$PORT2" "$d2" "$WORK/$tag.c2" || { fail_row "$tool" "$run" "collector 2 did not start" "$WORK/$tag.c2"; return 0; }
    c2=$CPID
    CMD=("$RINGCAP" capture -i "$RX_IF" --records "tcp://127.0.0.1:$PORT1,tcp://127.0.0.1:$PORT2" --key "$KEY"
      --stripe batch --cpus 1 -q)
  else
    out="$base/full.pcap"
    CMD=("$RINGCAP" capture -i "$RX_IF" -w "$out" --cpus 1 -q)
  fi
  "$PY" "$BENCH_LIB/rusage.py" "$ru" "$pidf" -- ip netns exec "$RX_NS" taskset -c 1 "${CMD[@]}" >"$log" 2>&1 &
  wpid=$!
  BG_PIDS+=("$wpid")
  if ! wait_ready "$wpid" "$log" "listening on" || [ ! -s "$pidf" ]; then
    stop_pid "$wpid"; wait "$wpid" 2>/dev/null || true
    [ "$tool" = records ] && { stop_pid "$c1"; stop_pid "$c2"; }
    fail_row "$tool" "$run" "not capturing after 20 s" "$log"; return 0
  fi
  tpid="$(cat "$pidf")"
  read -r p0 b0 < <(rx_counters)
  if ! run_waited ip netns exec "$TX_NS" "${GEN_CMD[@]}" >"$WORK/$tag.gen.log" 2>&1; then
    status="gen failed"
  fi
  wait_drained "$tpid"
  read -r p1 b1 < <(rx_counters)
  stop_pid "$tpid"
  wait "$wpid" || rc=$?
  [ "$rc" = 0 ] || status="exit $rc"

  local stored=- rbytes=- obytes=- utime stime captured drops detail ccpu=-
  if [ "$tool" = records ]; then
    ccpu=$(($(cpu_tree_ns "$c1") + $(cpu_tree_ns "$c2")))
    # The probe has flushed and closed its connections: stop the collectors (they convert their spools).
    stop_pid "$c1"; stop_pid "$c2"
    wait "$c1" 2>/dev/null || status="collector 1 failed"
    wait "$c2" 2>/dev/null || status="collector 2 failed"
    read -r stored rbytes < <("$PY" - "$WORK/$tag.c1.json" "$WORK/$tag.c2.json" <<'EOF'
import json, sys
s = [json.load(open(p)) for p in sys.argv[1:]]
print(sum(j["records_stored"] for j in s), sum(j["record_bytes"] for j in s))
EOF
) || { stored=-; rbytes=-; status="no collector summary"; }
    obytes="$(du -cb "$d1"/*.parquet "$d2"/*.parquet 2>/dev/null | tail -1 | cut -f1)"
  elif [ "$tool" = kafka ]; then
    ccpu=$(($(cpu_tree_ns "$KAFKA_PID") - k0))
    d1="$base/c1"
    ip netns exec "$RX_NS" taskset -c 0 "$RINGCAP" collect --listen "kafka://127.0.0.1:$KAFKA_PORT/rec$run" -o "$d1" \
      --key "$KEY" --json -q --rotate-seconds 3600 >"$WORK/$tag.c1.json" 2>"$WORK/$tag.c1" &
    c1=$!
    BG_PIDS+=("$c1")
    # The consumer is done when its spool stops growing (3 checks a second apart).
    local last=-1 size same=0
    while [ "$same" -lt 3 ]; do
      sleep 1
      size="$(du -sb "$d1" 2>/dev/null | cut -f1)"
      if [ "$size" = "$last" ]; then same=$((same + 1)); else same=0; last="$size"; fi
    done
    stop_pid "$c1"; wait "$c1" 2>/dev/null || status="collector failed"
    read -r stored rbytes < <("$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["records_stored"], j["record_bytes"])' "$WORK/$tag.c1.json") \
      || { stored=-; rbytes=-; status="no collector summary"; }
    obytes="$(du -cb "$d1"/*.parquet 2>/dev/null | tail -1 | cut -f1)"
  else
    obytes="$(stat -c %s "$out" 2>/dev/null || echo -)"
  fi
  rm -rf "$base"
  if ! read -r utime stime _ <"$ru"; then
    fail_row "$tool" "$run" "no rusage" "$log"; return 0
  fi
  read -r captured drops detail < <(parse_summary "$log")
  local offered=$((p1 - p0)) offered_bytes=$((b1 - b0)) cpu_ns=$((utime + stime))
  [ "$offered" -gt 0 ] || status="nothing offered"
  [ "$status" = ok ] || { KEEP_WORK=1; say "$tag: $status (log: $log)"; }
  local row nspp pct
  row="$("$PY" - "$offered" "$offered_bytes" "$cpu_ns" "$tool" "$rbytes" "$obytes" "$ccpu" "$stored" <<'EOF'
import sys
offered, obytes_wire, cpu, tool, rbytes, fbytes, ccpu, stored = sys.argv[1:]
offered, obytes_wire, cpu = int(offered), int(obytes_wire), int(cpu)
nspp = f"{cpu / offered:.1f}" if offered else ""
num = rbytes if tool in ("records", "kafka") else fbytes
pct = f"{100 * int(num) / obytes_wire:.2f}" if obytes_wire and num.isdigit() else ""
cnspr = f"{int(ccpu) / int(stored):.1f}" if ccpu.isdigit() and stored.isdigit() and int(stored) else ""
print(f"{nspp},{pct},{cnspr}")
EOF
)"
  IFS=, read -r nspp pct cnspr <<<"$row"
  echo "$tool,$run,$offered,$offered_bytes,$captured,$drops,$stored,$rbytes,$obytes,$pct,$cpu_ns,$nspp,$ccpu,$cnspr,$status,${detail//,/;}" >>"$CSV"
  progress "run $run/$RUNS $tool: offered $offered captured $captured drops $drops stored $stored, bytes $pct %, $nspp ns/pkt, $status"
}

for ((run = 1; run <= RUNS; run++)); do
  for tool in $TOOLS; do
    run_one "$tool" "$run"
  done
done

echo "### Header records: probe + two collectors vs capture -w ($(date -u +%Y-%m-%d))"
echo
machine_md
# shellcheck disable=SC2016  # $TX_NS is shown literally
echo "- Sender: \`$(show_cmd ip netns exec '$TX_NS' "${GEN_CMD[@]}")\` (default size distribution, full speed)"
echo "- $RUNS runs × $PACKETS packets per tool, interleaved; probe/capturer pinned to CPU1, generator, softirq and"
echo "  the two collectors on CPU0; output on $BENCH_DISK_DIR ($DISK_FS)"
echo "- records: \`ringcap capture -i RX --records tcp://127.0.0.1:$PORT1,tcp://127.0.0.1:$PORT2 --key K --stripe batch\`,"
echo "  collectors \`ringcap collect --listen tcp://127.0.0.1:PORT -o DIR --key K\`; pcap: \`ringcap capture -i RX -w FILE\`"
echo "- CPU: utime+stime of the probe / capturer from wait4() (start-up and exit included; collectors not)."
echo "  collectors ns/record: CPU of both collectors (receive, check, spool, fdatasync, ack) / records stored"
echo "  bytes % = record bytes (records) or pcap file bytes (pcap) / offered bytes (veth rx_bytes, no FCS)"
echo "- Raw data: \`$CSV\`"
echo
"$PY" - "$CSV" <<'EOF'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "ok"]
def agg(vals):
    v = [float(x) for x in vals if x not in ("", "-")]
    if not v:
        return "–"
    return f"{sum(v) / len(v):.1f} ({min(v):.1f}–{max(v):.1f})" if len(v) > 1 else f"{v[0]:.1f}"
print("| tool | runs | offered | captured | drops | records stored / offered | bytes % | ns/packet avg (min–max) | collectors ns/record |")
print("|---|---|---|---|---|---|---|---|---|")
for tool in dict.fromkeys(r["tool"] for r in rows):
    rs = [r for r in rows if r["tool"] == tool]
    off = sum(int(r["offered"]) for r in rs)
    cap = sum(int(r["captured"]) for r in rs if r["captured"].isdigit())
    drops = sum(int(r["drops"]) for r in rs if r["drops"].isdigit())
    st = [r["stored"] for r in rs if r["stored"].isdigit()]
    stored = f"{sum(int(x) for x in st) / off:.6f}" if st and off else "–"
    print(f"| {tool} | {len(rs)} | {off} | {cap} | {drops} | {stored} | {agg(r['bytes_pct'] for r in rs)} | {agg(r['ns_per_pkt'] for r in rs)} | {agg(r['coll_ns_per_rec'] for r in rs)} |")
failed = sum(1 for r in csv.DictReader(open(sys.argv[1])) if r["status"] != "ok")
if failed:
    print(f"\n{failed} run(s) failed or were incomplete: see the CSV")
EOF
