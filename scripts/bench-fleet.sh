#!/usr/bin/env bash
# Beyond one sensor (issue 35): queries over an S3 archive and over three sensors, upload against rclone, and
# capture loss with archiving on vs off.
#
# What is measured and how:
#   0. Three sensors: three testbeds (scripts/testbed.sh, one pair of network namespaces joined by a veth each).
#      Every sensor captures with `ringcap capture -C FILE_SIZE --compress auto` (both CPUs) into its own store
#      under BENCH_DIR/sensors/sN: first one `ringcap synth` trace (SYNTH_DURATION at SYNTH_PPS, the same trace
#      for all three, like one link seen by three taps) replayed with `ringcap replay --topspeed`, then bulk
#      traffic from `ringcap gen` (bench-query's flows: 1024 random source hosts × 100 ports towards one
#      destination, --payload half; a new --seed per chunk of CHUNK_PACKETS) until the store holds >= SIZE_GB/3
#      GB (10^9 bytes) of capture files. Why gen for the bulk: synth's payloads are zeros, which zstd squeezes
#      to almost nothing, so replaying synth alone to 5 GB of compressed files would take hours here.
#      Files the live indexer did not reach are indexed by `ringcap index`.
#      s3proxy 2.6.0 (scripts/s3proxy-jar.sh; filesystem back end in BENCH_DIR/s3, java -Xmx512m, the
#      credentials of crates/ringcap/tests/archive) on 127.0.0.1, pinned to CPU0 for the whole run.
#      `ringcap archive sN --to s3://fleet/site --sensor sN --once` for each sensor: the archive of >= SIZE_GB.
#   1. Queries over the archive: `ringcap query s3://fleet/site EXPR --endpoint URL --explain --json -w /dev/null`
#      for host (one gen source host, ~0.1 % of gen's packets, in every sensor) and conn (the synth trace's TCP
#      connection with the most packets, both directions: `tcp and host A and port P and host B and port Q`).
#      RUNS runs, each cold (`sync; echo 3 > drop_caches`: s3proxy's files and ringcap's reads from disk) then
#      warm; wall time (date +%s%N), archive.requests and archive.bytes_fetched from the JSON.
#      Needed bytes = bytes_read + index_bytes_read summed over `ringcap query s1 s2 s3 EXPR --explain --json`
#      (the local query of the same files: the frames the index names and the index chunks it reads); the
#      packet counts must be equal. Whole objects: the bytes of every capture object (what a reader without an
#      index downloads for any query), and the time `rclone cat` takes to download them to /dev/null, cold, once.
#   2. Queries over three sensors: `ringcap serve sN --listen 127.0.0.1:PORT` per sensor (plain HTTP on
#      loopback), `ringcap query http://…:P1 http://…:P2 http://…:P3 EXPR -w /dev/null --json` against each
#      sensor's own query, `curl -s -X POST --data EXPR http://…:Pi/query -o /dev/null -w %{time_total}`:
#      (a) one sensor at a time, the slowest of the three = the issue's baseline; (b) the three at once (what the
#      fleet query makes the one machine do, since all three sensors share its 2 CPUs and disk), the slowest.
#      (c) `ringcap query http://…:Pi EXPR` of each sensor alone, the slowest: the client's own fixed cost (process
#      start, connection, pcap writing) apart from the fan-out. RUNS runs, cold and warm as in 1. The fleet's
#      packets must equal the local query's over s1 s2 s3.
#   3. Upload: the same files (every non-hidden file of the three stores: captures, .idx, .flows.parquet) into
#      a fresh bucket per run, UP_RUNS interleaved rounds (the order rotates each round) of
#        ringcap   `ringcap archive sN --to s3://B/site --sensor sN --once` for N = 1..3 in turn (manifest
#                  STORE/.ringcap-archive removed first, so everything is sent again; defaults: 4 files at
#                  once, 16 MiB parts, 4 per file and 8 in all in flight; it puts itself at nice 10 with the
#                  lowest best-effort I/O priority)
#        rclone    `rclone copy sensors :s3:B/site` (defaults: --transfers 4, --s3-upload-concurrency 4,
#                  5 MiB chunks above 200 MiB; hidden files excluded)
#        rclone-1  the same with --transfers 1 --s3-upload-concurrency 1 --s3-chunk-size 16M (ringcap's shape)
#        curl      `curl -T FILE` of each file in turn, one PUT each: the floor, what s3proxy takes from a
#                  trivial uploader
#      Each uploader is pinned to CPU1 (s3proxy on CPU0), rclone and curl under `nice -n 10 ionice -c2 -n7` as
#      ringcap puts itself. Before each run: sync, drop caches (the files are read from disk each time); after:
#      the object count and bytes are checked, the bucket is deleted and synced. Throughput = bytes / wall time;
#      CPU = utime+stime of the uploader and its children from wait4() (scripts/bench/rusage.py), per GB sent.
#   4. Capture loss: LOSS_ROUNDS × (off, on) interleaved on sensor 1's testbed: `ringcap gen` (CPU0, top speed
#      or LOSS_PPS) sends LOSS_PACKETS into `ringcap capture -C LOSS_FILE_SIZE --compress auto` (CPU1) in a fresh
#      directory; on: `ringcap archive DIR --watch --interval 2` (unpinned, as a user starts it) uploads the
#      completed files to s3proxy while the capture runs. Offered = receiving veth's rx_packets delta; kernel
#      and storage drops from the capture's final --json summary; files archived during the capture from the
#      archive's manifest.
#
# Environment: SIZE_GB (5; 0.3 for a smoke run), BENCH_DIR (/var/tmp/ringcap-bench-fleet), RUNS (3),
#   UP_RUNS (3), LOSS_ROUNDS (2), LOSS_PACKETS (4000000), LOSS_PPS (empty: top speed), LOSS_FILE_SIZE (64MB:
#   several files complete, so the archive has work while the capture runs), FILE_SIZE (256MB),
#   CHUNK_PACKETS (2000000), SYNTH_DURATION (30s), SYNTH_PPS (20000), OUT_DIR (bench-out), RINGCAP,
#   PROGRESS (1), PARTS (all of: archive fleet upload loss), S3_DIR (s3proxy's data; BENCH_DIR/s3),
#   UP_TOOLS (the uploaders of 3, from: ringcap rclone rclone-1 curl; default all), UP_RINGCAP_ARGS (more
#   flags for `ringcap archive` in 3, e.g. --part-size 64MiB),
#   CI=true (a missing tool is an error, not a skip).
# Outputs: Markdown on stdout and in OUT_DIR/fleet-STAMP.md; raw rows in OUT_DIR/fleet-STAMP.csv. Everything it
#   creates (stores, s3proxy's data, namespaces, processes) is removed on exit.
# Smoke test: SIZE_GB=0.3 RUNS=1 UP_RUNS=1 LOSS_ROUNDS=1 LOSS_PACKETS=500000 scripts/bench-fleet.sh
set -euo pipefail

