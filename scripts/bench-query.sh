#!/usr/bin/env bash
# Time-machine benchmark: `ringcap query` over an indexed store against `tcpdump -r` (and stenographer).
#
# What is measured and how:
#   1. A store of >= STORE_GB GB on the real disk (BENCH_DIR) is written by
#      `ringcap capture -C FILE_SIZE --compress auto` on the veth testbed (scripts/testbed.sh) from
#      `ringcap gen` (default packet-size distribution, --payload half, 1024 random source addresses × 100
#      random source ports towards one destination: 102 400 flows that recur all through the store, and every
#      source host carries ~0.1 % of the packets; a first version drew 64000 ports × 1000 destinations, which
#      made nearly every packet a flow of its own). gen sends chunks of CHUNK_PACKETS (a new
#      --seed per chunk) until the capture files total >= STORE_GB GB (10^9 bytes). Files that the capture's
#      idle-priority indexer did not reach are indexed afterwards by `ringcap index` (its CPU is reported).
#      The number of distinct 5-tuples in one file (tcpdump over the middle file) is printed.
#   2. Five queries, parameters read from the store itself (first packet of the middle file):
#        host    one source host (~0.1 % of packets)
#        5tuple  `udp and src host A and src port P and dst host B and dst port Q` of that packet
#        port    `port P` (its source port)
#        minute  `after T and before T+60s`, T = the whole second at or before that packet
#        udp     everything
#      ringcap: `ringcap query STORE EXPR -w /dev/null --json -q` (packets written to /dev/null; --jobs 2, both
#      CPUs); per run and query: cold (after `sync; echo 3 > /proc/sys/vm/drop_caches`), then warm
#      (immediately repeated). RUNS runs; median, min and max of the wall time (date +%s%N) are reported,
#      plus ringcap's own elapsed_ms, bytes_read and files by index / scanned.
#      ringcap --no-index (SCAN=1): once warm per query, the scan path of the same binary.
#      tcpdump: every file in time order, `zstd -dc F | tcpdump -r - --count EXPR` (zstd on CPU0, tcpdump on
#      CPU1), counts summed; once cold and once warm per query (not RUNS times: minutes per pass over 20 GB).
#      tcpdump has no time filter: for `minute` it prints every packet (`-nn -q -tt`, ns precision) and awk
#      counts the lines whose timestamp lies in [T, T+60 s) (so its time includes text output).
#      The packet count of every ringcap query must equal tcpdump's: a mismatch is printed loudly and the
#      script exits 1 (after writing the report).
#   3. Index size: bytes of all *.idx / bytes of all capture files, in %; the same for the flow tables
#      (*.flows.parquet).
#   4. Loss with indexing on vs off vs on while a query runs, same run: LOSS_ROUNDS × (off, on, query,
#      query-low) captures (interleaved; query: `ringcap query STORE DIR udp -w /dev/null` over the big store
#      and the directory being written, repeated while gen sends, unpinned as a user would start it, at the
#      default priority (idle while a capture writes) or with --priority low) of the same
#      LOSS_PACKETS packets of the same gen traffic (gen on CPU0 at top speed or LOSS_PPS; the capturer and all
#      its threads on CPU1), each into its own directory on the disk with `-C FILE_SIZE --compress auto`
#      (off = --no-index). Offered = receiving veth's rx_packets delta; kernel and storage drops and the
#      indexer's fields from the capture's final --json summary (a JSON line on stderr); CPU = utime+stime of
#      the capturer from wait4() (scripts/bench/rusage.py). Indexer ns/packet = indexer_cpu_ns / indexer_packets.
#   5. stenographer (STENO=auto: when stenographer, stenotype and stenoread are installed; 1: required; 0: skip):
#      it captures STENO_PACKETS of the same traffic side by side with a ringcap capture (both on the same veth,
#      same packets), then host / 5-tuple / port / udp queries are timed cold and warm on both stores
#      (`stenoread Q -w /dev/null` vs `ringcap query`). If it cannot run, the reason is in the report.
#
# Environment: STORE_GB (20), BENCH_DIR (/var/tmp/ringcap-bench-query), KEEP=1 (reuse an existing store in
#   BENCH_DIR/store; without it an old store there is deleted and rebuilt), RUNS (3), LOSS_PACKETS (3000000),
#   LOSS_ROUNDS (2), LOSS_PPS (empty = gen's top speed), FILE_SIZE (256MB; smaller only for smoke tests),
#   CHUNK_PACKETS (2000000), SCAN (1), STENO (auto), STENO_PACKETS (2000000), OUT_DIR (bench-out),
#   TCPDUMP_FROM (with KEEP=1: an earlier run's raw CSV over the same store, whose tcpdump rows are reused),
#   RINGCAP (path to the ringcap binary), PROGRESS=1 for progress lines on stderr.
# Outputs: Markdown on stdout and in OUT_DIR/query-YYYYmmdd-HHMMSS.md; raw timings OUT_DIR/query-STAMP.csv;
#   loss runs OUT_DIR/query-STAMP-loss.csv. The store stays in BENCH_DIR/store for KEEP=1 re-runs
#   (rm -rf BENCH_DIR frees the disk).
# Smoke test: STORE_GB=0.5 RUNS=1 LOSS_PACKETS=300000 STENO_PACKETS=300000 scripts/bench-query.sh
set -euo pipefail

CMDLINE="$(printf '%q ' "$0" "$@")"
PROGRESS_WANTED="${PROGRESS:-1}"   # progress lines on by default: a full run takes an hour
cd "$(dirname "$0")/.."
# shellcheck source=scripts/testbed.sh
source scripts/testbed.sh
# shellcheck source=scripts/bench/common.sh
source scripts/bench/common.sh

STORE_GB="${STORE_GB:-20}"
BENCH_DIR="${BENCH_DIR:-/var/tmp/ringcap-bench-query}"
KEEP="${KEEP:-0}"
RUNS="${RUNS:-3}"
LOSS_PACKETS="${LOSS_PACKETS:-3000000}"
LOSS_ROUNDS="${LOSS_ROUNDS:-2}"
LOSS_PPS="${LOSS_PPS:-}"
FILE_SIZE="${FILE_SIZE:-256MB}"
CHUNK_PACKETS="${CHUNK_PACKETS:-2000000}"
SCAN="${SCAN:-1}"
TCPDUMP_FROM="${TCPDUMP_FROM:-}"
STENO="${STENO:-auto}"
STENO_PACKETS="${STENO_PACKETS:-2000000}"
OUT_DIR="${OUT_DIR:-bench-out}"
PROGRESS="$PROGRESS_WANTED"
resolve_ringcap
STORE="$BENCH_DIR/store"
META="$BENCH_DIR/store.meta"   # facts of the build, kept for KEEP=1 runs
DST_PORT=5001                  # a port tcpdump does not decode (53 would make its text output slow)
GEN_FLOWS=(--src-ip 10.0.0.0-10.0.3.255 --src-ip-order random --src-port 1024-1123 --src-port-order random
  --dst-ip 10.9.0.1 --dst-port "$DST_PORT" --payload half)

