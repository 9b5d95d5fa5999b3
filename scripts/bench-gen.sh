#!/usr/bin/env bash
# Generator benchmark (issue 3): ringcap gen against trafgen on the veth testbed, both pinned to CPU0, nothing
# capturing (frames to a non-local MAC are counted by the receiving veth and dropped by the stack at once).
#
#  1. Maximum rate, 60-byte frames (fixed:46 IP bytes): pps at the receiving veth over the middle 90 % of each
#     run (rx_packets sampled every 10 ms), runs interleaved. Then ringcap's default distribution against fixed
#     frames of the same mean frame size (the mean measured at the receiver: rx_bytes / rx_packets).
#  2. Rate accuracy at 10 %, 50 % and 80 % of each sender's measured maximum: rx_packets in 1 s windows for
#     RATE_SECONDS, each window's error against the requested rate and the worst one.
#  3. Receiver-side inter-arrival CV and size fidelity: FIDELITY_PACKETS captured by tcpdump (pinned to CPU1,
#     nanosecond timestamps, 64-byte snaplen) at 10 % and 50 % of the maximum; CV of the gaps and the total-variation
#     distance between the captured IP sizes and the model (the model from `ringcap dist`, see model_cmd).
#
# Environment: RUNS (3), PACKETS (5000000 per max-rate run), RATE_LEVELS ("10 50 80"), RATE_SECONDS (10),
#   FIDELITY_PACKETS (1000000), FIDELITY_PCTS ("10 50"), SENDERS ("ringcap trafgen"; ringcap-BACKEND for
#   `ringcap gen --backend BACKEND`, max test only), TESTS ("max rate fidelity"), RX_GRO (on when SENDERS has
#   ringcap-xdp-live, whose XDP frames a veth takes only when its peer runs NAPI; off otherwise),
#   BENCH_DISK_DIR (/var/tmp/ringcap-bench), OUT_DIR (bench-out), RINGCAP, PROGRESS=1 for progress lines.
# Output: bench-out/gen-YYYYmmdd-HHMMSS.csv and Markdown on stdout for BENCHMARKS.md.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/testbed.sh
source scripts/testbed.sh
# shellcheck source=scripts/bench/common.sh
source scripts/bench/common.sh

RUNS="${RUNS:-3}"
PACKETS="${PACKETS:-5000000}"
RATE_LEVELS="${RATE_LEVELS:-10 50 80}"
RATE_SECONDS="${RATE_SECONDS:-10}"
FIDELITY_PACKETS="${FIDELITY_PACKETS:-1000000}"
FIDELITY_PCTS="${FIDELITY_PCTS:-10 50}"
SENDERS="${SENDERS:-ringcap trafgen}"
TESTS="${TESTS:-max rate fidelity}"
BENCH_DISK_DIR="${BENCH_DISK_DIR:-/var/tmp/ringcap-bench}"
OUT_DIR="${OUT_DIR:-bench-out}"
resolve_ringcap

# ---- The sender command lines: edit here when a CLI changes. ------------------------------------------------
# gen_cmd SENDER DIST COUNT [PPS] sets CMD. DIST is a ringcap size spec (IP bytes): "default" (ringcap's default
# distribution, no --dist) or fixed:N; trafgen only does fixed:N (an N+14-byte frame).
gen_cmd() {
  local sender="$1" dist="$2" count="$3" pps="${4:-}"
  case "$sender" in
    ringcap | ringcap-sendmmsg | ringcap-xdp | ringcap-xdp-live | ringcap-tx-ring)   # ringcap: the default backend
      CMD=("$RINGCAP" gen -i "$TX_IF" -n "$count" --dst-mac "$DST_MAC" --src-mac "$SRC_MAC" --cpu 0)
      [ "$sender" = ringcap ] || CMD+=(--backend "${sender#ringcap-}")
      [ "$dist" = default ] || CMD+=(--dist "$dist")
      [ -z "$pps" ] || CMD+=(--pps "$pps") ;;
    trafgen)
      local size="${dist#fixed:}"
      [ "$dist" != "$size" ] || die "trafgen only sends fixed sizes, not $dist"
      local cfg="$WORK/trafgen-$((size + 14)).cfg"
      [ -f "$cfg" ] || trafgen_cfg "$cfg" $((size + 14))
      # -P 1: one sender process, which trafgen pins to CPU0; -b: trafgen's own rate limit
      CMD=(trafgen -o "$TX_IF" -i "$cfg" -n "$count" -P 1)
      [ -z "$pps" ] || CMD+=(-b "${pps}pps") ;;
    *) die "unknown sender $sender (known: ringcap ringcap-sendmmsg ringcap-xdp ringcap-xdp-live ringcap-tx-ring trafgen)" ;;
  esac
}

