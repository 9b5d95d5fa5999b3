#!/usr/bin/env bash
# Capture benchmark (issue 2): ringcap ring/copy against tcpdump, netsniff-ng and dumpcap on the veth testbed.
#
# trafgen sends 60-byte UDP/IPv4 frames to a non-local MAC at full speed from CPU0 (the receive softirq runs
# there too: veth delivers on the sender's CPU). Each capturer runs in the Rx namespace, pinned to CPU1 ("dual"
# mode) or to CPU0 with everything else ("single" mode, the thesis's single processor mode), and writes full
# packets to a file on the real disk or to /dev/null. Runs are interleaved (run 1 of every tool, then run 2, ...)
# so drift hits all tools alike.
#
# Measured per run:
#   offered   receiving veth's rx_packets delta (trafgen's -n is exact)
#   captured  file: `capinfos -M -c`; /dev/null: the tool's own final summary
#   drops     as the tool reports them (kernel / ring / its own buffers)
#   cpu_ns    utime+stime of the capturer and all its children from wait4() (scripts/bench/rusage.py, the
#             numbers /usr/bin/time prints, at µs resolution): includes start-up, ring set-up and the flush
#             and close at exit. ns_per_pkt = cpu_ns / offered.
#   cpu_setup_ns  CPU already used when the tool was ready (exact, from /proc/PID/task/*/schedstat).
#             run_ns_per_pkt = (cpu_ns - cpu_setup_ns) / offered: the per-packet cost without the one-time
#             ring allocation (a 256 MiB ring costs tcpdump ~0.7 s of CPU before the first packet here).
#
# Environment: RUNS (3), PACKETS (5000000), RING_MIB (64: every tool's ring; --threads 2 gets half per thread), TOOLS, SINKS ("disk null"), MODES ("dual single"),
#   BENCH_DISK_DIR (/var/tmp/ringcap-bench), OUT_DIR (bench-out), RINGCAP (path to the ringcap binary),
#   RINGCAP_BEFORE (an older ringcap binary for the before-* tools, to measure a change in the same run),
#   PROGRESS=1 for one line per run on stderr.
# Output: bench-out/capture-YYYYmmdd-HHMMSS.csv (raw, one row per run, written as runs finish) and Markdown on
#   stdout, ready to paste into BENCHMARKS.md.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/testbed.sh
source scripts/testbed.sh
# shellcheck source=scripts/bench/common.sh
source scripts/bench/common.sh

RUNS="${RUNS:-3}"
PACKETS="${PACKETS:-5000000}"
TOOLS="${TOOLS:-ringcap-ring ringcap-copy tcpdump netsniff-ng dumpcap}"
SINKS="${SINKS:-disk null}"
MODES="${MODES:-dual single}"
BENCH_DISK_DIR="${BENCH_DISK_DIR:-/var/tmp/ringcap-bench}"
OUT_DIR="${OUT_DIR:-bench-out}"
FRAME_LEN=60
# Every capturer gets the same ring/buffer (fair comparison; the set-up of a bigger ring costs CPU).
RING_MIB="${RING_MIB:-64}"
resolve_ringcap

# ---- The capturer command lines: edit here when a CLI changes. ----------------------------------------------
# capture_cmd TOOL OUTPUT CPU sets CMD (the command a user would type) and READY (a line the tool prints when it
# is capturing; empty = rely on its packet socket showing up in /proc/net/packet).
capture_cmd() {
  local tool="$1" out="$2" cpu="$3"
  case "$tool" in
    ringcap-ring) CMD=("$RINGCAP" capture -i "$RX_IF" -B "$((RING_MIB * 1024))" -w "$out" --source ring --cpus "$cpu" -q); READY="listening on" ;;
    # Two fanout threads into one file (both pinned to the capturer's CPU, so only the hand-over differs).
    ringcap-ring2) CMD=("$RINGCAP" capture -i "$RX_IF" -B "$((RING_MIB * 512))" -w "$out" --threads 2 --cpus "$cpu,$cpu" -q); READY="listening on" ;;
    before-ring) CMD=("${RINGCAP_BEFORE:?set RINGCAP_BEFORE}" capture -i "$RX_IF" -B "$((RING_MIB * 1024))" -w "$out" --source ring --cpus "$cpu" -q); READY="listening on" ;;
    before-ring2) CMD=("${RINGCAP_BEFORE:?set RINGCAP_BEFORE}" capture -i "$RX_IF" -B "$((RING_MIB * 512))" -w "$out" --threads 2 --cpus "$cpu,$cpu" -q); READY="listening on" ;;
    # The same into files rotated at 256 MB (issue 10: file mode kept O_DIRECT only with one thread).
    ringcap-rot2) CMD=("$RINGCAP" capture -i "$RX_IF" -B "$((RING_MIB * 512))" -w "$out" -C 256MB --threads 2 --cpus "$cpu,$cpu" -q); READY="listening on" ;;
    before-rot2) CMD=("${RINGCAP_BEFORE:?set RINGCAP_BEFORE}" capture -i "$RX_IF" -B "$((RING_MIB * 512))" -w "$out" -C 256MB --threads 2 --cpus "$cpu,$cpu" -q); READY="listening on" ;;
    ringcap-copy) CMD=("$RINGCAP" capture -i "$RX_IF" -B "$((RING_MIB * 1024))" -w "$out" --source copy --cpus "$cpu" -q); READY="listening on" ;;
    tcpdump) CMD=(tcpdump -B "$((RING_MIB * 1024))" -i "$RX_IF" -w "$out"); READY="listening on" ;;
    netsniff-ng) CMD=(netsniff-ng --ring-size "${RING_MIB}MiB" -i "$RX_IF" -o "$out" -s); READY="Running!" ;;
    dumpcap) CMD=(dumpcap -B "$RING_MIB" -i "$RX_IF" -w "$out"); READY="Capturing on" ;;
    *) die "unknown tool $tool (known: ringcap-ring ringcap-ring2 before-ring before-ring2 ringcap-rot2 before-rot2 ringcap-copy tcpdump netsniff-ng dumpcap)" ;;
  esac
}