# ---- Checks ---------------------------------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "run as root (network namespaces, packet sockets, drop_caches)"
for t in tcpdump zstd taskset ip awk sort; do have "$t" || die "$t is missing: run 'make deps'"; done
ringcap_has query || die "$RINGCAP has no query subcommand"
ringcap_has index || die "$RINGCAP has no index subcommand"
awk -v g="$STORE_GB" 'BEGIN { exit !(g > 0) }' || die "STORE_GB=$STORE_GB must be > 0"
[ "$RUNS" -ge 1 ] || die "RUNS must be >= 1"
DISK_FS="$(check_real_disk "$BENCH_DIR")"
STORE_TARGET="$(awk -v g="$STORE_GB" 'BEGIN { printf "%.0f", g * 1e9 }')"

mkdir -p "$OUT_DIR"
STAMP="$(date +%Y%m%d-%H%M%S)"
CSV="$OUT_DIR/query-$STAMP.csv"
LOSS_CSV="$OUT_DIR/query-$STAMP-loss.csv"
MD="$OUT_DIR/query-$STAMP.md"
WORK="$(mktemp -d /tmp/bench-query.XXXXXX)"
FACTS="$WORK/facts"   # key<TAB>value lines for the report
: >"$FACTS"
fact() { printf '%s\t%s\n' "$1" "$2" >>"$FACTS"; }
STENO_PID=""
# Stop stenographer (started by this script) and its stenotype child, which ignores SIGTERM (its unit uses -9).
steno_stop() {
  [ -n "${STENO_PID:-}" ] || return 0
  local kids c
  kids="$(cat /proc/"$STENO_PID"/task/*/children 2>/dev/null || true)"
  kill -TERM "$STENO_PID" 2>/dev/null || true   # stenographer ignores SIGINT
  for c in $kids; do kill -KILL "$c" 2>/dev/null || true; done
  stop_pid "$STENO_PID"
  STENO_PID=""
}
on_exit() {
  steno_stop
  bench_cleanup
  rm -rf "$BENCH_DIR"/loss-* "$BENCH_DIR"/steno 2>/dev/null || true
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'say "interrupted: stopping and cleaning up"; exit 130' INT
trap 'say "terminated: stopping and cleaning up"; exit 143' TERM

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now_ns() { date +%s%N; }
# Bytes of the files next to the captures: indexes and flow tables.
side_bytes() { echo $(($(sum_bytes "$1" '*.idx') + $(sum_bytes "$1" '*.flows.parquet'))); }
json_field() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d.get(sys.argv[2]); print("-" if v is None else v)' "$1" "$2"; }

# start_capture TAG DIR CPU_LIST [extra args...]: starts ringcap capture under rusage.py in the Rx namespace;
# sets CAP_WPID (wrapper), CAP_PID (ringcap), CAP_LOG (stderr: the JSON lines), CAP_RU (rusage output).
start_capture() {
  local tag="$1" dir="$2" cpus="$3"
  shift 3
  CAP_LOG="$WORK/$tag.log"; CAP_RU="$WORK/$tag.ru"; local pidf="$WORK/$tag.pid"
  CAP_CMD=("$RINGCAP" capture -i "$RX_IF" -w "$dir/cap" -C "$FILE_SIZE" --compress auto -q --json "$@")
  mkdir -p "$dir"
  "$PY" "$BENCH_LIB/rusage.py" "$CAP_RU" "$pidf" -- ip netns exec "$RX_NS" taskset -c "$cpus" "${CAP_CMD[@]}" \
    >"$WORK/$tag.out" 2>"$CAP_LOG" &
  CAP_WPID=$!
  BG_PIDS+=("$CAP_WPID")
  if ! wait_ready "$CAP_WPID" "$CAP_LOG" "listening on" || [ ! -s "$pidf" ]; then
    tail -n 5 "$CAP_LOG" >&2 || true
    die "ringcap capture ($tag) did not start"
  fi
  CAP_PID="$(cat "$pidf")"
}
stop_capture() {
  local rc=0
  wait_drained "$CAP_PID"
  stop_pid "$CAP_PID"
  wait "$CAP_WPID" || rc=$?
  [ "$rc" = 0 ] || { tail -n 5 "$CAP_LOG" >&2 || true; die "ringcap capture exited with $rc (log above)"; }
}
# gen_send SEED COUNT [extra]: ringcap gen in the Tx namespace on CPU0; its JSON report to $WORK/gen-SEED.json.
gen_send() {
  local seed="$1" n="$2"
  shift 2
  GEN_CMD=("$RINGCAP" gen -i "$TX_IF" -n "$n" --seed "$seed" "${GEN_FLOWS[@]}" --cpus 0 -q --json "$@")
  run_waited ip netns exec "$TX_NS" taskset -c 0 "${GEN_CMD[@]}" >"$WORK/gen-$seed.json" 2>"$WORK/gen-$seed.err" ||
    { cat "$WORK/gen-$seed.err" >&2; die "ringcap gen failed"; }
}

testbed_up ""

# ---- 1. The store -------------------------------------------------------------------------------------------
build_store() {
  local avail need seed=0 bytes=0 sent=0 t0 t1
  rm -rf "$STORE" "$META"
  avail="$(df -B1 --output=avail "$BENCH_DIR" | tail -1 | tr -d ' ')"
  need="$(awk -v g="$STORE_GB" 'BEGIN { printf "%.0f", 1.3 * g * 1e9 }')"
  [ "$avail" -ge "$need" ] || die "$(df -h --output=target "$BENCH_DIR" | tail -1 | tr -d ' ') has $((avail / 1000000000)) GB free; a ${STORE_GB} GB store needs >= 1.3 × that ($((need / 1000000000)) GB): free space, lower STORE_GB or set BENCH_DIR"
  say "building a store of >= $STORE_GB GB in $STORE (chunks of $CHUNK_PACKETS packets)"
  start_capture build "$STORE" 0,1
  t0="$(now_ns)"
  while [ "$bytes" -lt "$STORE_TARGET" ]; do
    seed=$((seed + 1))
    gen_send "$seed" "$CHUNK_PACKETS"
    sent=$((sent + CHUNK_PACKETS))
    bytes="$(sum_bytes "$STORE" 'cap-*.pcap*' )"
    bytes=$((bytes - $(side_bytes "$STORE")))
    progress "store: chunk $seed sent, $sent packets, $((bytes / 1000000)) MB of capture files"
  done
  stop_capture
  t1="$(now_ns)"
  {
    printf 'build_date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
    printf 'build_sent\t%s\n' "$sent"
    printf 'build_chunks\t%s\n' "$seed"
    printf 'build_seconds\t%s\n' "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')"
    local k
    for k in captured drops.kernel drops.storage files.complete files.indexed files.unindexed files.indexer_cpu_ns \
      files.indexer_packets compression.ratio compression.bytes_in bytes_written; do
      printf 'build_%s\t%s\n' "$k" "$(summary_field "$CAP_LOG" "$k")"
    done
    read -r u s _ <"$CAP_RU"
    printf 'build_capture_cpu_ns\t%s\n' "$((u + s))"
    printf 'build_capture_cmd\t%s\n' "$(show_cmd "${CAP_CMD[@]}")"
    printf 'build_gen_cmd\t%s\n' "$(show_cmd "${GEN_CMD[@]}" | sed 's/--seed [0-9]*/--seed K/')"
  } >"$META"
  # Catch up: index the files the capture's indexer did not reach (timed, CPU from wait4()).
  say "indexing the files the capture did not index"
  t0="$(now_ns)"
  "$PY" "$BENCH_LIB/rusage.py" "$WORK/index.ru" "$WORK/index.pid" -- "$RINGCAP" index "$STORE" --json -q >"$WORK/index.json" ||
    die "ringcap index $STORE failed"
  t1="$(now_ns)"
  read -r u s _ <"$WORK/index.ru"
  "$PY" - "$WORK/index.json" "$((u + s))" "$t0" "$t1" >>"$META" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
done = [r for r in rows if r.get("status") == "indexed"]
pk = sum(r.get("packets") or 0 for r in done)
cpu = int(sys.argv[2])
print(f"catchup_files\t{len(done)}")
print(f"catchup_packets\t{pk}")
print(f"catchup_cpu_ns\t{cpu}")
print(f"catchup_seconds\t{(int(sys.argv[4]) - int(sys.argv[3])) / 1e9:.1f}")
print(f"catchup_ns_per_packet\t{cpu / pk:.1f}" if pk else "catchup_ns_per_packet\t-")
EOF
}

if [ "$KEEP" = 1 ] && [ -f "$META" ] && [ -n "$(capture_files "$STORE" | head -1)" ]; then
  say "KEEP=1: reusing the store in $STORE"
else
  build_store
fi
cat "$META" >>"$FACTS"
fact store_reused "$KEEP"
fact tcpdump_from "$TCPDUMP_FROM"

# Index status of every file (a no-op when all are current; builds what is missing) and the store's facts.
"$RINGCAP" index "$STORE" --json -q >"$WORK/index-check.json" || die "ringcap index $STORE failed"
mapfile -t FILES < <(capture_files "$STORE")
[ "${#FILES[@]}" -gt 0 ] || die "no capture files in $STORE"
STORE_BYTES="$(($(sum_bytes "$STORE" 'cap-*') - $(side_bytes "$STORE")))"
IDX_BYTES="$(sum_bytes "$STORE" '*.idx')"
FLOWS_BYTES="$(sum_bytes "$STORE" '*.flows.parquet')"
PACKETS="$("$PY" -c 'import json,sys; print(sum(r.get("packets") or 0 for r in json.load(open(sys.argv[1]))))' "$WORK/index-check.json")"
NOT_CURRENT="$("$PY" -c 'import json,sys; print(sum(1 for r in json.load(open(sys.argv[1])) if r.get("status") not in ("current","indexed")))' "$WORK/index-check.json")"
[ "$NOT_CURRENT" = 0 ] || say "warning: $NOT_CURRENT files could not be indexed (see $WORK/index-check.json)"
# Uncompressed pcap bytes (what a query streams for `udp`), from the zstd frame headers.
RAW_BYTES="$(for f in "${FILES[@]}"; do case "$f" in *.zst) zstd -lv "$f" 2>/dev/null | sed -n 's/^Decompressed Size:.*(\([0-9]*\) B).*/\1/p' ;; *) stat -c %s "$f" ;; esac; done | awk '{ s += $1; n++ } END { printf "%.0f %d\n", s, n }')"
read -r RAW_BYTES RAW_N <<<"$RAW_BYTES"
[ "$RAW_N" = "${#FILES[@]}" ] || RAW_BYTES=-
fact store_dir "$STORE"
fact store_fs "$DISK_FS, $(df -h --output=source "$STORE" | tail -1)"
fact store_files "${#FILES[@]}"
fact store_bytes "$STORE_BYTES"
fact store_raw_bytes "$RAW_BYTES"
fact store_packets "$PACKETS"
fact index_bytes "$IDX_BYTES"
fact flows_bytes "$FLOWS_BYTES"
fact index_not_current "$NOT_CURRENT"
say "store: ${#FILES[@]} files, $((STORE_BYTES / 1000000)) MB, $PACKETS packets, index $((IDX_BYTES / 1000000)) MB"

# ---- 2. Query parameters from the middle file ----------------------------------------------------------------
MID="${FILES[$((${#FILES[@]} / 2))]}"
read_cap() { case "$1" in *.zst) zstd -dcq "$1" ;; *.lz4) lz4 -dcq "$1" ;; *.gz) gzip -dc "$1" ;; *) cat "$1" ;; esac; }
FIRST="$(read_cap "$MID" | tcpdump -r - -nn -q -tt --time-stamp-precision=nano -c 50 'udp' 2>/dev/null |
  awk -v dp="$DST_PORT" '{ s = $3; d = $5; sub(/:$/, "", d); sp = s; sub(/.*\./, "", sp); if (sp != dp) { print $1, s, d; exit } }')" || true