CMDLINE="$(printf '%q ' "$0" "$@")"
PROGRESS_WANTED="${PROGRESS:-1}"
cd "$(dirname "$0")/.."
# shellcheck source=scripts/testbed.sh
source scripts/testbed.sh
# shellcheck source=scripts/bench/common.sh
source scripts/bench/common.sh

SIZE_GB="${SIZE_GB:-5}"
BENCH_DIR="${BENCH_DIR:-/var/tmp/ringcap-bench-fleet}"
RUNS="${RUNS:-3}"
UP_RUNS="${UP_RUNS:-3}"
UP_TOOLS="${UP_TOOLS:-}"
UP_RINGCAP_ARGS="${UP_RINGCAP_ARGS:-}"
LOSS_ROUNDS="${LOSS_ROUNDS:-2}"
LOSS_PACKETS="${LOSS_PACKETS:-4000000}"
LOSS_PPS="${LOSS_PPS:-}"
LOSS_FILE_SIZE="${LOSS_FILE_SIZE:-64MB}"
FILE_SIZE="${FILE_SIZE:-256MB}"
CHUNK_PACKETS="${CHUNK_PACKETS:-2000000}"
SYNTH_DURATION="${SYNTH_DURATION:-30s}"
SYNTH_PPS="${SYNTH_PPS:-20000}"
OUT_DIR="${OUT_DIR:-bench-out}"
PARTS="${PARTS:-archive fleet upload loss}"
PROGRESS="$PROGRESS_WANTED"
resolve_ringcap
part() { [[ " $PARTS " == *" $1 "* ]]; }

# The archive tests' s3proxy identity (crates/ringcap/tests/archive/main.rs): a local throwaway server.
export AWS_ACCESS_KEY_ID=ringcap-test-key AWS_SECRET_ACCESS_KEY=ringcap-test-secret-0123456789
# rclone's AWS SDK refuses an AWS_CA_BUNDLE with its own HTTP transport ("LoadCustomCABundleError"), even for an
# http:// endpoint: rclone runs without it (no TLS here anyway).
RCLONE=(env -u AWS_CA_BUNDLE rclone)
SENSORS="$BENCH_DIR/sensors"
# s3proxy's data: on BENCH_DIR's disk by default; S3_DIR=/dev/shm/… keeps the stand-in server's writes off the
# sensor's disk (a real object store is another machine), e.g. for the loss rounds.
S3_DATA="${S3_DIR:-$BENCH_DIR/s3}"
GEN_FLOWS=(--src-ip 10.0.0.0-10.0.3.255 --src-ip-order random --src-port 1024-1123 --src-port-order random
  --dst-ip 10.9.0.1 --dst-port 5001 --payload half)

# ---- Checks ---------------------------------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "run as root (network namespaces, packet sockets, drop_caches)"
for t in java curl taskset ip awk tcpdump zstd ionice; do have "$t" || die "$t is missing: run 'make deps'"; done
for s in capture gen synth replay index archive serve query; do ringcap_has "$s" || die "$RINGCAP has no $s subcommand"; done
RCLONE_STATUS=ok
if ! have rclone; then
  [ "${CI:-}" = true ] && die "rclone is missing (CI=true): run 'make deps'"
  RCLONE_STATUS="rclone not installed (apt-get install rclone): its rows are skipped"
  say "$RCLONE_STATUS"
