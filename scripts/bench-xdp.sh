#!/usr/bin/env bash
# Below the stack (issue 15): ringcap --source xdp against ringcap's ring and tcpdump, with the XDP drop rate
# (ringcap --drop-all --source xdp: count and drop in the driver) as the ceiling; then the generator backends.
#
# capture: bench-capture.sh's run (scripts/bench/common.sh run_one) in dual mode: the sender and the receive
# softirq on CPU0 (veth runs the peer's NAPI, and so the XDP program, on the sending CPU), the capturer on CPU1,
# 60-byte frames at the sender's top speed, runs interleaved, to /dev/null and to the real disk. Every capturer
# gets the same buffer (-B, which is also the size of ringcap's UMEM). Besides the capturer's own CPU, the
# system-wide CPU per packet: busy time of both CPUs from /proc/stat (softirq included) while sending and
# draining, the same at set-up, and the background load of an idle second before each run (the machine may
# be shared). gen: scripts/bench-gen.sh's max-rate test with the senders in GEN_SENDERS, pinned to CPU0.
#
# filter (`make bench-xdp-filter`: PARTS=filter): the cost of a narrow filter with --source xdp. The sender cycles
# the UDP destination port over 9000..9099, FILTER keeps ~1 % (`udp and dst port 9000`); ringcap xdp with the
# filter in user space only (the hidden --xdp-prefilter off) vs with the XDP prefilter (frames that cannot match
# go on to the stack: XDP_PASS) vs tcpdump with the same filter on its ring; same pinning and CPU accounting.
#
# Environment: RUNS (3), PACKETS (3000000), TOOLS ("xdp-drop ringcap-xdp ringcap-ring tcpdump"),
#   FILTER ("udp and dst port 9000"), FILTER_TOOLS ("ringcap-xdp-user ringcap-xdp-pre tcpdump-filter"),
#   SINKS ("null disk"), SENDER (trafgen, or ringcap-BACKEND: `ringcap gen --backend BACKEND`), BUF_MIB (64),
#   GEN_SENDERS ("ringcap-xdp-live ringcap-xdp ringcap-sendmmsg trafgen"), PARTS ("capture gen"), BENCH_DISK_DIR
#   (/var/tmp/ringcap-bench), OUT_DIR (bench-out), RINGCAP, PROGRESS=1 for one line per run.
# Output: bench-out/xdp-YYYYmmdd-HHMMSS.csv (PARTS=filter: xdp-filter-YYYYmmdd-HHMMSS.csv), bench-gen's CSV, and Markdown on stdout for BENCHMARKS.md.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/testbed.sh
source scripts/testbed.sh
# shellcheck source=scripts/bench/common.sh
source scripts/bench/common.sh

RUNS="${RUNS:-3}"
PACKETS="${PACKETS:-3000000}"
TOOLS="${TOOLS:-xdp-drop ringcap-xdp ringcap-ring tcpdump}"
SINKS="${SINKS:-null disk}"
SENDER="${SENDER:-trafgen}"
BUF_MIB="${BUF_MIB:-64}"
GEN_SENDERS="${GEN_SENDERS:-ringcap-xdp-live ringcap-xdp ringcap-sendmmsg trafgen}"
FILTER="${FILTER:-udp and dst port 9000}"
FILTER_TOOLS="${FILTER_TOOLS:-ringcap-xdp-user ringcap-xdp-pre tcpdump-filter}"
PARTS="${PARTS:-capture gen}"
BENCH_DISK_DIR="${BENCH_DISK_DIR:-/var/tmp/ringcap-bench}"
OUT_DIR="${OUT_DIR:-bench-out}"
FRAME_LEN=60
resolve_ringcap