# File name suffix each tool writes by default.
file_ext() { case "$1" in dumpcap) echo pcapng ;; *) echo pcap ;; esac; }

# parse_summary TOOL LOG prints "captured drops detail" from the tool's final summary (- when it has none).
parse_summary() {
  local tool="$1" log="$2"
  case "$tool" in
    ringcap-*|before-*)
      # tcpdump's three lines, then "ringcap: ... drops by stage: kernel 0, storage 0": drops = sum of the stages.
      awk '/packets captured/ { c = $1 } /dropped by kernel/ { d = $1 }
           /drops by stage:/ { st = $0; sub(/.*drops by stage: */, "", st); n = split(st, kv, /, */); sum = 0
             for (i = 1; i <= n; i++) { split(kv[i], p, " "); sum += p[2]; det = det (det ? ";" : "") p[1] "=" p[2] } }
           END { if (det != "") d = sum
             printf "%s %s %s\n", (c == "" ? "-" : c), (d == "" ? "-" : d), (det == "" ? "kernel=" d : det) }' "$log" ;;
    tcpdump)
      awk '/packets captured/ { c = $1 } /dropped by kernel/ { d = $1 }
           END { printf "%s %s kernel=%s\n", (c == "" ? "-" : c), (d == "" ? "-" : d), d }' "$log" ;;
    netsniff-ng)
      # "N packets incoming (U unread on exit)", "N packets passed filter", "N packets failed filter (out of space)"
      tr '\r' '\n' <"$log" | awk '/packets incoming/ { u = $4; sub(/\(/, "", u) } /packets passed filter/ { p = $1 }
           /failed filter/ { d = $1 }
           END { if (p == "") print "- - -"; else printf "%d %s ring_full=%s;unread=%s\n", p - u, d, d, u }' ;;
    dumpcap)
      # "Packets captured: N" and "Packets received/dropped on interface 'IF': R/D (pcap:a/dumpcap:b/flushed:c/ps_ifdrop:d)"
      tr '\r' '\n' <"$log" | awk '/Packets captured:/ { c = $NF }
           /received\/dropped on interface/ { split($(NF - 2), rd, "/"); d = rd[2]; det = $(NF - 1); gsub(/[()]/, "", det)
             gsub(/:/, "=", det); gsub(/\//, ";", det) }
           END { printf "%s %s %s\n", (c == "" ? "-" : c), (d == "" ? "-" : d), (det == "" ? "-" : det) }' ;;
  esac
}

# ---- Checks before anything runs -----------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "run as root (network namespaces, packet sockets)"
for t in trafgen capinfos taskset ip; do have "$t" || die "$t is missing: run 'make deps' (Debian: apt-get install netsniff-ng tshark util-linux iproute2)"; done
[ "$PACKETS" -ge 1000 ] || die "PACKETS=$PACKETS is too small"
SELECTED=()
for tool in $TOOLS; do
  case "$tool" in
    ringcap-*|before-*)
      if ringcap_has capture; then SELECTED+=("$tool"); else say "ringcap capture not available yet ($RINGCAP capture --help failed): skipping $tool"; fi ;;
    *) if have "$tool"; then SELECTED+=("$tool"); else say "$tool is not installed: skipping it (make deps installs it)"; fi ;;
  esac
done
[ "${#SELECTED[@]}" -gt 0 ] || die "no capturer to benchmark"
case " $SINKS " in *" disk "*) DISK_FS="$(check_real_disk "$BENCH_DISK_DIR")" ;; *) DISK_FS="-" ;; esac