[ -n "$FIRST" ] || die "cannot read a packet from $MID"
read -r TS SRC DST <<<"$FIRST"
SRC_IP="${SRC%.*}"; SRC_PORT="${SRC##*.}"; DST_IP="${DST%.*}"; DPORT="${DST##*.}"
T0="${TS%%.*}"; T1=$((T0 + 60))
T0_S="$(date -u -d "@$T0" +%Y-%m-%dT%H:%M:%SZ)"; T1_S="$(date -u -d "@$T1" +%Y-%m-%dT%H:%M:%SZ)"
QUERIES=(host 5tuple port minute udp)
declare -A QEXPR TEXPR
QEXPR[host]="host $SRC_IP";                           TEXPR[host]="${QEXPR[host]}"
QEXPR[5tuple]="udp and src host $SRC_IP and src port $SRC_PORT and dst host $DST_IP and dst port $DPORT"
TEXPR[5tuple]="${QEXPR[5tuple]}"
QEXPR[port]="port $SRC_PORT";                         TEXPR[port]="${QEXPR[port]}"
QEXPR[minute]="after $T0_S and before $T1_S";          TEXPR[minute]=""   # awk does the time window
QEXPR[udp]="udp";                                     TEXPR[udp]="udp"

# Flows in one file (distinct 5-tuples; all packets are UDP) and the share of the host in it.
read -r SAMPLE_PKTS SAMPLE_FLOWS SAMPLE_DSTS SAMPLE_HOST < <(read_cap "$MID" | tcpdump -r - -nn -q -t 2>/dev/null |
  awk -v h="$SRC_IP." '{ n++; f[$2 " " $4] = 1; d = $2; sub(/\.[0-9]+$/, "", d); ds[d] = 1; if (index($2, h) == 1) hn++ }
    END { nf = 0; for (k in f) nf++; nd = 0; for (k in ds) nd++; print n + 0, nf, nd, hn + 0 }')
fact sample_file "$(basename "$MID")"
fact sample_packets "$SAMPLE_PKTS"
fact sample_flows "$SAMPLE_FLOWS"
fact sample_dst_hosts "$SAMPLE_DSTS"
fact sample_host_packets "$SAMPLE_HOST"
say "flows: $SAMPLE_FLOWS distinct 5-tuples among $SAMPLE_PKTS packets of $(basename "$MID") ($SAMPLE_DSTS source hosts; $SRC_IP: $SAMPLE_HOST packets)"
for q in "${QUERIES[@]}"; do fact "expr_$q" "${QEXPR[$q]}"; done
fact minute_epoch "$T0 $T1"

# ---- Timed runs ----------------------------------------------------------------------------------------------
echo "tool,query,cache,run,wall_ms,elapsed_ms,packets,bytes_read,files_by_index,files_scanned,status" >"$CSV"
# ringcap_query QUERY CACHE RUN [--no-index]: one timed ringcap query, one CSV row; sets RC_PACKETS.
ringcap_query() {
  local q="$1" cache="$2" run="$3" tool=ringcap t0 t1 rc=0 status=ok
  shift 3
  [ "$#" -gt 0 ] && tool=ringcap-noindex
  [ "$cache" = cold ] && drop_caches
  t0="$(now_ns)"
  "$RINGCAP" query "$STORE" "${QEXPR[$q]}" -w /dev/null --json -q "$@" >"$WORK/q.json" 2>"$WORK/q.err" || rc=$?
  t1="$(now_ns)"
  local wall el pk br fi fs
  wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e6 }')"
  if [ "$rc" = 0 ]; then
    el="$(json_field "$WORK/q.json" elapsed_ms)"; pk="$(json_field "$WORK/q.json" packets)"
    br="$(json_field "$WORK/q.json" bytes_read)"; fi="$(json_field "$WORK/q.json" files_by_index)"
    fs="$(json_field "$WORK/q.json" files_scanned)"
  else
    status="exit $rc: $(tail -n 1 "$WORK/q.err" | tr ',' ';')"; el=; pk=; br=; fi=; fs=
    say "ringcap query failed: $(show_cmd "$RINGCAP" query "$STORE" "${QEXPR[$q]}" -w /dev/null --json -q "$@")"
    cat "$WORK/q.err" >&2
  fi
  RC_PACKETS="$pk"
  echo "$tool,$q,$cache,$run,$wall,$el,$pk,$br,$fi,$fs,$status" >>"$CSV"
  progress "$tool $q $cache run $run: ${wall} ms, $pk packets, $br bytes read"
}
# tcpdump_query QUERY CACHE: tcpdump over every file, one CSV row; sets TD_PACKETS. With TCPDUMP_FROM (the raw
# CSV of an earlier run over the same store, KEEP=1), its tcpdump row is taken instead: tcpdump's passes are most of
# a 20 GB run's time and do not change when ringcap does.
tcpdump_query() {
  local q="$1" cache="$2" t0 t1 f c n=0 status=ok expr="${TEXPR[$1]}"
  if [ -n "$TCPDUMP_FROM" ]; then
    local row
    row="$(awk -F, -v q="$q" -v c="$cache" '$1 == "tcpdump" && $2 == q && $3 == c { print; exit }' "$TCPDUMP_FROM")"
    [ -n "$row" ] || die "TCPDUMP_FROM=$TCPDUMP_FROM has no tcpdump row for $q $cache"
    echo "$row" >>"$CSV"
    TD_PACKETS="$(echo "$row" | cut -d, -f7)"
    progress "tcpdump $q $cache: taken from $TCPDUMP_FROM ($TD_PACKETS packets)"
    return
  fi
  [ "$cache" = cold ] && drop_caches
  t0="$(now_ns)"
  for f in "${FILES[@]}"; do
    if [ "$q" = minute ]; then
      c="$(taskset -c 0 zstd -dcq "$f" | taskset -c 1 tcpdump -r - -nn -q -tt --time-stamp-precision=nano 2>/dev/null |
        awk -v a="$T0" -v b="$T1" '{ s = $1; sub(/\..*/, "", s); s += 0; if (s >= a && s < b) n++ } END { print n + 0 }')" || status="failed on $f"
    else
      # shellcheck disable=SC2086  # tcpdump takes the expression as one argument
      c="$(taskset -c 0 zstd -dcq "$f" | taskset -c 1 tcpdump -r - --count -nn $expr 2>/dev/null | awk '$2 ~ /^packets?$/ { print $1 }')" ||
        status="failed on $f"
    fi
    n=$((n + ${c:-0}))
  done
  t1="$(now_ns)"
  TD_PACKETS="$n"
  local wall
  wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e6 }')"
  echo "tcpdump,$q,$cache,1,$wall,,$n,$STORE_BYTES,,${#FILES[@]},$status" >>"$CSV"
  progress "tcpdump $q $cache: ${wall} ms, $n packets"
}