# model_cmd SPEC sets CMD to a command printing the model of SPEC as "<size> <count>" lines (ringcap dist -O
# dist). Tried as is; if it fails, the size fidelity is skipped with a message.
model_cmd() {
  local spec="$1"
  [ "$spec" = default ] && spec=internet   # gen's default distribution (crates/gen/src/sizes/named.rs)
  CMD=("$RINGCAP" dist --dist "$spec" -O dist)
}

# The capturer for the fidelity test: nanosecond timestamps, headers only (the IP length is in the header and
# the true length stays in the record), a 256 MiB ring so a burst never drops.
fidelity_capture_cmd() {
  CMD=(tcpdump -B 262144 -s 64 --time-stamp-precision=nano -i "$RX_IF" -w "$1")
}

# ---- Checks before anything runs -----------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "run as root (network namespaces, packet sockets)"
for t in taskset ip; do have "$t" || die "$t is missing: run 'make deps'"; done
USE=()
for s in $SENDERS; do
  case "$s" in
    ringcap*) if ringcap_has gen; then USE+=("$s"); else say "ringcap gen not available yet ($RINGCAP gen --help failed): skipping $s"; fi ;;
    trafgen) if have trafgen; then USE+=(trafgen); else say "trafgen is not installed: skipping it (make deps installs netsniff-ng)"; fi ;;
    *) die "unknown sender $s (known: ringcap ringcap-sendmmsg ringcap-xdp ringcap-xdp-live ringcap-tx-ring trafgen)" ;;
  esac
done
[ "${#USE[@]}" -gt 0 ] || die "no sender to benchmark"
has_sender() { [[ " ${USE[*]} " == *" $1 "* ]]; }
has_test() { [[ " $TESTS " == *" $1 "* ]]; }