fi
JAR="$(scripts/s3proxy-jar.sh)" || die "s3proxy could not be fetched (make deps installs Java and Maven)"
awk -v g="$SIZE_GB" 'BEGIN { exit !(g > 0) }' || die "SIZE_GB=$SIZE_GB must be > 0"
DISK_FS="$(check_real_disk "$BENCH_DIR")"
PER_SENSOR="$(awk -v g="$SIZE_GB" 'BEGIN { printf "%.0f", g * 1e9 / 3 }')"
# The stores, the archive's copy and one upload bucket at a time, plus a margin: 3.3 × SIZE_GB.
avail="$(df -B1 --output=avail "$BENCH_DIR" | tail -1 | tr -d ' ')"
need="$(awk -v g="$SIZE_GB" 'BEGIN { printf "%.0f", 3.3 * g * 1e9 }')"
[ "$avail" -ge "$need" ] || die "$BENCH_DIR has $((avail / 1000000000)) GB free; SIZE_GB=$SIZE_GB needs >= $((need / 1000000000)) GB (stores + archive + one upload bucket)"

mkdir -p "$OUT_DIR"
STAMP="$(date +%Y%m%d-%H%M%S)"
CSV="$OUT_DIR/fleet-$STAMP.csv"
MD="$OUT_DIR/fleet-$STAMP.md"
WORK="$(mktemp -d /tmp/bench-fleet.XXXXXX)"
FACTS="$WORK/facts"
: >"$FACTS"
fact() { printf '%s\t%s\n' "$1" "$2" >>"$FACTS"; }
echo "part,name,run,cache,wall_ms,packets,requests,bytes_fetched,bytes,cpu_ns,objects,detail" >"$CSV"
row() { local IFS=,; echo "$*" >>"$CSV"; }