# capture_cmd TOOL OUTPUT CPU sets CMD, READY and SOCKET (0: no packet socket to wait for).
capture_cmd() {
  local tool="$1" out="$2" cpu="$3" kib=$((BUF_MIB * 1024))
  case "$tool" in
    xdp-drop) CMD=("$RINGCAP" capture -i "$RX_IF" --source xdp --drop-all -q); READY="listening on"; SOCKET=0 ;;
    ringcap-xdp) CMD=("$RINGCAP" capture -i "$RX_IF" --source xdp -B "$kib" -w "$out" --cpus "$cpu" -q); READY="listening on"; SOCKET=0 ;;
    ringcap-ring) CMD=("$RINGCAP" capture -i "$RX_IF" --source ring -B "$kib" -w "$out" --cpus "$cpu" -q); READY="listening on" ;;
    tcpdump) CMD=(tcpdump -B "$kib" -i "$RX_IF" -w "$out"); READY="listening on" ;;
    ringcap-xdp-user | ringcap-xdp-pre)
      local pre=on; [ "$tool" = ringcap-xdp-user ] && pre=off
      CMD=("$RINGCAP" capture -i "$RX_IF" --source xdp -B "$kib" -w "$out" --cpus "$cpu" -q --xdp-prefilter "$pre" "$FILTER")
      READY="listening on"; SOCKET=0 ;;
    tcpdump-filter) CMD=(tcpdump -B "$kib" -i "$RX_IF" -w "$out" "$FILTER"); READY="listening on" ;;
    *) die "unknown tool $tool (known: xdp-drop ringcap-xdp ringcap-ring tcpdump $FILTER_TOOLS)" ;;
  esac
}
file_ext() { echo pcap; }

[ "$(id -u)" = 0 ] || die "run as root (network namespaces, XDP, packet sockets)"
for t in trafgen tcpdump capinfos taskset ip; do have "$t" || die "$t is missing: run 'make deps'"; done
ringcap_has capture || die "$RINGCAP capture --help failed: build ringcap first (make build)"
mkdir -p "$OUT_DIR"
CSV="$OUT_DIR/xdp-$(date +%Y%m%d-%H%M%S).csv"
WORK="$(mktemp -d /tmp/bench-xdp.XXXXXX)"
KEEP_WORK=0
on_exit() {
  bench_cleanup
  rm -f "$BENCH_DISK_DIR"/bench-"$$"-* 2>/dev/null || true
  if [ "$KEEP_WORK" = 1 ]; then say "logs of failed runs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap on_exit EXIT
trap 'say "interrupted: stopping and cleaning up"; exit 130' INT
trap 'say "terminated: stopping and cleaning up"; exit 143' TERM

echo "## Below the stack: AF_XDP (issue 15) — $(date -u +%Y-%m-%d)"
echo
machine_md
echo "- Command: \`$(show_cmd RUNS="$RUNS" PACKETS="$PACKETS" SENDER="$SENDER" BUF_MIB="$BUF_MIB" make bench-xdp)\`"
echo

if [[ " $PARTS " == *" capture "* ]]; then
  DISK_FS="$(check_real_disk "$BENCH_DISK_DIR")"
  testbed_up ""   # no RPS: the receive softirq runs on the sending CPU (CPU0)
  trafgen_cfg "$WORK/trafgen.cfg" "$FRAME_LEN"
  case "$SENDER" in
    trafgen) TG_CMD=(trafgen -o "$TX_IF" -i "$WORK/trafgen.cfg" -n "$PACKETS" -P 1) ;;
    ringcap-*) TG_CMD=("$RINGCAP" gen -i "$TX_IF" -n "$PACKETS" --dst-mac "$DST_MAC" --src-mac "$SRC_MAC"
      --dist fixed:46 --cpu 0 --backend "${SENDER#ringcap-}" -q) ;;
    *) die "unknown SENDER $SENDER (trafgen or ringcap-BACKEND)" ;;
  esac
  echo "$CAPTURE_CSV_HEADER" >"$CSV"
  for ((run = 1; run <= RUNS; run++)); do
    for sink in $SINKS; do
      for tool in $TOOLS; do
        [ "$tool" = xdp-drop ] && [ "$sink" != null ] && continue   # it writes nothing
        run_one "$tool" "$sink" dual "$run"
      done
    done
  done
  testbed_down
  # shellcheck disable=SC2016  # $TX_NS is shown literally
  echo "- Sender: \`$(show_cmd ip netns exec '$TX_NS' taskset -c 0 "${TG_CMD[@]}")\` ($FRAME_LEN-byte frames, top speed)"
  echo "- $RUNS runs × $PACKETS packets per tool and sink, interleaved; capturers on CPU1 in the Rx namespace"
  echo "  (\`ip netns exec \$RX_NS taskset -c 1 ...\`); disk: $BENCH_DISK_DIR ($DISK_FS, $(df -h --output=source "$BENCH_DISK_DIR" | tail -1))"
  echo "- Capturer CPU: utime+stime from wait4(); system CPU: busy time of all $(nproc) CPUs from /proc/stat (user,"
  echo "  system, irq, softirq) from the first packet sent until drained, divided by the packets offered (the"
  echo "  receiving veth's rx_packets delta); set-up: the same from launch until ready; background: busy % of"
  echo "  the machine in an idle second before sending (100 % = one CPU), inside the system figure too"
  echo "- Versions: $(for t in ringcap tcpdump trafgen; do tool_version "$t"; done | paste -sd';' | sed 's/;/; /g')"
  echo "- Capturers:"
  for tool in $TOOLS; do
    capture_cmd "$tool" FILE.pcap CPU
    echo "  - $tool: \`$(show_cmd "${CMD[@]}")\`"
  done
  echo "- Raw data: \`$CSV\`"
  echo
  "$PY" "$BENCH_LIB/report.py" xdp "$CSV"