declare -A RC_COUNT TD_COUNT
MISMATCH=()
for ((run = 1; run <= RUNS; run++)); do
  for q in "${QUERIES[@]}"; do
    for cache in cold warm; do
      ringcap_query "$q" "$cache" "$run"
      if [ -z "$RC_PACKETS" ]; then
        MISMATCH+=("$q: ringcap query failed (run $run, $cache)")
      elif [ -n "${RC_COUNT[$q]:-}" ] && [ "${RC_COUNT[$q]}" != "$RC_PACKETS" ]; then
        MISMATCH+=("$q: ringcap returned ${RC_COUNT[$q]} and then $RC_PACKETS packets")
      fi
      RC_COUNT[$q]="${RC_PACKETS:-${RC_COUNT[$q]:-}}"
    done
  done
done
if [ "$SCAN" = 1 ]; then
  for q in "${QUERIES[@]}"; do ringcap_query "$q" warm 1 --no-index; done
fi
say "tcpdump over all ${#FILES[@]} files, cold and warm, per query (slow)"
for q in "${QUERIES[@]}"; do
  for cache in cold warm; do
    tcpdump_query "$q" "$cache"
    if [ -n "${TD_COUNT[$q]:-}" ] && [ "${TD_COUNT[$q]}" != "$TD_PACKETS" ]; then
      MISMATCH+=("$q: tcpdump counted ${TD_COUNT[$q]} and then $TD_PACKETS packets")
    fi
    TD_COUNT[$q]="$TD_PACKETS"
  done
  if [ "${RC_COUNT[$q]:-}" != "${TD_COUNT[$q]}" ]; then
    MISMATCH+=("$q: ringcap query returned ${RC_COUNT[$q]:-nothing} packets, tcpdump ${TD_COUNT[$q]} ('${QEXPR[$q]}')")
  fi