mkdir -p "$OUT_DIR"
CSV="$OUT_DIR/gen-$(date +%Y%m%d-%H%M%S).csv"
WORK="$(mktemp -d /tmp/bench-gen.XXXXXX)"
KEEP_WORK=0
on_exit() {
  bench_cleanup
  rm -f "$BENCH_DISK_DIR"/bench-gen-"$$"-* 2>/dev/null || true
  if [ "$KEEP_WORK" = 1 ]; then say "logs of failed runs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap on_exit EXIT
trap 'say "interrupted: stopping and cleaning up"; exit 130' INT
trap 'say "terminated: stopping and cleaning up"; exit 143' TERM
testbed_up ""   # no RPS: the receive softirq runs on the sending CPU (CPU0)
# xdp-live sends XDP frames, which a veth takes only when its peer runs NAPI (an XDP program or GRO on); the
# other senders then go through the same NAPI receive path, so every sender meets the same receiver.
RX_GRO="${RX_GRO:-$([[ " $SENDERS " == *" ringcap-xdp-live "* ]] && echo on || echo off)}"
if [ "$RX_GRO" = on ]; then
  have ethtool || die "ethtool is missing: run 'make deps'"
  ip netns exec "$RX_NS" ethtool -K "$RX_IF" gro on >/dev/null
  say "GRO on on $RX_IF (the receiving veth runs NAPI for every sender)"
fi
echo "test,sender,dist,run,requested_pps,window,count,packets,seconds,pps,mean_frame,error_pct,cv,tv,status,cpu0_ns_per_pkt" >"$CSV"
declare -A SHOWN=()      # command lines used, for the Markdown
declare -A TV_NOISE=()   # sender -> TV distance that sampling alone gives

csv_row() { local IFS=,; echo "$*" >>"$CSV"; }
fail() { KEEP_WORK=1; say "$1"; [ -z "${2:-}" ] || tail -n 5 "$2" >&2 || true; }

# Busy jiffies of CPU0, the sender's CPU, which also runs the receive softirq (user nice system irq softirq steal).
cpu0_busy_jiffies() { awk '$1 == "cpu0" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

# send_measured TAG SENDER DIST COUNT [PPS]: runs one sender while sampling rx_packets; leaves the samples in
# $WORK/TAG.samples and returns non-zero if the sender failed.
send_measured() {
  local tag="$1" sender="$2" dist="$3" count="$4" pps="${5:-}" spid rc=0
  gen_cmd "$sender" "$dist" "$count" "$pps"
  SHOWN["$sender $dist${pps:+ paced}"]="$(show_cmd taskset -c 0 "${CMD[@]}")"
  ip netns exec "$RX_NS" taskset -c 1 "$PY" "$BENCH_LIB/rxsample.py" record "$RX_IF" "$WORK/$tag.samples" 0.01 &
  spid=$!
  BG_PIDS+=("$spid")
  sleep 0.3   # the sampler's first samples are the baseline
  local j0 j1
  j0="$(cpu0_busy_jiffies)"
  run_waited ip netns exec "$TX_NS" taskset -c 0 "${CMD[@]}" >"$WORK/$tag.log" 2>&1 || rc=$?
  j1="$(cpu0_busy_jiffies)"
  echo $((j1 - j0)) >"$WORK/$tag.cpu0"
  sleep 0.3
  kill -TERM "$spid" 2>/dev/null || true
  wait "$spid" || { fail "$tag: the rx sampler failed"; return 1; }
  if [ "$rc" != 0 ]; then fail "$tag: $sender exited with $rc (log: $WORK/$tag.log)" "$WORK/$tag.log"; return 1; fi
  return 0
}

# ---- 1. maximum rate -------------------------------------------------------------------------------------------
declare -A MAXPPS=()   # sender -> median pps of 60-byte frames
if has_test max; then
  SAME_MEAN=""   # fixed:N with the default distribution's mean frame size, known after its first run
  for ((run = 1; run <= RUNS; run++)); do
    plan=()
    for s in "${USE[@]}"; do plan+=("max $s fixed:46"); done
    if has_sender ringcap; then
      plan+=("dist ringcap default")
      [ -z "$SAME_MEAN" ] || plan+=("dist ringcap $SAME_MEAN")
    fi
    for ((i = 0; i < ${#plan[@]}; i++)); do   # indexed: items appended during the run are run too
      read -r test sender dist <<<"${plan[$i]}"
      tag="$test-$sender-${dist//:/}-$run"
      if ! send_measured "$tag" "$sender" "$dist" "$PACKETS"; then
        csv_row "$test" "$sender" "$dist" "$run" "" "" "$PACKETS" "" "" "" "" "" "" "" "failed"; continue
      fi
      if ! stats="$("$PY" "$BENCH_LIB/rxsample.py" steady "$WORK/$tag.samples" 2>&1)"; then
        fail "$tag: $stats"
        csv_row "$test" "$sender" "$dist" "$run" "" "" "$PACKETS" "" "" "" "" "" "" "" "failed: samples"; continue
      fi
      read -r packets _bytes pps mean secs <<<"$stats"
      # A shortfall (frames dropped on the way, or a sender that does not send exactly -n) is reported, not
      # hidden: the row stays in the statistics and the table shows received / sent.
      [ "$packets" = "$PACKETS" ] || say "warning: $tag: the receiver counted $packets of $PACKETS frames"
      # CPU0 time per packet received (sender + its softirq + the receive softirq; whole run incl. set-up).
      cpu_ns="$(awk -v j="$(cat "$WORK/$tag.cpu0")" -v hz="$(getconf CLK_TCK)" -v p="$packets" \
        'BEGIN { if (p > 0) printf "%.0f", j * 1e9 / hz / p }')"
      csv_row "$test" "$sender" "$dist" "$run" "" "" "$PACKETS" "$packets" "$secs" "$pps" "$mean" "" "" "" ok "$cpu_ns"
      progress "run $run/$RUNS $sender $dist: $pps pps, mean frame $mean bytes, received $packets of $PACKETS"
      if [ "$dist" = default ] && [ -z "$SAME_MEAN" ]; then
        rounded="$(printf '%.0f' "$mean")"
        SAME_MEAN="fixed:$((rounded - 14))"
        plan+=("dist ringcap $SAME_MEAN")   # run 1 measures it too
      fi
    done
  done
  for s in "${USE[@]}"; do
    MAXPPS[$s]="$("$PY" - "$CSV" "$s" <<'EOF'
import csv, statistics, sys
v = [float(r["pps"]) for r in csv.DictReader(open(sys.argv[1]))
     if r["test"] == "max" and r["sender"] == sys.argv[2] and r["status"] == "ok" and r["pps"]]
print(f"{statistics.median(v):.0f}" if v else "")
EOF
)"
  done
fi

# Max rate of a sender: measured above, or MAX_PPS_<sender> from the environment when the max test is skipped.
max_of() {
  local s="$1" var="MAX_PPS_$1"
  if [ -n "${MAXPPS[$s]:-}" ]; then echo "${MAXPPS[$s]}"; else echo "${!var:-}"; fi
}

# ---- 2. rate accuracy ------------------------------------------------------------------------------------------
if has_test rate; then
  for level in $RATE_LEVELS; do
    for s in "${USE[@]}"; do
      max="$(max_of "$s")"
      if [ -z "$max" ]; then say "rate accuracy of $s skipped: no maximum measured (run the max test or set MAX_PPS_$s)"; continue; fi
      rate=$((max * level / 100))
      count=$(awk -v r="$rate" -v s="$RATE_SECONDS" 'BEGIN { printf "%d", r * (s + 2.5) }')   # 1 s ramp skipped + margin
      tag="rate-$s-$level"
      if ! send_measured "$tag" "$s" fixed:46 "$count" "$rate"; then
        csv_row rate "$s" fixed:46 1 "$rate" "" "$count" "" "" "" "" "" "" "" failed; continue
      fi
      if ! "$PY" "$BENCH_LIB/rxsample.py" windows "$WORK/$tag.samples" "$rate" "$RATE_SECONDS" 1 >"$WORK/$tag.windows" 2>"$WORK/$tag.err"; then
        fail "$tag: $(cat "$WORK/$tag.err")"
        csv_row rate "$s" fixed:46 1 "$rate" "" "$count" "" "" "" "" "" "" "" "failed: windows"; continue
      fi
      while read -r k packets secs pps err; do
        csv_row rate "$s" fixed:46 1 "$rate" "$k" "$count" "$packets" "$secs" "$pps" 60 "$err" "" "" ok
      done <"$WORK/$tag.windows"
      progress "rate $s at $level % ($rate pps): worst 1 s window error $(awk '{ e = ($5 < 0 ? -$5 : $5); if (e > w) { w = e; v = $5 } } END { print v }' "$WORK/$tag.windows") %"
    done
  done
fi

# ---- 3. inter-arrival CV and size fidelity at the receiver -----------------------------------------------------
# A capturer adds receive work on the sender's CPU (the softirq copies into its ring), so these runs are kept
# apart from the rate-accuracy runs, at moderate rates.
if has_test fidelity; then
  have tcpdump || die "tcpdump is missing: run 'make deps'"
  check_real_disk "$BENCH_DISK_DIR" >/dev/null
  for s in "${USE[@]}"; do
    max="$(max_of "$s")"
    if [ -z "$max" ]; then say "fidelity of $s skipped: no maximum measured (run the max test or set MAX_PPS_$s)"; continue; fi
    if [ "$s" = ringcap ]; then dist=default; else dist=fixed:46; fi
    model="$WORK/model-$s"
    if [ "$dist" = default ]; then
      model_cmd "$dist"
      SHOWN["model"]="$(show_cmd "${CMD[@]}")"
      if ! "${CMD[@]}" >"$model" 2>"$model.err" || ! grep -qE '^[[:space:]]*[0-9]+[[:space:],;]+[0-9.]+[[:space:]]*$' "$model"; then
        say "size fidelity of ringcap skipped: '$(show_cmd "${CMD[@]}")' gave no '<size> <count>' model ($(head -c 200 "$model.err"))"
        model=""
      fi
    else
      echo "${dist#fixed:} 1" >"$model"
    fi
    for pct in $FIDELITY_PCTS; do
      rate=$((max * pct / 100))
      tag="fidelity-$s-$pct"
      pcap="$BENCH_DISK_DIR/bench-gen-$$-$tag.pcap"
      fidelity_capture_cmd "$pcap"
      SHOWN["capture"]="$(show_cmd taskset -c 1 "${CMD[@]}")"
      "$PY" "$BENCH_LIB/rusage.py" "$WORK/$tag.ru" "$WORK/$tag.pid" -- \
        ip netns exec "$RX_NS" taskset -c 1 "${CMD[@]}" >"$WORK/$tag.capture.log" 2>&1 &
      cpid=$!
      BG_PIDS+=("$cpid")
      if ! wait_ready "$cpid" "$WORK/$tag.capture.log" "listening on"; then
        fail "$tag: tcpdump did not start" "$WORK/$tag.capture.log"; stop_pid "$cpid"; continue
      fi
      ok=1
      send_measured "$tag" "$s" "$dist" "$FIDELITY_PACKETS" "$rate" || ok=0
      sleep 1.5   # tcpdump's ring hands over a partly filled block after its 1 s timeout
      stop_pid "$(cat "$WORK/$tag.pid")"
      wait "$cpid" || true
      stats=""
      if [ "$ok" = 1 ] && stats="$("$PY" "$BENCH_LIB/pcapstats.py" "$pcap" ${model:+"$model"} 2>&1)"; then
        read -r packets mean _sd cv tv noise <<<"$stats"
        [ "$tv" != - ] || tv=""
        csv_row fidelity "$s" "$dist" 1 "$rate" "" "$FIDELITY_PACKETS" "$packets" "$mean" "" "" "" "$cv" "$tv" ok
        progress "fidelity $s $dist at $rate pps: $packets captured, CV $cv, TV ${tv:-n/a} (sampling noise alone $noise)"
        [ -z "$tv" ] || TV_NOISE["$s"]="$noise"
      else
        fail "$tag: ${stats:-the sender failed}"
        csv_row fidelity "$s" "$dist" 1 "$rate" "" "$FIDELITY_PACKETS" "" "" "" "" "" "" "" failed
      fi
      rm -f "$pcap"
    done
  done
fi

# ---- Markdown for BENCHMARKS.md -------------------------------------------------------------------------------
echo "### Generator benchmark ($(date -u +%Y-%m-%d))"
echo
machine_md
echo "- Senders pinned to CPU0 in the Tx namespace (\`ip netns exec \$TX_NS taskset -c 0 ...\`), nothing capturing"
echo "  except in the fidelity test; counted at the receiving veth (rx_packets sampled every 10 ms in the Rx namespace)"
echo "- Receiving veth: GRO $RX_GRO (RX_GRO; on: it runs NAPI, which XDP frames from xdp-live need, for every sender)"
echo "- CPU0 ns/pkt: busy time of the sending CPU (sender and receive softirq) over the run, per packet received (10 ms jiffies)"
echo "- Max rate: $RUNS interleaved runs × $PACKETS packets, rate over the middle 90 % of each run; rate accuracy:"
echo "  levels $RATE_LEVELS % of each sender's median max, $RATE_SECONDS windows of 1 s after a 1 s ramp"
for cfg in "$WORK"/trafgen-*.cfg; do
  if [ -f "$cfg" ]; then echo "- trafgen config $(basename "$cfg"): \`$(cat "$cfg")\`"; fi
done
echo "- Versions: $(for s in "${USE[@]}"; do tool_version "$s"; done | paste -sd';' | sed 's/;/; /g')"
echo "- Commands:"
for k in "${!SHOWN[@]}"; do echo "  - $k: \`${SHOWN[$k]}\`"; done | sort
echo "- Raw data: \`$CSV\`"
echo
"$PY" "$BENCH_LIB/report.py" gen "$CSV"
for s in "${!TV_NOISE[@]}"; do
  echo "TV distance a perfect $s would show from sampling $FIDELITY_PACKETS packets alone: ${TV_NOISE[$s]}."
done
