#!/usr/bin/env bash
# Everything on, measured whole (issue 37 item 3): `ringcap capture -C 256MB --compress auto` with the index and
# the flow tables on, against `tcpdump -w` and `tcpdump -w - | zstd -1`, on the same traffic.
#
# What is measured and how:
#   Traffic: one `ringcap synth` trace (b-model arrivals, many TCP and UDP flows both ways, Zipf servers,
#     Pareto flow sizes; DURATION at PPS, --seed SEED), written once to BENCH_DISK_DIR, replayed for every run
#     with `ringcap replay --topspeed` from the Tx namespace of the veth testbed (scripts/testbed.sh, no RPS),
#     pinned to TX_CPU (the receive softirq runs there too). synth's payload bytes are all zero: every
#     compressor squeezes them far better than real payloads (see the report's note).
#   Capturers, each in the Rx namespace under `taskset -c CAP_CPU` (so every thread and child shares one CPU),
#   with the same RING_MIB ring/buffer and writing to the same disk directory (BENCH_DISK_DIR, a real disk):
#     ringcap       `ringcap capture -i IF -B KiB -w DIR/cap -C FILE_SIZE --compress auto --cpus CAP_CPU -q --json`
#                   (file mode indexes each completed file and writes its flow table: both on by default)
#     tcpdump       `tcpdump -i IF -B KiB -w FILE.pcap`
#     tcpdump-zstd  `sh -c 'tcpdump -i IF -B KiB -w - | zstd -1 -q -o FILE.pcap.zst'` (both processes counted)
#   Rounds are interleaved (round 1 of every tool, then round 2, ...; the order rotates by one each round).
#   Per run:
#     offered     receiving veth's rx_packets delta over the replay and the drain
#     captured    packets in the files written: `capinfos -M -c` of every file (.zst through `zstd -dc`); lost = offered -
#                 captured. Also the tool's own summary: tcpdump's "captured" and "dropped by kernel" lines,
#                 ringcap's JSON summary (captured, drops by stage, files indexed, compression ratio)
#     CPU         utime+stime from wait4() of the process started (scripts/bench/rusage.py): every thread of
#                 it (ringcap's compressors, writer, indexer and finishing threads) and every child it waited
#                 for (tcpdump and zstd under sh), from exec to exit, including set-up and the flush at exit.
#                 Set-up = CPU used when the tool was ready (/proc/PID/task/*/schedstat of it and its
#                 children); "excl. set-up" subtracts it. Per packet = / offered.
#     catch-up    after a ringcap run, `ringcap index DIR` (pinned to CAP_CPU, CPU from wait4()) indexes the
#                 files the capture's idle-priority indexer left behind; its CPU is reported apart and in the
#                 "incl. catch-up" figure (what everything on costs when the indexer falls behind).
#     bytes       ringcap: capture files, *.idx and *.flows.parquet apart, total = every file in its
#                 directory; tcpdump: the pcap; tcpdump-zstd: the .zst
#     threads     CPU per thread name (ringcap's: ringcap, -cap0, -zip0/1, -files, -index; the pipe's: sh,
#                 tcpdump, zstd) from schedstat when the replay has drained, before the stop; the rest = CPU -
#                 CPU at the stop: what it used after the stop (flush, last file compressed and closed, exit) and
#                 threads that had ended by then (ringcap's per-file finishing threads, ringcap-index-w)
#     load        /proc/loadavg's 1-minute figure at the start of the run, and the busy share of both CPUs
#                 (/proc/stat) in an idle second before the replay (the other users of the machine)
#   Targets (reported as met or missed, never asserted): ringcap's whole-process CPU per packet ≤ 1.0 ×
#   tcpdump -w's, 0 loss, bytes on disk ≤ 0.6 × tcpdump -w's.
#
# Environment: ROUNDS (3), DURATION (20s) and PPS (100000) of the synth trace (defaults: ~2 M packets, ~1.2 GB,
#   so ringcap writes ~5 files of 256 MB), SEED (7), FILE_SIZE (256MB), RING_MIB (64), CAP_CPU (1), TX_CPU (0),
#   TOOLS ("ringcap tcpdump tcpdump-zstd"), BENCH_DISK_DIR (/var/tmp/ringcap-bench-everything), KEEP=1 (keep
#   the trace and every run's files there; a kept trace of the same parameters is reused), OUT_DIR (bench-out),
#   RINGCAP (path to the ringcap binary), PROGRESS=1 for a line per run on stderr (default: when it is a terminal).
# Output: Markdown on stdout (for BENCHMARKS.md) and OUT_DIR/everything-YYYYmmdd-HHMMSS.csv (one row per run,
#   written as runs finish).
# Smoke test: DURATION=2s ROUNDS=1 FILE_SIZE=32MB scripts/bench-everything.sh
set -euo pipefail