# ---- Sensors: three testbeds ------------------------------------------------------------------------------------
# scripts/testbed.sh names one pair after TB_ID; sensor N gets its own TB_ID (interface names stay <= 15 chars).
sensor() {
  TB_ID="rf$$s$1"; TX_NS="${TB_ID}t"; RX_NS="${TB_ID}r"
}
S3_PID=""
SERVE_PIDS=()
on_exit() {
  local i
  for i in 1 2 3; do sensor "$i"; testbed_down; done
  bench_cleanup   # every pid in BG_PIDS (s3proxy, serve, captures, archive), by pid
  rm -rf "$BENCH_DIR" "$S3_DATA" "$WORK"
}
trap on_exit EXIT
trap 'say "interrupted: stopping and cleaning up"; exit 130' INT
trap 'say "terminated: stopping and cleaning up"; exit 143' TERM

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now_ns() { date +%s%N; }
ms_since() { awk -v a="$1" -v b="$(now_ns)" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }
# Bytes of the non-hidden regular files under DIR (what both uploaders send).
tree_bytes() { find "$1" -type f ! -path '*/.*' -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
capture_bytes() { find "$1" -maxdepth 1 -type f -name 'cap-*' ! -name '*.idx' ! -name '*.parquet' -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
jget() { "$PY" -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d=d.get(k) if isinstance(d,dict) else None
print("-" if d is None else d)' "$1" "$2"; }

# ---- s3proxy ------------------------------------------------------------------------------------------------------
S3_PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
ENDPOINT="http://127.0.0.1:$S3_PORT"
s3curl() { curl -sS --aws-sigv4 aws:amz:us-east-1:s3 --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H x-amz-content-sha256:UNSIGNED-PAYLOAD "$@"; }
bucket_make() { [ "$(s3curl -X PUT "$ENDPOINT/$1" -o /dev/null -w '%{http_code}')" = 200 ] || die "cannot create bucket $1"; }
# The filesystem back end keeps a bucket as a directory: removing it is the quick way to empty 5 GB.
bucket_drop() { rm -rf "${S3_DATA:?}/$1"; sync; }
mkdir -p "$S3_DATA"
cat >"$WORK/s3proxy.conf" <<EOF
s3proxy.endpoint=$ENDPOINT
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$AWS_ACCESS_KEY_ID
s3proxy.credential=$AWS_SECRET_ACCESS_KEY
jclouds.provider=filesystem
jclouds.filesystem.basedir=$S3_DATA
EOF
# Pinned to CPU0 (with gen and its softirq), away from the uploaders and the capturer on CPU1.
taskset -c 0 java -Xmx512m -jar "$JAR" --properties "$WORK/s3proxy.conf" >"$WORK/s3proxy.log" 2>&1 &
S3_PID=$!
BG_PIDS+=("$S3_PID")
disown "$S3_PID"   # killed by pid on exit; no "Killed" job notice from bash
for ((i = 0; i < 450; i++)); do
  curl -s -o /dev/null "$ENDPOINT/" && break
  kill -0 "$S3_PID" 2>/dev/null || { tail -5 "$WORK/s3proxy.log" >&2; die "s3proxy exited"; }
  sleep 0.2
done
curl -s -o /dev/null "$ENDPOINT/" || die "s3proxy did not listen within 90 s"
fact s3proxy "s3proxy $(basename "$(dirname "$JAR")") (filesystem back end on $(stat -f -c %T "$S3_DATA")), java -Xmx512m, CPU0"

# ---- 0. Build the three stores --------------------------------------------------------------------------------
RX_IF=veth-rx; TX_IF=veth-tx
start_capture() {   # TAG DIR CPUS SIZE: ringcap capture under rusage.py in the current sensor's Rx namespace
  local tag="$1" dir="$2" cpus="$3" size="$4"
  CAP_LOG="$WORK/$tag.log"; CAP_RU="$WORK/$tag.ru"; local pidf="$WORK/$tag.pid"
  CAP_CMD=("$RINGCAP" capture -i "$RX_IF" -w "$dir/cap" -C "$size" --compress auto -q --json)
  mkdir -p "$dir"
  "$PY" "$BENCH_LIB/rusage.py" "$CAP_RU" "$pidf" -- ip netns exec "$RX_NS" taskset -c "$cpus" "${CAP_CMD[@]}" \
    >"$WORK/$tag.out" 2>"$CAP_LOG" &
  CAP_WPID=$!
  BG_PIDS+=("$CAP_WPID")
  if ! wait_ready "$CAP_WPID" "$CAP_LOG" "listening on" || [ ! -s "$pidf" ]; then
    tail -n 5 "$CAP_LOG" >&2 || true; die "ringcap capture ($tag) did not start"
  fi
  CAP_PID="$(cat "$pidf")"
}
stop_capture() {
  local rc=0
  wait_drained "$CAP_PID"; stop_pid "$CAP_PID"; wait "$CAP_WPID" || rc=$?
  [ "$rc" = 0 ] || { tail -n 5 "$CAP_LOG" >&2 || true; die "ringcap capture exited with $rc"; }
}
gen_send() {   # SEED COUNT [extra]: gen in the current sensor's Tx namespace on CPU0
  local seed="$1" n="$2"; shift 2
  GEN_CMD=("$RINGCAP" gen -i "$TX_IF" -n "$n" --seed "$seed" "${GEN_FLOWS[@]}" --cpus 0 -q --json "$@")
  run_waited ip netns exec "$TX_NS" taskset -c 0 "${GEN_CMD[@]}" >"$WORK/gen-$seed.json" 2>"$WORK/gen-$seed.err" ||
    { cat "$WORK/gen-$seed.err" >&2; die "ringcap gen failed"; }
}

for n in 1 2 3; do sensor "$n"; testbed_up ""; done
SYNTH="$WORK/synth.pcap"
"$RINGCAP" synth -w "$SYNTH" --duration "$SYNTH_DURATION" --pps "$SYNTH_PPS" --seed 35 -q --json >"$WORK/synth.json" ||
  die "ringcap synth failed"
fact synth_cmd "ringcap synth -w synth.pcap --duration $SYNTH_DURATION --pps $SYNTH_PPS --seed 35"
fact synth_packets "$(jget "$WORK/synth.json" packets)"
# The synth connection with the most packets (both directions): the one-connection query.
read -r CONN_EXPR CONN_PKTS < <(tcpdump -nn -r "$SYNTH" tcp 2>/dev/null | awk '
  { split($3, a, "."); split($5, b, "."); sub(/:$/, "", b[5])
    x = a[1] "." a[2] "." a[3] "." a[4] " " a[5]; y = b[1] "." b[2] "." b[3] "." b[4] " " b[5]
    k = (x < y) ? x "|" y : y "|" x; c[k]++ }
  END { for (k in c) if (c[k] > m) { m = c[k]; best = k }
        split(best, p, "|"); split(p[1], u, " "); split(p[2], v, " ")
        printf "tcp_and_host_%s_and_port_%s_and_host_%s_and_port_%s %d\n", u[1], u[2], v[1], v[2], m }')
CONN_EXPR="${CONN_EXPR//_/ }"
[ -n "$CONN_EXPR" ] || die "no TCP connection in the synth trace"
fact conn_trace_packets "$CONN_PKTS"

SYNC_START="$(now_ns)"
for n in 1 2 3; do
  sensor "$n"
  store="$SENSORS/s$n"
  say "sensor s$n: synth replay, then gen until >= $((PER_SENSOR / 1000000)) MB"
  start_capture "build-s$n" "$store" 0,1 "$FILE_SIZE"
  run_waited ip netns exec "$TX_NS" taskset -c 0 "$RINGCAP" replay -i "$TX_IF" --topspeed -q --json "$SYNTH" \
    >"$WORK/replay-s$n.json" 2>"$WORK/replay-s$n.err" || { cat "$WORK/replay-s$n.err" >&2; die "ringcap replay failed"; }
  seed=$((n * 1000)); bytes=0
  while [ "$bytes" -lt "$PER_SENSOR" ]; do
    seed=$((seed + 1))
    gen_send "$seed" "$CHUNK_PACKETS"
    bytes="$(capture_bytes "$store")"
    progress "s$n: chunk $((seed - n * 1000)), $((bytes / 1000000)) MB of capture files"
  done
  stop_capture
  for k in captured drops.kernel drops.storage files.complete; do fact "build_s${n}_$k" "$(summary_field "$CAP_LOG" "$k")"; done
  fact "build_s${n}_chunks" "$((seed - n * 1000))"
  "$RINGCAP" index "$store" -q --json >"$WORK/index-s$n.json" || die "ringcap index $store failed"
done
fact build_seconds "$(awk -v a="$SYNC_START" -v b="$(now_ns)" 'BEGIN { printf "%.0f", (b - a) / 1e9 }')"
fact capture_cmd "$(show_cmd "${CAP_CMD[@]}" | sed 's/-w [^ ]*/-w sN\/cap/')"
fact gen_cmd "$(show_cmd "${GEN_CMD[@]}" | sed 's/--seed [0-9]*/--seed K/')"
for n in 1 2 3; do fact "store_s${n}_bytes" "$(capture_bytes "$SENSORS/s$n")"; done
fact stores_tree_bytes "$(tree_bytes "$SENSORS")"
fact stores_files "$(find "$SENSORS" -type f ! -path '*/.*' | wc -l)"
fact stores_packets "$("$PY" -c 'import json,sys; print(sum(r.get("packets") or 0 for f in sys.argv[1:] for r in json.load(open(f))))' "$WORK"/index-s?.json)"
# A gen source host from the middle of sensor 1's store (~0.1 % of gen's packets; in every sensor).
mid="$(find "$SENSORS/s1" -maxdepth 1 -name 'cap-*.pcap*' ! -name '*.idx' ! -name '*.parquet' | sort | awk '{ f[NR] = $0 } END { print f[int((NR + 1) / 2)] }')"
# (tcpdump -c 1 closes the pipe early: zstd's SIGPIPE is expected, hence no pipefail here.)
HOST="$(set +o pipefail; case "$mid" in *.zst) zstd -dc "$mid" ;; *) cat "$mid" ;; esac 2>/dev/null |
  tcpdump -nn -r - -c 1 'udp and dst port 5001' 2>/dev/null | awk '{ split($3, a, "."); print a[1] "." a[2] "." a[3] "." a[4] }')"
[ -n "$HOST" ] || die "no gen packet found in $mid"
HOST_EXPR="host $HOST"
fact expr_host "$HOST_EXPR"; fact expr_conn "$CONN_EXPR"
declare -A EXPR=([host]="$HOST_EXPR" [conn]="$CONN_EXPR")

# ---- The archive: three sensors into s3://fleet/site ---------------------------------------------------------
# Only the archive queries read it: PARTS without `archive` skip the upload (and its disk).
if part archive; then
  bucket_make fleet
  t0="$(now_ns)"
  for n in 1 2 3; do
    "$RINGCAP" archive "$SENSORS/s$n" --to s3://fleet/site --sensor "s$n" --endpoint "$ENDPOINT" --once --json -q \
      >"$WORK/archive-s$n.json" || die "ringcap archive s$n failed (exit $?)"
  done
  fact archive_first_ms "$(ms_since "$t0")"
  fact archive_bytes "$(find "$S3_DATA/fleet" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')"
  CAPTURE_OBJECT_BYTES="$(find "$S3_DATA/fleet" -type f -name 'cap-*' ! -name '*.idx' ! -name '*.parquet' -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')"
  fact archive_capture_object_bytes "$CAPTURE_OBJECT_BYTES"
  progress "archive: $(awk -F'\t' '$1 == "archive_bytes" { print $2 }' "$FACTS") bytes in s3://fleet/site"
fi

# Local: what each query needs (frames + index chunks) and its packet count, over the same files.
for q in host conn; do
  "$RINGCAP" query "$SENSORS/s1" "$SENSORS/s2" "$SENSORS/s3" "${EXPR[$q]}" -w /dev/null --explain --json -q \
    >"$WORK/local-$q.json" 2>"$WORK/local-$q.err" || die "local query $q failed: $(tail -2 "$WORK/local-$q.err")"
  "$PY" - "$WORK/local-$q.json" "$q" >>"$FACTS" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); q = sys.argv[2]
ex = d.get("explain") or []
print(f"local_{q}_packets\t{d.get('packets')}")
print(f"local_{q}_frames\t{sum(r.get('bytes_read') or 0 for r in ex)}")
print(f"local_{q}_index\t{sum(r.get('index_bytes_read') or 0 for r in ex)}")
print(f"local_{q}_by_index\t{sum(1 for r in ex if r.get('how') == 'index')}/{len(ex)}")
EOF
done
lpk() { awk -F'\t' -v k="local_$1_packets" '$1 == k { print $2 }' "$FACTS"; }
MISMATCH=()

# ---- 1. Queries over the archive --------------------------------------------------------------------------------
if part archive; then
  for ((r = 1; r <= RUNS; r++)); do
    for q in host conn; do
      for cache in cold warm; do
        [ "$cache" = cold ] && drop_caches
        t0="$(now_ns)"
        "$RINGCAP" query s3://fleet/site "${EXPR[$q]}" --endpoint "$ENDPOINT" -w /dev/null --explain --json -q \
          >"$WORK/a.json" 2>"$WORK/a.err" || die "archive query $q failed: $(tail -2 "$WORK/a.err")"
        ms="$(ms_since "$t0")"
        pk="$(jget "$WORK/a.json" packets)"
        row archive "$q" "$r" "$cache" "$ms" "$pk" "$(jget "$WORK/a.json" archive.requests)" \
          "$(jget "$WORK/a.json" archive.bytes_fetched)" "" "" "" ""
        [ "$pk" = "$(lpk "$q")" ] || MISMATCH+=("archive $q: $pk packets, local query $(lpk "$q")")
        progress "archive $q run $r $cache: $ms ms, $pk packets, $(jget "$WORK/a.json" archive.bytes_fetched) B fetched"
      done
    done
  done
  # Whole objects: every capture object downloaded once, cold (no index: any query reads them all).
  if [ "$RCLONE_STATUS" = ok ]; then
    drop_caches
    t0="$(now_ns)"
    "${RCLONE[@]}" cat ":s3:fleet/site" --s3-provider Other --s3-endpoint "$ENDPOINT" --s3-access-key-id "$AWS_ACCESS_KEY_ID" \
      --s3-secret-access-key "$AWS_SECRET_ACCESS_KEY" --s3-force-path-style --exclude '*.idx' --exclude '*.parquet' \
      >/dev/null 2>"$WORK/cat.err" || say "rclone cat failed: $(tail -1 "$WORK/cat.err")"
    fact whole_objects_ms "$(ms_since "$t0")"
  fi
fi

# ---- 2. Queries over three sensors ------------------------------------------------------------------------------
if part fleet; then
  PORTS=()
  for n in 1 2 3; do
    p="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    "$RINGCAP" serve "$SENSORS/s$n" --listen "127.0.0.1:$p" >"$WORK/serve-s$n.log" 2>&1 &
    BG_PIDS+=("$!"); SERVE_PIDS+=("$!"); PORTS+=("$p"); disown "$!"
  done
  for p in "${PORTS[@]}"; do
    for ((i = 0; i < 100; i++)); do curl -s -o /dev/null "http://127.0.0.1:$p/" && break; sleep 0.1; done
  done
  URLS=()
  for p in "${PORTS[@]}"; do URLS+=("http://127.0.0.1:$p"); done
  own() {   # PORT EXPR: one sensor's own query, seconds (curl's time_total)
    curl -s -X POST --data "$2" "http://127.0.0.1:$1/query" -o "$WORK/own-$1.pcap" -w '%{time_total}'
  }
  for ((r = 1; r <= RUNS; r++)); do
    for q in host conn; do
      for cache in cold warm; do
        [ "$cache" = cold ] && drop_caches
        t0="$(now_ns)"
        "$RINGCAP" query "${URLS[@]}" "${EXPR[$q]}" -w /dev/null --json -q >"$WORK/f.json" 2>"$WORK/f.err" ||
          die "fleet query $q failed: $(tail -2 "$WORK/f.err")"
        ms="$(ms_since "$t0")"
        pk="$(jget "$WORK/f.json" packets)"
        [ "$pk" = "$(lpk "$q")" ] || MISMATCH+=("fleet $q: $pk packets, local query $(lpk "$q")")
        row fleet "$q" "$r" "$cache" "$ms" "$pk" "" "" "" "" "" ""
        # (a) each sensor alone, one after the other (cold: each from a dropped cache).
        own_ms=()
        for p in "${PORTS[@]}"; do
          [ "$cache" = cold ] && drop_caches
          s="$(own "$p" "${EXPR[$q]}")"
          own_ms+=("$(awk -v s="$s" 'BEGIN { printf "%.1f", s * 1000 }')")
          row own "$q" "$r" "$cache" "${own_ms[-1]}" "" "" "" "$(stat -c %s "$WORK/own-$p.pcap")" "" "" "port $p"
        done
        # (c) the same client, `ringcap query`, over each sensor alone: its fixed cost (start, connect, pcap out)
        # apart from the fan-out to three.
        for p in "${PORTS[@]}"; do
          [ "$cache" = cold ] && drop_caches
          t1="$(now_ns)"
          "$RINGCAP" query "http://127.0.0.1:$p" "${EXPR[$q]}" -w /dev/null --json -q >/dev/null 2>&1 ||
            die "ringcap query of one sensor failed"
          row one "$q" "$r" "$cache" "$(ms_since "$t1")" "" "" "" "" "" "" "port $p"
        done
        # (b) the three at once, as the fleet query asks them.
        [ "$cache" = cold ] && drop_caches
        cpids=()
        for p in "${PORTS[@]}"; do own "$p" "${EXPR[$q]}" >"$WORK/conc-$p" & cpids+=("$!"); done
        for pid in "${cpids[@]}"; do wait "$pid" || die "a sensor's query failed (curl)"; done
        for p in "${PORTS[@]}"; do
          row own-concurrent "$q" "$r" "$cache" "$(awk -v s="$(cat "$WORK/conc-$p")" 'BEGIN { printf "%.1f", s * 1000 }')" "" "" "" "" "" "" "port $p"
        done
        progress "fleet $q run $r $cache: $ms ms, $pk packets; sensors alone ${own_ms[*]} ms"
      done
    done
  done
  for pid in "${SERVE_PIDS[@]}"; do stop_pid "$pid"; done
  rm -f "$WORK"/own-*.pcap
fi

# ---- 3. Upload: ringcap archive vs rclone copy vs curl -T ------------------------------------------------------
RCLONE_S3=(--s3-provider Other --s3-endpoint "$ENDPOINT" --s3-access-key-id "$AWS_ACCESS_KEY_ID"
  --s3-secret-access-key "$AWS_SECRET_ACCESS_KEY" --s3-force-path-style --s3-no-check-bucket)
upload_cmd() {   # TOOL BUCKET: sets UP (the command, run under rusage.py on CPU1)
  local tool="$1" b="$2"
  case "$tool" in
    ringcap)
      # shellcheck disable=SC2016  # expanded by the inner bash
      UP=(bash -c 'r="$0"; s="$1"; b="$2"; e="$3"; shift 4; for n in 1 2 3; do "$r" archive "$s/s$n" --to "s3://$b/site" --sensor "s$n" --endpoint "$e" --once -q "$@" >/dev/null || exit $?; done' \
        "$RINGCAP" "$SENSORS" "$b" "$ENDPOINT" -- $UP_RINGCAP_ARGS) ;;
    rclone)
      UP=(nice -n 10 ionice -c2 -n7 "${RCLONE[@]}" copy "$SENSORS" ":s3:$b/site" "${RCLONE_S3[@]}" --exclude '.*' --exclude '.*/**') ;;
    rclone-1)
      UP=(nice -n 10 ionice -c2 -n7 "${RCLONE[@]}" copy "$SENSORS" ":s3:$b/site" "${RCLONE_S3[@]}" --exclude '.*' --exclude '.*/**'
        --transfers 1 --s3-upload-concurrency 1 --s3-chunk-size 16M) ;;
    curl)
      # shellcheck disable=SC2016  # expanded by the inner bash
      UP=(nice -n 10 ionice -c2 -n7 bash -c 'cd "$0" && find . -type f ! -path "*/.*" -printf "%P\n" | while read -r f; do
          curl -sS --fail --aws-sigv4 aws:amz:us-east-1:s3 --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
            -H x-amz-content-sha256:UNSIGNED-PAYLOAD -T "$f" "$1/$2/site/$f" -o /dev/null || exit 1; done' \
        "$SENSORS" "$ENDPOINT" "$b") ;;
  esac
}
if part upload; then
  TOOLS=(ringcap curl)
  [ "$RCLONE_STATUS" = ok ] && TOOLS=(ringcap rclone rclone-1 curl)
  # shellcheck disable=SC2206  # a list of words
  [ -n "$UP_TOOLS" ] && TOOLS=($UP_TOOLS)
  SEND_BYTES="$(tree_bytes "$SENSORS")"
  SEND_FILES="$(find "$SENSORS" -type f ! -path '*/.*' | wc -l)"
  for ((r = 1; r <= UP_RUNS; r++)); do
    k=$(((r - 1) % ${#TOOLS[@]}))
    order=("${TOOLS[@]:k}" "${TOOLS[@]:0:k}")   # rotate: no tool always first after the cache drop
    for tool in "${order[@]}"; do
      b="up-$tool-$r"
      bucket_make "$b"
      rm -rf "$SENSORS"/s?/.ringcap-archive
      upload_cmd "$tool" "$b"
      drop_caches
      t0="$(now_ns)"
      "$PY" "$BENCH_LIB/rusage.py" "$WORK/up.ru" "$WORK/up.pid" -- taskset -c 1 "${UP[@]}" >"$WORK/up.out" 2>&1 ||
        { tail -5 "$WORK/up.out" >&2; die "$tool upload failed"; }
      ms="$(ms_since "$t0")"
      read -r u s _ <"$WORK/up.ru"
      objs="$(find "$S3_DATA/$b" -type f | wc -l)"
      got="$(find "$S3_DATA/$b" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')"
      [ "$got" = "$SEND_BYTES" ] && [ "$objs" = "$SEND_FILES" ] ||
        MISMATCH+=("upload $tool run $r: $objs objects of $got B in the bucket, $SEND_FILES files of $SEND_BYTES B sent")
      row upload "$tool" "$r" cold "$ms" "" "" "" "$SEND_BYTES" "$((u + s))" "$objs" ""
      progress "upload $tool run $r: $ms ms, $(awk -v b="$SEND_BYTES" -v m="$ms" 'BEGIN { printf "%.0f", b / m / 1e3 }') MB/s, CPU $(((u + s) / 1000000)) ms"
      bucket_drop "$b"
    done
  done
  rm -rf "$SENSORS"/s?/.ringcap-archive
  fact upload_files "$SEND_FILES"
  fact rclone_version "$(rclone version 2>/dev/null | head -1)"
fi

# ---- 4. Capture loss with archiving on vs off ------------------------------------------------------------------
if part loss; then
  sensor 1
  for ((r = 1; r <= LOSS_ROUNDS; r++)); do
    for mode in off on; do
      dir="$BENCH_DIR/loss-$mode-$r"; b="loss-$mode-$r"
      rm -rf "$dir"
      start_capture "loss-$mode-$r" "$dir" 1 "$LOSS_FILE_SIZE"
      APID=""
      if [ "$mode" = on ]; then
        bucket_make "$b"
        "$RINGCAP" archive "$dir" --to "s3://$b/site" --sensor loss --endpoint "$ENDPOINT" --watch --interval 2 -q \
          >"$WORK/loss-archive-$r.log" 2>&1 &
        APID=$!; BG_PIDS+=("$APID")
      fi
      read -r p0 _ < <(rx_counters)
      t0="$(now_ns)"
      gen_send "$((9000 + r))" "$LOSS_PACKETS" ${LOSS_PPS:+--pps "$LOSS_PPS"}
      send_ms="$(ms_since "$t0")"
      wait_drained "$CAP_PID"
      read -r p1 _ < <(rx_counters)
      # Files archived while the capture ran (before it is stopped).
      archived=0
      [ -f "$dir/.ringcap-archive/manifest.jsonl" ] && archived="$(wc -l <"$dir/.ringcap-archive/manifest.jsonl")"
      stop_capture
      # How long `archive --watch` takes to leave after SIGINT (it may be sending a backlog), then the usual stop.
      astop=-
      if [ -n "$APID" ]; then
        t1="$(now_ns)"; kill -INT "$APID" 2>/dev/null || true
        for ((i = 0; i < 600; i++)); do kill -0 "$APID" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$APID" 2>/dev/null && astop=">60" || astop="$(awk -v a="$t1" -v b="$(now_ns)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')"
        stop_pid "$APID"; wait "$APID" 2>/dev/null || true
      fi
      files="$(find "$dir" -maxdepth 1 -name 'cap-*' ! -name '*.idx' ! -name '*.parquet' | wc -l)"
      kd="$(summary_field "$CAP_LOG" drops.kernel)"; sd="$(summary_field "$CAP_LOG" drops.storage)"
      row loss "$mode" "$r" "" "$send_ms" "$(summary_field "$CAP_LOG" captured)" "" "" "$((p1 - p0))" "" "$files" \
        "kernel=$kd;storage=$sd;archived=$archived;archive_exit_s=$astop"
      progress "loss $mode round $r: offered $((p1 - p0)), captured $(summary_field "$CAP_LOG" captured), drops kernel $kd storage $sd, $archived objects archived during the capture"
      rm -rf "$dir"; [ "$mode" = on ] && bucket_drop "$b"
    done
  done
  fact loss_capture_cmd "$(show_cmd "${CAP_CMD[@]}" | sed 's/-w [^ ]*/-w DIR\/cap/')"
  fact loss_gen_cmd "$(show_cmd "${GEN_CMD[@]}")"
  fact loss_s3_dir "$(stat -f -c %T "$S3_DATA")"
fi

# ---- Report ---------------------------------------------------------------------------------------------------
{
  echo "### Beyond one sensor: make bench-fleet (issue 35) — $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  machine_md | sed 's/one veth pair/one veth pair per sensor, three sensors/'
  echo "- Load: $(uptime | sed 's/.*load average/load average/') at the end (1, 5, 15 min; 2 CPUs; other builds may run)"
  echo "- Command: \`$CMDLINE\` (SIZE_GB=$SIZE_GB RUNS=$RUNS UP_RUNS=$UP_RUNS LOSS_ROUNDS=$LOSS_ROUNDS LOSS_PACKETS=$LOSS_PACKETS FILE_SIZE=$FILE_SIZE LOSS_FILE_SIZE=$LOSS_FILE_SIZE PARTS='$PARTS' UP_TOOLS='$UP_TOOLS' UP_RINGCAP_ARGS='$UP_RINGCAP_ARGS')"
  echo "- Versions: $(tool_version ringcap); $(rclone version 2>/dev/null | head -1 || echo 'rclone missing'); $(java -version 2>&1 | head -1)"
  echo "- Raw data: \`$CSV\`"
  "$PY" "$BENCH_LIB/fleet-report.py" "$FACTS" "$CSV"
  if [ "${#MISMATCH[@]}" -gt 0 ]; then
    echo; echo "**MISMATCH: the benchmark FAILED**"
    for m in "${MISMATCH[@]}"; do echo "- $m"; done
  fi
} | tee "$MD"
say "report: $MD"
[ "${#MISMATCH[@]}" = 0 ] || exit 1