fi

if [[ " $PARTS " == *" filter "* ]]; then
  echo "### A narrow filter with --source xdp: user space only vs the XDP prefilter vs tcpdump"
  echo
  testbed_up ""
  # Destination ports 9000..9099 in turn: FILTER's port 9000 is 1 frame in 100.
  trafgen_cfg "$WORK/trafgen.cfg" "$FRAME_LEN"
  sed -i 's/udp(sp=9, dp=9)/udp(sp=9, dp=dinc(9000, 9099))/' "$WORK/trafgen.cfg"
  grep -q 'dinc(9000, 9099)' "$WORK/trafgen.cfg" || die "trafgen config: the port counter was not set"
  TG_CMD=(trafgen -o "$TX_IF" -i "$WORK/trafgen.cfg" -n "$PACKETS" -P 1)
  FILTER_CSV="$OUT_DIR/xdp-filter-$(date +%Y%m%d-%H%M%S).csv"
  echo "$CAPTURE_CSV_HEADER" >"$FILTER_CSV"
  CSV_SAVED="$CSV"; CSV="$FILTER_CSV"
  for ((run = 1; run <= RUNS; run++)); do
    for tool in $FILTER_TOOLS; do run_one "$tool" null dual "$run"; done
  done
  CSV="$CSV_SAVED"
  testbed_down
  echo "- Command: \`$(show_cmd RUNS="$RUNS" PACKETS="$PACKETS" FILTER="$FILTER" make bench-xdp-filter)\`"
  # shellcheck disable=SC2016  # $TX_NS is shown literally
  echo "- Sender: \`$(show_cmd ip netns exec '$TX_NS' taskset -c 0 "${TG_CMD[@]}")\` with \`$(grep -o 'udp([^)]*))' "$WORK/trafgen.cfg")\`"
  echo "  ($FRAME_LEN-byte frames, top speed, to a MAC that is not the receiver's: what the stack gets, it drops)"
  echo "- $RUNS runs × $PACKETS packets per tool, interleaved; capturers on CPU1 (\`taskset -c 1\`), to /dev/null"
  echo "- Capturers:"
  for tool in $FILTER_TOOLS; do
    capture_cmd "$tool" /dev/null CPU
    echo "  - $tool: \`$(show_cmd "${CMD[@]}")\`"
  done
  echo "- Raw data: \`$FILTER_CSV\`"
  echo
  "$PY" "$BENCH_LIB/report.py" xdp-filter "$FILTER_CSV"
fi

if [[ " $PARTS " == *" gen "* ]]; then
  echo "### Generator backends on one core"
  echo
  SENDERS="$GEN_SENDERS" TESTS=max RUNS="$RUNS" PACKETS="$PACKETS" OUT_DIR="$OUT_DIR" RINGCAP="$RINGCAP" \
    scripts/bench-gen.sh | sed -n '/^- Senders/,$p'
fi