done
if [ "$SCAN" = 1 ]; then
  # The scan path must agree too.
  while IFS=, read -r tool q _ _ _ _ pk _; do
    [ "$tool" = ringcap-noindex ] || continue
    [ "$pk" = "${TD_COUNT[$q]}" ] || MISMATCH+=("$q: ringcap query --no-index returned ${pk:-nothing} packets, tcpdump ${TD_COUNT[$q]}")
  done <"$CSV"
fi
for m in "${MISMATCH[@]}"; do say "MISMATCH: $m"; done

# ---- 4. Loss with indexing on vs off -------------------------------------------------------------------------
echo "mode,round,offered,captured,kernel_drops,storage_drops,cpu_ns,files,indexed,unindexed,indexer_cpu_ns,indexer_packets,store_bytes,index_bytes,caught_up" >"$LOSS_CSV"
loss_run() {
  local mode="$1" round="$2" dir="$BENCH_DIR/loss-$1-$2" p0 p1 extra=() u s
  [ "$mode" = off ] && extra=(--no-index)
  rm -rf "$dir"
  start_capture "loss-$mode-$round" "$dir" 1 "${extra[@]}"
  p0="$(rx_packets)"
  local qpid=""
  if [ "$mode" = query ] || [ "$mode" = query-low ]; then
    # A user's broad query of the big store and of the directory the capture is writing, repeated while
    # the capture runs, as a user would start it (unpinned): does it make the capture drop? `query`: the
    # default priority (auto: idle, since a capture is writing there); `query-low`: --priority low (nice 10).
    local prio=()
    [ "$mode" = query-low ] && prio=(--priority low)
    (while :; do "$RINGCAP" query "$BENCH_DIR/store" "$dir" udp -w /dev/null -q --json "${prio[@]}" >>"$WORK/loss-$mode-$round.json" 2>/dev/null || true; done) &
    qpid=$!
  fi
  gen_send 1000 "$LOSS_PACKETS" ${LOSS_PPS:+--pps "$LOSS_PPS"}
  if [ -n "$qpid" ]; then
    kill "$qpid" 2>/dev/null || true
    pkill -f "$RINGCAP query $BENCH_DIR/store" 2>/dev/null || true
    sleep 0.2
    wait "$qpid" 2>/dev/null || true
    # Each finished query printed one JSON summary line: how many ran (and read the store) meanwhile.
    fact "loss_queries_${mode}_$round" "$(grep -c '"packets"' "$WORK/loss-$mode-$round.json" 2>/dev/null || echo 0)"
  fi
  stop_capture
  p1="$(rx_packets)"
  read -r u s _ <"$CAP_RU"
  local f
  f=()
  for k in captured drops.kernel drops.storage; do f+=("$(summary_field "$CAP_LOG" "$k")"); done
  local nfiles
  nfiles="$(capture_files "$dir" | wc -l)"
  local idx=()
  for k in files.indexed files.unindexed files.indexer_cpu_ns files.indexer_packets files.caught_up; do idx+=("$(summary_field "$CAP_LOG" "$k")"); done
  echo "$mode,$round,$((p1 - p0)),${f[0]},${f[1]},${f[2]},$((u + s)),$nfiles,${idx[0]},${idx[1]},${idx[2]},${idx[3]},$(($(sum_bytes "$dir" 'cap-*') - $(side_bytes "$dir"))),$(sum_bytes "$dir" '*.idx'),${idx[4]:-0}" >>"$LOSS_CSV"
  progress "loss $mode round $round: offered $((p1 - p0)), captured ${f[0]}, drops kernel ${f[1]} storage ${f[2]}, indexed ${idx[0]}/${nfiles} files"
  rm -rf "$dir"
  sync
}
for ((round = 1; round <= LOSS_ROUNDS; round++)); do
  loss_run off "$round"
  loss_run on "$round"
  loss_run query "$round"
  loss_run query-low "$round"
done
if [ "$LOSS_ROUNDS" -gt 0 ]; then
  fact loss_capture_cmd "$(show_cmd "${CAP_CMD[@]}" | sed "s#$BENCH_DIR/loss-[a-z]*-[0-9]*#DIR#")"
  fact loss_gen_cmd "$(show_cmd "${GEN_CMD[@]}")"
