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

echo "$CAPTURE_CSV_HEADER" >"$CSV"

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