mkdir -p "$OUT_DIR"
STAMP="$(date +%Y%m%d-%H%M%S)"
CSV="$OUT_DIR/capture-$STAMP.csv"
WORK="$(mktemp -d /tmp/bench-capture.XXXXXX)"
KEEP_WORK=0
on_exit() {
  bench_cleanup
  rm -f "$BENCH_DISK_DIR"/bench-"$$"-* 2>/dev/null || true
  if [ "$KEEP_WORK" = 1 ]; then say "logs of failed runs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap on_exit EXIT
trap 'say "interrupted: stopping and cleaning up"; exit 130' INT
trap 'say "terminated: stopping and cleaning up"; exit 143' TERM

testbed_up ""   # no RPS: the receive softirq runs on the sending CPU (CPU0)
TG_CFG="$WORK/trafgen-$FRAME_LEN.cfg"
trafgen_cfg "$TG_CFG" "$FRAME_LEN"
TG_CMD=(trafgen -o "$TX_IF" -i "$TG_CFG" -n "$PACKETS" -P 1)   # -P 1: one sender process, trafgen pins it to CPU0

echo "tool,sink,mode,run,offered,captured,drops,cpu_ns,ns_per_pkt,capture_rate,cpu_setup_ns,run_ns_per_pkt,offered_pps,status,drop_detail" >"$CSV"

# Wait until the capturer has drained its ring: first 1.5 s, because the kernel hands a partly filled TPACKET_V3
# block to the reader only after the block timeout (tcpdump asks for 1 s; stopped earlier, it never reads that
# block), then until the capturer has used no CPU for 0.25 s, at most 10 s more.
wait_drained() {
  local pid="$1" before after i
  sleep 1.5
  before="$(cpu_tree_ns "$pid")"
  for ((i = 0; i < 40; i++)); do
    sleep 0.25
    after="$(cpu_tree_ns "$pid")"
    [ $((after - before)) -lt 2000000 ] && return 0
    before="$after"
  done
  return 0
}

# run_one TOOL SINK MODE RUN: one capture run; appends one CSV row.
run_one() {
  local tool="$1" sink="$2" mode="$3" run="$4"
  local cpu=1 out tag log ru pidf wpid tpid setup p0 p1 t0 t1 rc=0 status=ok
  [ "$mode" = single ] && cpu=0
  tag="$tool-$sink-$mode-$run"
  if [ "$sink" = disk ]; then out="$BENCH_DISK_DIR/bench-$$-$tag.$(file_ext "$tool")"; else out=/dev/null; fi
  log="$WORK/$tag.log"; ru="$WORK/$tag.ru"; pidf="$WORK/$tag.pid"
  capture_cmd "$tool" "$out" "$cpu"
  # Never for the null sink: removing /dev/null lets the tool create a regular file in its place.
  if [ "$sink" = disk ]; then rm -f "$out"; fi

  "$PY" "$BENCH_LIB/rusage.py" "$ru" "$pidf" -- ip netns exec "$RX_NS" taskset -c "$cpu" "${CMD[@]}" >"$log" 2>&1 &
  wpid=$!
  BG_PIDS+=("$wpid")
  if ! wait_ready "$wpid" "$log" "$READY" || [ ! -s "$pidf" ]; then
    local why="not capturing after 20 s"
    kill -0 "$wpid" 2>/dev/null || why="exited before capturing"
    stop_pid "$wpid"; wait "$wpid" 2>/dev/null || true
    fail_row "$tool" "$sink" "$mode" "$run" "$why (log: $log)" "$log"; return 0
  fi
  tpid="$(cat "$pidf")"
  setup="$(cpu_tree_ns "$tpid")"

  read -r p0 _ < <(rx_counters)
  t0="$(date +%s%N)"
  if ! run_waited ip netns exec "$TX_NS" taskset -c 0 "${TG_CMD[@]}" >"$WORK/$tag.trafgen.log" 2>&1; then
    status="trafgen failed"
  fi
  t1="$(date +%s%N)"
  wait_drained "$tpid"
  read -r p1 _ < <(rx_counters)
  stop_pid "$tpid"
  wait "$wpid" || rc=$?
  [ "$rc" = 0 ] || status="exit $rc"

  local offered=$((p1 - p0)) utime stime captured drops detail cpu_ns
  if ! read -r utime stime _ <"$ru"; then
    fail_row "$tool" "$sink" "$mode" "$run" "no rusage" "$log"; return 0
  fi
  cpu_ns=$((utime + stime))
  read -r captured drops detail < <(parse_summary "$tool" "$log")
  if [ "$sink" = disk ]; then
    # A rotating tool writes BASE-<stamp>-<seq>.pcap files next to where one file would be.
    local outs=("$out") f n
    case "$tool" in *-rot2) outs=("${out%.pcap}"-*.pcap) ;; esac
    if [ -s "${outs[0]}" ]; then
      captured=0
      for f in "${outs[@]}"; do
        n="$(capinfos -M -c "$f" 2>/dev/null | awk -F': *' '/Number of packets/ { print $2 }')"
        if [ -n "$n" ]; then captured=$((captured + n)); else captured=-; status="capinfos cannot read $f"; break; fi
      done
    else
      captured=-; status="no output file"
    fi
    rm -f "${outs[@]}"
    sync   # no dirty pages of this run left to be written back during the next one
  fi
  [ "$offered" -gt 0 ] || status="nothing offered"
  [ "$status" = ok ] || { KEEP_WORK=1; say "$tag: $status (log: $log)"; }

  local row
  row="$("$PY" - "$offered" "$captured" "$cpu_ns" "$setup" "$t0" "$t1" <<'EOF'
import sys
offered, captured, cpu, setup, t0, t1 = sys.argv[1:]
offered, cpu, setup = int(offered), int(cpu), int(setup)
nspp = f"{cpu / offered:.1f}" if offered else ""
run_nspp = f"{(cpu - setup) / offered:.1f}" if offered else ""
rate = f"{int(captured) / offered:.6f}" if offered and captured.isdigit() else ""
pps = f"{offered / ((int(t1) - int(t0)) / 1e9):.0f}" if int(t1) > int(t0) else ""
print(f"{nspp},{rate},{run_nspp},{pps}")
EOF
)"
  local nspp rate run_nspp pps
  IFS=, read -r nspp rate run_nspp pps <<<"$row"
  echo "$tool,$sink,$mode,$run,$offered,$captured,$drops,$cpu_ns,$nspp,$rate,$setup,$run_nspp,$pps,$status,${detail//,/;}" >>"$CSV"
  progress "run $run/$RUNS $mode $sink $tool: offered $offered captured $captured drops $drops, $nspp ns/pkt ($run_nspp without set-up), $status"
}