CMDLINE="$(printf '%q ' "$0" "$@")"
cd "$(dirname "$0")/.."
# shellcheck source=scripts/testbed.sh
source scripts/testbed.sh
# shellcheck source=scripts/bench/common.sh
source scripts/bench/common.sh

ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-20s}"
PPS="${PPS:-100000}"
SEED="${SEED:-7}"
FILE_SIZE="${FILE_SIZE:-256MB}"
RING_MIB="${RING_MIB:-64}"
CAP_CPU="${CAP_CPU:-1}"
TX_CPU="${TX_CPU:-0}"
TOOLS="${TOOLS:-ringcap tcpdump tcpdump-zstd}"
BENCH_DISK_DIR="${BENCH_DISK_DIR:-/var/tmp/ringcap-bench-everything}"
KEEP="${KEEP:-0}"
OUT_DIR="${OUT_DIR:-bench-out}"
resolve_ringcap

# ---- The capturer command lines: edit here when a CLI changes. ----------------------------------------------
# capture_cmd TOOL DIR sets CMD (what runs under taskset in the Rx namespace) and OUT (its file or directory).
capture_cmd() {
  local tool="$1" dir="$2" kib=$((RING_MIB * 1024))
  case "$tool" in
    ringcap)
      OUT="$dir"
      CMD=("$RINGCAP" capture -i "$RX_IF" -B "$kib" -w "$dir/cap" -C "$FILE_SIZE" --compress auto --cpus "$CAP_CPU" -q --json) ;;
    tcpdump)
      OUT="$dir/tcpdump.pcap"
      CMD=(tcpdump -i "$RX_IF" -B "$kib" -w "$OUT") ;;
    tcpdump-zstd)
      OUT="$dir/tcpdump.pcap.zst"
      CMD=(sh -c "tcpdump -i $RX_IF -B $kib -w - | zstd -1 -q -o $OUT") ;;
    *) die "unknown tool $tool (known: ringcap tcpdump tcpdump-zstd)" ;;
  esac
}

# ---- Checks before anything runs -----------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "run as root (network namespaces, packet sockets)"
for t in tcpdump zstd capinfos taskset ip sh; do
  have "$t" || die "$t is missing: run 'make deps' (Debian: apt-get install tcpdump zstd tshark util-linux iproute2)"
done
[ -x "$RINGCAP" ] || die "no ringcap binary at $RINGCAP: run 'make build' or set RINGCAP"
for s in capture synth replay index; do ringcap_has "$s" || die "$RINGCAP has no $s subcommand"; done
[ "$ROUNDS" -ge 1 ] || die "ROUNDS must be >= 1"
for tool in $TOOLS; do capture_cmd "$tool" /nonexistent; done   # unknown names fail here, not after the trace
DISK_FS="$(check_real_disk "$BENCH_DISK_DIR")"