fi

# ---- 5. stenographer -----------------------------------------------------------------------------------------
STENO_STATUS=""
steno_query() {   # steno_query QUERY CACHE: one timed stenoread, one CSV row
  local q="$1" cache="$2" t0 t1 n
  [ "$cache" = cold ] && drop_caches
  t0="$(now_ns)"
  n="$(STENOGRAPHER_CONFIG="$SD/config" ip netns exec "$RX_NS" stenoread "${SQEXPR[$q]}" -w - 2>/dev/null | tcpdump -r - --count 2>/dev/null | awk '$2 ~ /^packets?$/ { print $1 }')" || true
  t1="$(now_ns)"
  echo "stenographer,$q,$cache,1,$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e6 }'),,${n:-},,,,side-by-side" >>"$CSV"
  progress "stenographer $q $cache: ${n:-?} packets"
}
steno_side_by_side() {
  SD="$BENCH_DIR/steno"
  rm -rf "$SD"; mkdir -p "$SD/thread0/packets" "$SD/thread0/index" "$SD/ringcap"
  chown -R stenographer:stenographer "$SD/thread0" || { STENO_STATUS="no stenographer user (chown failed)"; return; }
  cat >"$SD/config" <<EOF
{ "Threads": [ { "PacketsDirectory": "$SD/thread0/packets", "IndexDirectory": "$SD/thread0/index",
                 "MaxDirectoryFiles": 30000, "DiskFreePercentage": 10 } ],
  "StenotypePath": "$(command -v stenotype)", "Interface": "$RX_IF", "Port": 1234, "Host": "127.0.0.1",
  "Flags": [], "CertPath": "/etc/stenographer/certs" }
EOF
  chmod 644 "$SD/config"
  ip -n "$RX_NS" link set lo up
  ip netns exec "$RX_NS" setpriv --reuid=stenographer --regid=stenographer --init-groups \
    "$(command -v stenographer)" -config "$SD/config" -syslog=false >"$WORK/steno.log" 2>&1 &
  STENO_PID=$!
  BG_PIDS+=("$STENO_PID")
  local i
  for ((i = 0; i < 100; i++)); do [ "$(rx_packet_sockets)" -gt 0 ] && break; sleep 0.1; done
  [ "$(rx_packet_sockets)" -gt 0 ] || { STENO_STATUS="stenotype did not open a packet socket: $(tail -n 2 "$WORK/steno.log" | tr '\n' ' ')"; steno_stop; return; }
  sleep 2
  start_capture steno-ringcap "$SD/ringcap" 0,1
  gen_send 2000 "$STENO_PACKETS"
  stop_capture
  "$RINGCAP" index "$SD/ringcap" -q >/dev/null || true
  # stenotype closes a file after 1 minute of age; stenographer then indexes it and serves its packets.
  say "waiting for stenographer to close and index its file (up to 3 minutes)"
  local want="$STENO_PACKETS" got=0
  for ((i = 0; i < 36; i++)); do
    sleep 5
    got="$(STENOGRAPHER_CONFIG="$SD/config" ip netns exec "$RX_NS" stenoread "host $DST_IP" -w - 2>/dev/null | tcpdump -r - --count 2>/dev/null | awk '$2 ~ /^packets?$/ { print $1 }')" || got=0
    [ "${got:-0}" -gt 0 ] && [ -z "$(find "$SD/thread0/packets" -name '.*' -size +0c)" ] && break
  done
  [ "${got:-0}" -gt 0 ] || { STENO_STATUS="stenographer served no packets within 3 minutes: $(tail -n 2 "$WORK/steno.log" | tr '\n' ' ')"; steno_stop; return; }
  declare -gA SQEXPR
  # stenographer's query language has no src/dst: the 5-tuple is `host A and host B and port P and port Q`.
  SQEXPR[host]="host $SRC_IP"; SQEXPR[5tuple]="host $SRC_IP and host $DST_IP and port $SRC_PORT and port $DPORT"
  SQEXPR[port]="port $SRC_PORT"; SQEXPR[udp]="udp"
  local q saved_store="$STORE"
  STORE="$SD/ringcap"
  for q in host 5tuple port udp; do
    steno_query "$q" cold; steno_query "$q" warm
    ringcap_query "$q" cold sbs; ringcap_query "$q" warm sbs
  done
  STORE="$saved_store"
  fact steno_store_bytes "$(du -sb "$SD/thread0/packets" | cut -f1)"
  fact steno_index_bytes "$(du -sb "$SD/thread0/index" | cut -f1)"
  fact steno_ringcap_bytes "$(sum_bytes "$SD/ringcap" 'cap-*')"
  fact steno_ringcap_packets_sent "$want"
  STENO_STATUS="ran: side by side on $STENO_PACKETS packets (stenographer $(dpkg-query -W -f '${Version}' stenographer 2>/dev/null || echo '?'))"
  steno_stop
  rm -rf "$SD"
}
if [ "$STENO" = 0 ]; then
  STENO_STATUS="skipped (STENO=0)"
elif ! have stenographer || ! have stenotype || ! have stenoread; then
  STENO_STATUS="not installed (apt-get install stenographer stenographer-client; candidate: $(apt-cache policy stenographer 2>/dev/null | awk '/Candidate/ { print $2 }'))"
  [ "$STENO" = 1 ] && die "STENO=1 but $STENO_STATUS"
else
  steno_side_by_side
fi
fact steno_status "$STENO_STATUS"