fail_row() {
  local tool="$1" sink="$2" mode="$3" run="$4" why="$5" log="$6"
  KEEP_WORK=1
  say "$tool ($sink, $mode, run $run): $why; last lines of its output:"
  tail -n 5 "$log" >&2 || true
  echo "$tool,$sink,$mode,$run,,,,,,,,,,failed: $why," >>"$CSV"
}

for ((run = 1; run <= RUNS; run++)); do
  for mode in $MODES; do
    for sink in $SINKS; do
      for tool in "${SELECTED[@]}"; do
        run_one "$tool" "$sink" "$mode" "$run"
      done
    done
  done
done

# ---- Markdown for BENCHMARKS.md -------------------------------------------------------------------------------
echo "### Capture benchmark ($(date -u +%Y-%m-%d))"
echo
machine_md
# shellcheck disable=SC2016  # $TX_NS is shown literally
echo "- Sender: \`$(show_cmd ip netns exec '$TX_NS' taskset -c 0 "${TG_CMD[@]}")\` ($FRAME_LEN-byte UDP/IPv4 frames, full speed;"
echo "  config: \`$(cat "$TG_CFG")\`)"
echo "- $RUNS runs × $PACKETS packets per tool, sink and mode, interleaved; disk sink: $BENCH_DISK_DIR ($DISK_FS,"
echo "  $(df -h --output=source "$BENCH_DISK_DIR" | tail -1)); dual mode: capturer on CPU1, sender + softirq on CPU0;"
echo "  single mode: all on CPU0 (CPU figures then include softirq work charged to the capturer)"
echo "- CPU: utime+stime of the capturer and its children from wait4() (start-up and exit flush included);"
echo "  \"excl. set-up\" subtracts the CPU used before the tool was ready (ring allocation). Offered = receiving"
echo "  veth's rx_packets delta; captured = \`capinfos -M -c\` of the file, or the tool's own summary for /dev/null"
echo "- Versions: $(for t in "${SELECTED[@]}" trafgen capinfos; do case "$t" in ringcap-copy) ;; ringcap-ring) tool_version ringcap ;; *) tool_version "$t" ;; esac; done | paste -sd';' | sed 's/;/; /g')"
echo "- Capturer commands (run as \`ip netns exec \$RX_NS taskset -c CPU ...\`):"
for tool in "${SELECTED[@]}"; do
  for sink in $SINKS; do
    if [ "$sink" = disk ]; then out="$BENCH_DISK_DIR/FILE.$(file_ext "$tool")"; else out=/dev/null; fi
    capture_cmd "$tool" "$out" CPU
    echo "  - \`$(show_cmd "${CMD[@]}")\`"
  done
done
echo "- Raw data: \`$CSV\`"
echo
"$PY" "$BENCH_LIB/report.py" capture "$CSV"