mkdir -p "$OUT_DIR"
STAMP="$(date +%Y%m%d-%H%M%S)"
CSV="$OUT_DIR/everything-$STAMP.csv"
WORK="$(mktemp -d /tmp/bench-everything.XXXXXX)"
RUNS_DIR="$BENCH_DISK_DIR/runs-$$"
TRACE="$BENCH_DISK_DIR/trace-$DURATION-$PPS-$SEED.pcap"
CUR_PID=""   # the capturer of the current run (the pipe's sh: its tcpdump and zstd are its children)
on_exit() {
  local c
  if [ -n "$CUR_PID" ]; then   # bench_cleanup kills the wrappers' children only, not the pipe's grandchildren
    # shellcheck disable=SC2013  # one line of space-separated pids
    for c in $(cat /proc/"$CUR_PID"/task/*/children 2>/dev/null); do kill -KILL "$c" 2>/dev/null || true; done
  fi
  bench_cleanup   # kills every capturer and replay still running (by pid), removes the testbed
  if [ "$KEEP" = 1 ]; then
    say "KEEP=1: the trace ($TRACE) and the runs' files ($RUNS_DIR) are kept"
  else
    rm -rf "$RUNS_DIR" "$TRACE" "$TRACE.json"
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'say "interrupted: stopping and cleaning up"; exit 130' INT
trap 'say "terminated: stopping and cleaning up"; exit 143' TERM

# ---- The traffic ------------------------------------------------------------------------------------------------
SYNTH_CMD=("$RINGCAP" synth -w "$TRACE" -F pcap-ns --duration "$DURATION" --pps "$PPS" --seed "$SEED" -q --json)
if [ "$KEEP" = 1 ] && [ -s "$TRACE" ] && [ -s "$TRACE.json" ]; then
  say "KEEP=1: reusing the trace $TRACE"
else
  say "writing the trace: $(show_cmd "${SYNTH_CMD[@]}")"
  "${SYNTH_CMD[@]}" >"$TRACE.json.tmp" || die "ringcap synth failed"
  mv "$TRACE.json.tmp" "$TRACE.json"
  sync   # its dirty pages are not written back during the first run
fi
json_get() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], "-"))' "$1" "$2"; }
TRACE_PACKETS="$(json_get "$TRACE.json" packets)"
TRACE_BYTES="$(stat -c %s "$TRACE")"
TRACE_FLOWS="$(( $(json_get "$TRACE.json" tcp_flows) + $(json_get "$TRACE.json" udp_flows) ))"
say "trace: $TRACE_PACKETS packets, $((TRACE_BYTES / 1000000)) MB, $TRACE_FLOWS flows"

testbed_up ""   # no RPS: the receive softirq runs on the sending CPU
REPLAY_CMD=("$RINGCAP" replay -i "$TX_IF" --topspeed --cpu "$TX_CPU" -q --json "$TRACE")

CSV_HEADER="tool,round,load1,bg_busy_pct,offered,offered_pps,captured,lost,reported_captured,reported_drops,drop_detail,cpu_ns,cpu_setup_ns,ns_per_pkt,run_ns_per_pkt,catchup_files,catchup_cpu_ns,capture_bytes,idx_bytes,flows_bytes,disk_bytes,files,files_indexed_live,compression_ratio,cpu_at_stop_ns,threads_at_stop,status"
echo "$CSV_HEADER" >"$CSV"

# The packets in the files a run wrote, or - when one cannot be read. A .zst goes through `zstd -dc`:
# capinfos 4.0 reads a one-frame .zst (zstd -1's) but takes ringcap's many-frame files for corrupt.
count_packets() {
  local total=0 f n
  for f in "$@"; do
    case "$f" in
      *.zst) n="$(zstd -dcq "$f" | capinfos -M -c - 2>/dev/null | awk -F': *' '/Number of packets/ { print $2 }')" ;;
      *) n="$(capinfos -M -c "$f" 2>/dev/null | awk -F': *' '/Number of packets/ { print $2 }')" ;;
    esac
    [ -n "$n" ] || { echo -; return; }
    total=$((total + n))
  done
  echo "$total"
}

# Stop the capture: SIGINT to tcpdump itself in the pipe (sh would die and leave zstd unwaited for), else to
# the tool; zstd ends at the pipe's EOF and sh then exits.
stop_capturer() {
  local tool="$1" pid="$2" c
  if [ "$tool" = tcpdump-zstd ]; then
    # shellcheck disable=SC2013  # one line of space-separated pids
    for c in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
      [ "$(cat /proc/"$c"/comm 2>/dev/null)" = tcpdump ] && stop_pid "$c"
    done
  fi
  stop_pid "$pid"
}

# run_one TOOL ROUND: one capture of the whole trace; appends one row to $CSV.
run_one() {
  local tool="$1" round="$2" tag="$1-r$2" dir status=ok rc=0
  local log="$WORK/$tag.log" ru="$WORK/$tag.ru" pidf="$WORK/$tag.pid" wpid tpid load1
  dir="$RUNS_DIR/$tag"
  rm -rf "$dir"; mkdir -p "$dir"
  capture_cmd "$tool" "$dir"
  cat "$TRACE" >/dev/null   # the replay reads the trace from the page cache, not the disk the capture writes to
  load1="$(cut -d' ' -f1 /proc/loadavg)"
  "$PY" "$BENCH_LIB/rusage.py" "$ru" "$pidf" -- ip netns exec "$RX_NS" taskset -c "$CAP_CPU" "${CMD[@]}" >"$WORK/$tag.out" 2>"$log" &
  wpid=$!
  BG_PIDS+=("$wpid")
  if ! wait_ready "$wpid" "$log" "listening on" || [ ! -s "$pidf" ]; then
    tail -n 5 "$log" >&2 || true
    die "$tool (round $round) did not start capturing (log above)"
  fi
  tpid="$(cat "$pidf")"
  CUR_PID="$tpid"
  send_measured "$tpid" "$WORK/$tag.replay.log" taskset -c "$TX_CPU" "${REPLAY_CMD[@]}" ||
    { cat "$WORK/$tag.replay.log" >&2; die "ringcap replay failed (round $round, $tool)"; }
  # Where the CPU went, per thread name (processes of the pipe), when drained; the rest: after the stop, or ended threads.
  local threads at_stop
  read -r at_stop threads < <(cpu_tree_threads "$tpid" | awk '{ n = $1; for (i = 2; i < NF; i++) n = n " " $i; s[n] += $NF; all += $NF }
    END { printf "%.0f ", all; for (k in s) printf "%s%s=%.0f", (c++ ? ";" : ""), k, s[k]; print "" }')
  stop_capturer "$tool" "$tpid"
  wait "$wpid" || rc=$?
  CUR_PID=""
  [ "$rc" = 0 ] || { status="exit $rc"; tail -n 5 "$log" >&2 || true; }
  local utime stime cpu_ns offered=$((RX_P1 - RX_P0))
  read -r utime stime _ <"$ru" || die "$tool (round $round): no rusage in $ru"
  cpu_ns=$((utime + stime))

  local files=() captured rep_cap rep_drops detail cu_files=0 cu_cpu=0 cap_b idx_b=0 flows_b=0 disk_b live=- ratio=-
  if [ "$tool" = ringcap ]; then
    mapfile -t files < <(capture_files "$dir")
    rep_cap="$(summary_field "$log" captured)"
    local k v sum=0
    detail=""
    for k in kernel storage ring; do
      v="$(summary_field "$log" "drops.$k")"
      [ "$v" = - ] && continue
      detail+="${detail:+;}$k=$v"; sum=$((sum + v))
    done
    rep_drops="$sum"
    live="$(summary_field "$log" files.indexed)+$(summary_field "$log" files.caught_up)"   # as written + later, when idle
    ratio="$(summary_field "$log" compression.ratio)"
    # Files the capture's indexer left behind: index them now, and count what that costs.
    local u s
    "$PY" "$BENCH_LIB/rusage.py" "$WORK/$tag.index.ru" "$WORK/$tag.index.pid" -- taskset -c "$CAP_CPU" \
      "$RINGCAP" index "$dir" --json -q >"$WORK/$tag.index.json" 2>"$WORK/$tag.index.err" ||
      { cat "$WORK/$tag.index.err" >&2; status="ringcap index failed"; }
    read -r u s _ <"$WORK/$tag.index.ru"
    cu_cpu=$((u + s))
    cu_files="$("$PY" -c 'import json,sys; print(sum(1 for r in json.load(open(sys.argv[1])) if r.get("status") == "indexed"))' "$WORK/$tag.index.json" 2>/dev/null || echo -)"
    idx_b="$(sum_bytes "$dir" '*.idx')"
    flows_b="$(sum_bytes "$dir" '*.flows.parquet')"
  else
    files=("$OUT")
    read -r rep_cap rep_drops detail < <(parse_summary tcpdump "$log")
  fi
  [ "${#files[@]}" -gt 0 ] && [ -s "${files[0]}" ] || status="no output file"
  captured="$(count_packets "${files[@]}")"
  [ "$captured" != - ] || status="capinfos cannot read a file of $dir"
  cap_b="$(for f in "${files[@]}"; do stat -c %s "$f"; done | awk '{ s += $1 } END { printf "%.0f\n", s }')"
  disk_b="$(find "$dir" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }')"
  [ "$offered" -gt 0 ] || status="nothing offered"
  [ "$KEEP" = 1 ] || rm -rf "$dir"
  sync   # no dirty pages of this run left to be written back during the next one

  local lost=- nspp run_nspp pps bg
  [ "$captured" = - ] || lost=$((offered - captured))
  read -r nspp run_nspp pps bg < <(awk -v c="$cpu_ns" -v su="$SETUP_NS" -v o="$offered" -v t0="$SEND_T0" -v t1="$SEND_T1" \
    -v s1="$BG_S1" -v s2="$BG_S2" -v b1="$BG_B1" -v b2="$BG_B2" -v j="$JIFFY_NS" 'BEGIN {
      if (o > 0) printf "%.1f %.1f ", c / o, (c - su) / o; else printf "- - "
      printf "%.0f %.1f\n", (t1 > t0 ? o / ((t1 - t0) / 1e9) : 0), 100 * (s2 - s1) * j / (b2 > b1 ? b2 - b1 : 1) }')
  echo "$tool,$round,$load1,$bg,$offered,$pps,$captured,$lost,$rep_cap,$rep_drops,${detail//,/;},$cpu_ns,$SETUP_NS,$nspp,$run_nspp,$cu_files,$cu_cpu,$cap_b,$idx_b,$flows_b,$disk_b,${#files[@]},$live,$ratio,$at_stop,${threads//,/ },$status" >>"$CSV"
  [ "$status" = ok ] || say "$tag: $status (log: $log)"
  progress "round $round/$ROUNDS $tool: offered $offered captured $captured lost $lost, $nspp ns/pkt ($run_nspp excl. set-up), $((disk_b / 1000000)) MB on disk, load $load1, $status"
}

UPTIME_START="$(uptime)"
read -ra TOOL_LIST <<<"$TOOLS"
for ((round = 1; round <= ROUNDS; round++)); do
  n="${#TOOL_LIST[@]}"
  for ((i = 0; i < n; i++)); do
    run_one "${TOOL_LIST[$(((i + round - 1) % n))]}" "$round"
  done
done
UPTIME_END="$(uptime)"

# ---- Markdown for BENCHMARKS.md -------------------------------------------------------------------------------
echo "### Everything on, measured whole (issue 37 item 3, $(date -u '+%Y-%m-%d %H:%M UTC'))"
echo
machine_md
echo "- Command: \`$CMDLINE\` (ROUNDS=$ROUNDS DURATION=$DURATION PPS=$PPS SEED=$SEED FILE_SIZE=$FILE_SIZE RING_MIB=$RING_MIB CAP_CPU=$CAP_CPU TX_CPU=$TX_CPU)"
echo "- Load: at the start \`${UPTIME_START#*load average: }\`, at the end \`${UPTIME_END#*load average: }\` (uptime's 1, 5, 15 min)"
echo "- Traffic: \`$(show_cmd "${SYNTH_CMD[@]}" | sed "s|$BENCH_DISK_DIR/||")\` ($TRACE_PACKETS packets, $TRACE_BYTES bytes of pcap, $TRACE_FLOWS flows; payload bytes all zero), replayed"
echo "  by \`$(show_cmd "${REPLAY_CMD[@]}" | sed "s|$BENCH_DISK_DIR/||")\` in the Tx namespace on CPU$TX_CPU (with the receive softirq)"
echo "- Capturers, each as \`ip netns exec \$RX_NS taskset -c $CAP_CPU ...\`, $ROUNDS interleaved rounds (order rotated), files on $BENCH_DISK_DIR ($DISK_FS, $(df -h --output=source "$BENCH_DISK_DIR" | tail -1)):"
for tool in "${TOOL_LIST[@]}"; do
  capture_cmd "$tool" DIR
  echo "  - $tool: \`$(show_cmd "${CMD[@]}")\`"
done
echo "- Versions: $(tool_version ringcap); $(tool_version tcpdump); zstd $(zstd -V | sed 's/.*v\([0-9.]*\).*/\1/'); $(tool_version capinfos)"
echo "- CPU: utime+stime from wait4() of the process started (all its threads and the children it waited for, set-up"
echo "  and exit included); per packet offered. Captured: \`capinfos -M -c\` of the files (.zst: \`zstd -dc F | capinfos -M -c -\`). Raw data: \`$CSV\`"
echo
"$PY" "$BENCH_LIB/report.py" everything "$CSV"