# ---- Report ----------------------------------------------------------------------------------------------------
{
  echo "### Time-machine benchmark: ringcap query vs tcpdump ($(date -u +%Y-%m-%d))"
  echo
  machine_md
  echo "- Command: \`$CMDLINE\` (STORE_GB=$STORE_GB RUNS=$RUNS LOSS_PACKETS=$LOSS_PACKETS LOSS_ROUNDS=$LOSS_ROUNDS FILE_SIZE=$FILE_SIZE CHUNK_PACKETS=$CHUNK_PACKETS KEEP=$KEEP)"
  echo "- Versions: $(tool_version ringcap); $(tool_version tcpdump); zstd $(zstd -V | sed 's/.*v\([0-9.]*\).*/\1/')"
  echo "- Raw data: \`$CSV\`, \`$LOSS_CSV\`"
  "$PY" - "$FACTS" "$CSV" "$LOSS_CSV" "$RUNS" <<'EOF'
import csv, statistics, sys
facts = {}
for line in open(sys.argv[1]):
    k, _, v = line.rstrip("\n").partition("\t")
    facts[k] = v
rows = list(csv.DictReader(open(sys.argv[2])))
loss = list(csv.DictReader(open(sys.argv[3])))
runs = sys.argv[4]

def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None

def gb(b):
    b = num(b)
    return "-" if b is None else f"{b / 1e9:.2f} GB"

def ms(v):
    if v is None:
        return "-"
    return f"{v:.1f} ms" if v < 10000 else f"{v / 1000:.1f} s"

def stat(sel):
    v = [num(r["wall_ms"]) for r in sel if num(r["wall_ms"]) is not None]
    if not v:
        return None, "-"
    med = statistics.median(v)
    return med, ms(med) + (f" ({ms(min(v))}–{ms(max(v))})" if len(v) > 1 else "")

sb, raw, pk = num(facts.get("store_bytes")), num(facts.get("store_raw_bytes")), num(facts.get("store_packets"))
idx = num(facts.get("index_bytes"))
print(f"- Store: `{facts.get('store_dir')}` ({facts.get('store_fs')}): {facts.get('store_files')} files, {gb(sb)} on disk "
      f"({gb(raw)} of pcap before compression), {int(pk or 0):,} packets; built {facts.get('build_date', '?')}"
      + (" (reused, KEEP=1)" if facts.get("store_reused") == "1" else ""))
print(f"- Build: `{facts.get('build_gen_cmd')}` × {facts.get('build_chunks')} chunks (K = 1, 2, ...) into "
      f"`{facts.get('build_capture_cmd')}`; {int(num(facts.get('build_sent')) or 0):,} sent, {facts.get('build_captured')} captured, "
      f"drops kernel {facts.get('build_drops.kernel')} storage {facts.get('build_drops.storage')}; "
      f"{facts.get('build_files.indexed')} of {facts.get('build_files.complete')} files indexed during the capture, "
      f"{facts.get('catchup_files')} by `ringcap index` afterwards ({facts.get('catchup_seconds')} s, "
      f"{facts.get('catchup_ns_per_packet')} ns CPU/packet incl. decompression)")
print(f"- Flows: {int(num(facts.get('sample_flows')) or 0):,} distinct 5-tuples among {int(num(facts.get('sample_packets')) or 0):,} packets "
      f"of one file ({facts.get('sample_file')}; {facts.get('sample_dst_hosts')} source hosts); the whole store has more")
print(f"- ringcap: `ringcap query STORE EXPR -w /dev/null --json -q` (-j 2, both CPUs); cold = after `sync; echo 3 > "
      f"/proc/sys/vm/drop_caches`, warm = repeated at once; {runs} run(s), median (min–max) of the wall time")
print("- tcpdump: `zstd -dc F | tcpdump -r - --count EXPR` for every file in time order (zstd on CPU0, tcpdump on CPU1); "
      "once cold, once warm (not repeated: a pass reads the whole store). `minute`: tcpdump has no time filter, so "
      "`tcpdump -r - -nn -q -tt --time-stamp-precision=nano` and awk on the timestamp (includes text output)")
print()
print("| query | expression | packets ringcap | packets tcpdump | equal | ringcap cold | ringcap warm | bytes read | files index/scan | ringcap --no-index warm | tcpdump cold | tcpdump warm | speed-up warm |")
print("|---|---|---:|---:|:-:|---:|---:|---:|---:|---:|---:|---:|---:|")
summ = {}
for q in ["host", "5tuple", "port", "minute", "udp"]:
    rc = [r for r in rows if r["tool"] == "ringcap" and r["query"] == q and r["run"] != "sbs"]
    cold_m, cold_s = stat([r for r in rc if r["cache"] == "cold"])
    warm_m, warm_s = stat([r for r in rc if r["cache"] == "warm"])
    td = [r for r in rows if r["tool"] == "tcpdump" and r["query"] == q]
    tdc, tdc_s = stat([r for r in td if r["cache"] == "cold"])
    tdw, tdw_s = stat([r for r in td if r["cache"] == "warm"])
    _, scan_s = stat([r for r in rows if r["tool"] == "ringcap-noindex" and r["query"] == q])
    prc = {r["packets"] for r in rc}
    ptd = {r["packets"] for r in td}
    eq = "yes" if len(prc) == 1 and prc == ptd else "**NO**"
    br = rc[0]["bytes_read"] if rc else "-"
    fi = f"{rc[0]['files_by_index']}/{rc[0]['files_scanned']}" if rc else "-"
    sp = f"{tdw / warm_m:.0f}×" if tdw and warm_m else "-"
    summ[q] = dict(cold=cold_m, warm=warm_m, tdw=tdw, eq=eq)
    print(f"| {q} | `{facts.get('expr_' + q)}` | {'/'.join(sorted(prc))} | {'/'.join(sorted(ptd))} | {eq} | {cold_s} | {warm_s} | "
          f"{gb(br)} | {fi} | {scan_s} | {tdc_s} | {tdw_s} | {sp} |")
print()
print("Addresses and ports are drawn uniformly at random per packet, so one host's packets lie in a large share of the "
      "compressed frames (16 KiB of pcap each when indexed since 2026-11-28; 32, 64 and 256 KiB earlier): `bytes read` shows how much of the store the index let "
      "ringcap skip.")
if facts.get("tcpdump_from"):
    print()
    print(f"tcpdump's rows are taken from an earlier run over the same store (`{facts.get('tcpdump_from')}`).")
print()
ipct = 100 * idx / sb if idx is not None and sb else None
print(f"Index: {gb(idx)} = **{ipct:.2f} %** of the store's {gb(sb)}; {idx / pk:.1f} bytes per packet" if ipct is not None and pk else "Index: -")
fl = num(facts.get("flows_bytes"))
print(f"Flow tables (Parquet): {gb(fl)} = **{100 * fl / sb:.2f} %** of the store" if fl is not None and sb else "Flow tables: -")
print()
# Loss
print("Capture loss, indexing off vs on vs on with a broad query (`ringcap query STORE DIR udp -w /dev/null` over the "
      "big store and the directory being written, repeated while the capture runs, unpinned; `query`: default priority, "
      "idle while a capture writes there; `query-low`: `--priority low`, nice 10) (interleaved rounds, same traffic; "
      "capturer pinned to CPU1, gen + softirq on CPU0):")
print(f"`{facts.get('loss_gen_cmd')}` into `{facts.get('loss_capture_cmd')}` (off: `--no-index`)")
print()
print("| mode | round | offered | captured | kernel drops | storage drops | loss | capture CPU ns/pkt | files indexed during capture (live + caught up) | indexer ns/pkt | index % |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
idx_nspp = []
loss_by = {"on": [], "off": [], "query": [], "query-low": []}
for r in loss:
    off, cap = num(r["offered"]), num(r["captured"])
    lost = f"{100 * (1 - cap / off):.3f} %" if off and cap is not None else "-"
    if off and cap is not None:
        loss_by[r["mode"]].append(1 - cap / off)
    cpu = f"{num(r['cpu_ns']) / off:.0f}" if off else "-"
    ic, ip_ = num(r["indexer_cpu_ns"]), num(r["indexer_packets"])
    nspp = f"{ic / ip_:.1f}" if ic is not None and ip_ else "-"
    if r["mode"] == "on" and ic is not None and ip_:
        idx_nspp.append(ic / ip_)
    ipc = f"{100 * num(r['index_bytes']) / num(r['store_bytes']):.2f}" if num(r["store_bytes"]) else "-"
    print(f"| {r['mode']} | {r['round']} | {int(off or 0):,} | {r['captured']} | {r['kernel_drops']} | {r['storage_drops']} | {lost} | {cpu} | "
          f"{r['indexed']}{' + ' + r['caught_up'] if r.get('caught_up') else ''}/{r['files']} | {nspp} | {ipc} |")
for m in ["query", "query-low"]:
    nq = [facts[k] for k in sorted(facts) if k.startswith(f"loss_queries_{m}_")]
    if nq:
        print()
        print(f"Broad queries finished while the `{m}` rounds captured: {', '.join(nq)} (per round).")
print()
# stenographer
st = facts.get("steno_status", "-")
print(f"stenographer: {st}")
srows = [r for r in rows if r["tool"] == "stenographer"]
if srows:
    print()
    print("Side by side on the same packets (both captured from one veth at once; stenographer stores plain pcap blocks "
          f"{gb(facts.get('steno_store_bytes'))} + index {gb(facts.get('steno_index_bytes'))}; ringcap {gb(facts.get('steno_ringcap_bytes'))} incl. index):")
    print()
    print("| query | packets stenographer | packets ringcap | stenoread cold | stenoread warm | ringcap cold | ringcap warm |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for q in ["host", "5tuple", "port", "udp"]:
        s = [r for r in srows if r["query"] == q]
        rr = [r for r in rows if r["tool"] == "ringcap" and r["query"] == q and r["run"] == "sbs"]
        print(f"| {q} | {'/'.join(sorted({r['packets'] for r in s}))} | {'/'.join(sorted({r['packets'] for r in rr}))} | "
              f"{stat([r for r in s if r['cache'] == 'cold'])[1]} | {stat([r for r in s if r['cache'] == 'warm'])[1]} | "
              f"{stat([r for r in rr if r['cache'] == 'cold'])[1]} | {stat([r for r in rr if r['cache'] == 'warm'])[1]} |")
print()
# Targets
def mark(ok):
    return "-" if ok is None else ("met" if ok else "**missed**")
h = summ.get("host", {})
u = summ.get("udp", {})
gbps = raw / (u["warm"] / 1e3) / 1e9 if raw and u.get("warm") else None
spd = h["tdw"] / h["warm"] if h.get("tdw") and h.get("warm") else None
lon = statistics.mean(loss_by["on"]) if loss_by["on"] else None
loff = statistics.mean(loss_by["off"]) if loss_by["off"] else None
inspp = statistics.median(idx_nspp) if idx_nspp else None
print("| target | measured | |")
print("|---|---|---|")
print(f"| one-host query cold < 1 s | {ms(h.get('cold'))} over {gb(sb)} | {mark(None if h.get('cold') is None else h['cold'] < 1000)} |")
print(f"| one-host query warm < 100 ms | {ms(h.get('warm'))} | {mark(None if h.get('warm') is None else h['warm'] < 100)} |")
print(f"| ≥ 100 × faster than tcpdump warm | {'-' if spd is None else f'{spd:.0f}×'} | {mark(None if spd is None else spd >= 100)} |")
print(f"| packets equal to tcpdump's | {', '.join(q + ' ' + s['eq'] for q, s in summ.items())} | {mark(all(s['eq'] == 'yes' for s in summ.values()))} |")
print(f"| index ≤ 1 % of the store | {'-' if ipct is None else f'{ipct:.2f} %'} | {mark(None if ipct is None else ipct <= 1)} |")
print(f"| indexing adds no loss | off {'-' if loff is None else f'{100 * loff:.3f} %'}, on {'-' if lon is None else f'{100 * lon:.3f} %'} (mean) | {mark(None if lon is None or loff is None else lon <= loff)} |")
lq = statistics.mean(loss_by["query"]) if loss_by["query"] else None
lql = statistics.mean(loss_by["query-low"]) if loss_by["query-low"] else None
print(f"| a query never makes the capture drop | on {'-' if lon is None else f'{100 * lon:.3f} %'}, on + query {'-' if lq is None else f'{100 * lq:.3f} %'} (mean; with `--priority low`: {'-' if lql is None else f'{100 * lql:.3f} %'}) | {mark(None if lq is None or lon is None else lq <= lon)} |")
print(f"| indexer ≤ 30 ns CPU per packet | {'-' if inspp is None else f'{inspp:.1f} ns'} (median of the on rounds) | {mark(None if inspp is None else inspp <= 30)} |")
print(f"| broad query (`udp`) streams ≥ 1 GB/s warm | {'-' if gbps is None else f'{gbps:.2f} GB/s'} of pcap | {mark(None if gbps is None else gbps >= 1)} |")
EOF
  if [ "${#MISMATCH[@]}" -gt 0 ]; then
    echo
    echo "**MISMATCH: the benchmark FAILED**"
    for m in "${MISMATCH[@]}"; do echo "- $m"; done
  fi
  echo
  echo "Store kept in \`$STORE\` (re-run with KEEP=1 to reuse it; \`rm -rf $BENCH_DIR\` frees the disk)."
} | tee "$MD"
say "report: $MD"
[ "${#MISMATCH[@]}" = 0 ] || exit 1
