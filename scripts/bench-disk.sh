#!/usr/bin/env bash
# Capture-to-disk benchmark (issue 4): ringcap --compress none|lz4|auto against tcpdump -w, tcpdump -w - | zstd -1,
# tcpdump -w - | gzip -1 and netsniff-ng, writing full packets to tmpfs and to the real disk.
#
# `ringcap gen` sends simple IMIX sizes (--dist imix) with half-random payloads (--payload half: ~50 %
# compressible, as seed 002's generator) at full speed from CPU0, where the receive softirq runs too. Each capturer
# runs in the Rx namespace pinned to CPU1 (all its processes: a pipe's compressor shares CPU1, which is the point:
# the compressor competes with the capturer). Runs are interleaved (run 1 of every tool, then run 2, ...).
#
# Measured per run:
#   offered   receiving veth's rx_packets delta
#   captured  packets in the output (`capinfos -M -c` after decompressing with the standard tool)
#   loss      offered - captured
#   cpu_ns    utime+stime of the capturer and all its children (wait4(), scripts/bench/rusage.py); ns_per_pkt =
#             cpu_ns / offered
#   cpu_setup_ns  CPU already used when the tool was ready (/proc/PID/task/*/schedstat of its process tree);
#             run_ns_per_pkt = (cpu_ns - cpu_setup_ns) / offered, the per-packet cost without the one-time set-up
#   bytes     bytes written (the size of the output files)
#   detail    ringcap: drops by stage and the compression levels used (1 MiB chunks per level)
#
# Environment: RUNS (3), PACKETS (3000000), RING_MIB (64, every tool's ring), TOOLS, SINKS ("tmpfs disk"), BENCH_DISK_DIR (/var/tmp/ringcap-bench),
#   BENCH_TMPFS_DIR (/dev/shm/ringcap-bench), OUT_DIR (bench-out), RINGCAP, PROGRESS=1.
# Output: bench-out/disk-YYYYmmdd-HHMMSS.csv (one row per run, written as runs finish) and Markdown on stdout.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/testbed.sh
source scripts/testbed.sh
# shellcheck source=scripts/bench/common.sh
source scripts/bench/common.sh

RUNS="${RUNS:-3}"
PACKETS="${PACKETS:-3000000}"
TOOLS="${TOOLS:-ringcap-none ringcap-lz4 ringcap-auto tcpdump tcpdump-zstd1 tcpdump-gzip1 netsniff-ng}"
SINKS="${SINKS:-tmpfs disk}"
BENCH_DISK_DIR="${BENCH_DISK_DIR:-/var/tmp/ringcap-bench}"
BENCH_TMPFS_DIR="${BENCH_TMPFS_DIR:-/dev/shm/ringcap-bench}"
OUT_DIR="${OUT_DIR:-bench-out}"
CAP_CPU=1
# Every capturer gets the same ring/buffer (fair comparison; the set-up of a bigger ring costs CPU).
RING_MIB="${RING_MIB:-64}"
resolve_ringcap

# ---- The capturer command lines: edit here when a CLI changes. ----------------------------------------------
# capture_cmd TOOL DIR sets CMD (what a user would type), READY (a line printed once capturing) and OUTS (a glob
# of the files it writes in DIR).
capture_cmd() {
  local tool="$1" dir="$2"
  local tcpdump_ring=(tcpdump -B "$((RING_MIB * 1024))" -i "$RX_IF")
  # --no-index: the peers only write, so ringcap does too; what indexing costs is measured by bench-query.
  local rc_ring=(-B "$((RING_MIB * 1024))" --no-index)
  case "$tool" in
    ringcap-none) CMD=("$RINGCAP" capture -i "$RX_IF" "${rc_ring[@]}" -w "$dir/out.pcap" -F pcap --cpus "$CAP_CPU" -q); OUTS="out.pcap" ;;
    ringcap-lz4) CMD=("$RINGCAP" capture -i "$RX_IF" "${rc_ring[@]}" -w "$dir/out" -F pcap --compress lz4 --cpus "$CAP_CPU" -q); OUTS="out-*.pcap.lz4" ;;
    ringcap-zstd*) # ringcap-zstdN: a fixed level, e.g. ringcap-zstd1 or ringcap-zstd-3 (fast)
      CMD=("$RINGCAP" capture -i "$RX_IF" "${rc_ring[@]}" -w "$dir/out" -F pcap --compress "zstd:${tool#ringcap-zstd}" --cpus "$CAP_CPU" -q); OUTS="out-*.pcap.zst" ;;
    ringcap-auto) CMD=("$RINGCAP" capture -i "$RX_IF" "${rc_ring[@]}" -w "$dir/out" -F pcap --compress auto --cpus "$CAP_CPU" -q); OUTS="out-*.pcap.zst" ;;
    tcpdump) CMD=("${tcpdump_ring[@]}" -w "$dir/out.pcap"); OUTS="out.pcap" ;;
    tcpdump-zstd1) CMD=(sh -c "${tcpdump_ring[*]} -w - | zstd -1 -q -c >'$dir/out.pcap.zst'"); OUTS="out.pcap.zst" ;;
    tcpdump-gzip1) CMD=(sh -c "${tcpdump_ring[*]} -w - | gzip -1 -c >'$dir/out.pcap.gz'"); OUTS="out.pcap.gz" ;;
    tcpdump-gzip9) CMD=(sh -c "${tcpdump_ring[*]} -w - | gzip -9 -c >'$dir/out.pcap.gz'"); OUTS="out.pcap.gz" ;;
    netsniff-ng) CMD=(netsniff-ng --ring-size "${RING_MIB}MiB" -i "$RX_IF" -o "$dir/out.pcap" -s); OUTS="out.pcap" ;;
    *) die "unknown tool $tool (known: ringcap-none ringcap-lz4 ringcap-auto ringcap-zstdN tcpdump tcpdump-zstd1 tcpdump-gzip1 tcpdump-gzip9 netsniff-ng)" ;;
  esac
  case "$tool" in
    ringcap-*) READY="listening on" ;;
    netsniff-ng) READY="Running!" ;;
    *) READY="listening on" ;;
  esac
}

# Packets in one output file, decompressed with the standard tool into a scratch file on the real disk.
count_packets() {
  local f="$1" plain="$WORK/count.pcap"
  case "$f" in
    *.zst) zstd -dcq "$f" >"$plain" ;;
    *.lz4) lz4 -dcq "$f" >"$plain" ;;
    *.gz) gzip -dc "$f" >"$plain" 2>/dev/null || true ;;   # a capture stopped by a signal may end mid-stream
    *) plain="$f" ;;
  esac
  capinfos -M -c "$plain" 2>/dev/null | awk -F': *' '/Number of packets/ { print $2 }'
  [ "$plain" = "$f" ] || rm -f "$plain"
}

# ringcap's summary: "drops by stage: kernel K, storage S" and "1 MiB chunks by level: zstd:9 ×N, ..."
ringcap_detail() {
  awk '/drops by stage:/ { st = $0; sub(/.*drops by stage: */, "", st); gsub(/, /, ";", st); gsub(/ /, "=", st) }
       /chunks by level:/ { lv = $0; sub(/.*chunks by level: */, "", lv); gsub(/, /, ";", lv); gsub(/ ×/, "=", lv) }
       END { printf "%s%s%s\n", st, (lv != "" ? ";levels:" : ""), lv }' "$1"
}

# ---- Checks before anything runs -----------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "run as root (network namespaces, packet sockets)"
for t in capinfos taskset ip zstd lz4 gzip; do have "$t" || die "$t is missing: run 'make deps'"; done
ringcap_has gen || die "ringcap gen is not available ($RINGCAP gen --help failed): build ringcap first"
[ "$PACKETS" -ge 1000 ] || die "PACKETS=$PACKETS is too small"
SELECTED=()
for tool in $TOOLS; do
  case "$tool" in
    ringcap-*) if ringcap_has capture; then SELECTED+=("$tool"); else say "ringcap capture not available: skipping $tool"; fi ;;
    tcpdump*) if have tcpdump; then SELECTED+=("$tool"); else say "tcpdump is not installed: skipping $tool"; fi ;;
    *) if have "$tool"; then SELECTED+=("$tool"); else say "$tool is not installed: skipping it (make deps installs it)"; fi ;;
  esac
done
[ "${#SELECTED[@]}" -gt 0 ] || die "no capturer to benchmark"
for sink in $SINKS; do
  case "$sink" in
    disk) DISK_FS="$(check_real_disk "$BENCH_DISK_DIR")" ;;
    tmpfs) mkdir -p "$BENCH_TMPFS_DIR"
      [ "$(stat -f -c %T "$BENCH_TMPFS_DIR")" = tmpfs ] || die "$BENCH_TMPFS_DIR is not on tmpfs: set BENCH_TMPFS_DIR" ;;
    *) die "unknown sink $sink (known: tmpfs disk)" ;;
  esac
done

mkdir -p "$OUT_DIR"
STAMP="$(date +%Y%m%d-%H%M%S)"
CSV="$OUT_DIR/disk-$STAMP.csv"
WORK="$(mktemp -d /var/tmp/bench-disk.XXXXXX)"
KEEP_WORK=0
on_exit() {
  bench_cleanup
  rm -rf "$BENCH_DISK_DIR"/run-"$$"-* "$BENCH_TMPFS_DIR"/run-"$$"-* 2>/dev/null || true
  if [ "$KEEP_WORK" = 1 ]; then say "logs of failed runs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap on_exit EXIT
trap 'say "interrupted: stopping and cleaning up"; exit 130' INT
trap 'say "terminated: stopping and cleaning up"; exit 143' TERM

testbed_up ""   # no RPS: the receive softirq runs on the sending CPU (CPU0)
GEN_CMD=("$RINGCAP" gen -i "$TX_IF" --dist imix --payload half -n "$PACKETS" -q)

echo "tool,sink,run,offered,captured,loss,cpu_ns,ns_per_pkt,bytes,bytes_per_pkt,status,detail,cpu_setup_ns,run_ns_per_pkt" >"$CSV"

run_one() {
  local tool="$1" sink="$2" run="$3"
  local base dir tag log ru pidf wpid tpid setup p0 p1 rc=0 status=ok
  if [ "$sink" = disk ]; then base="$BENCH_DISK_DIR"; else base="$BENCH_TMPFS_DIR"; fi
  tag="$tool-$sink-$run"
  dir="$base/run-$$-$tag"
  rm -rf "$dir"; mkdir -p "$dir"
  log="$WORK/$tag.log"; ru="$WORK/$tag.ru"; pidf="$WORK/$tag.pid"
  capture_cmd "$tool" "$dir"

  "$PY" "$BENCH_LIB/rusage.py" "$ru" "$pidf" -- ip netns exec "$RX_NS" taskset -c "$CAP_CPU" "${CMD[@]}" >"$log" 2>&1 &
  wpid=$!
  BG_PIDS+=("$wpid")
  if ! wait_ready "$wpid" "$log" "$READY" || [ ! -s "$pidf" ]; then
    stop_pid "$wpid"; wait "$wpid" 2>/dev/null || true
    fail_row "$tool" "$sink" "$run" "not capturing after 20 s (log: $log)" "$log"; return 0
  fi
  tpid="$(cat "$pidf")"
  setup="$(cpu_tree_ns "$tpid")"
  read -r p0 _ < <(rx_counters)
  if ! run_waited ip netns exec "$TX_NS" taskset -c 0 "${GEN_CMD[@]}" >"$WORK/$tag.gen.log" 2>&1; then
    status="generator failed"
  fi
  wait_drained "$tpid"
  read -r p1 _ < <(rx_counters)
  # A pipeline: stop tcpdump (the pipe's writer) so the compressor sees EOF and finishes its stream.
  local tcpdump_pid
  tcpdump_pid="$(pgrep -P "$tpid" -x tcpdump || true)"
  if [ -n "$tcpdump_pid" ]; then stop_pid "$tcpdump_pid"; fi
  stop_pid "$tpid"
  wait "$wpid" || rc=$?
  [ "$rc" = 0 ] || [ -n "$tcpdump_pid" ] || status="exit $rc"

  local offered=$((p1 - p0)) utime stime cpu_ns captured=0 bytes=0 n f
  if ! read -r utime stime _ <"$ru"; then
    fail_row "$tool" "$sink" "$run" "no rusage" "$log"; return 0
  fi
  cpu_ns=$((utime + stime))
  shopt -s nullglob
  # shellcheck disable=SC2206  # OUTS is a glob, expanded on purpose
  local outs=("$dir"/$OUTS)
  shopt -u nullglob
  [ "${#outs[@]}" -gt 0 ] || status="no output file"
  for f in "${outs[@]}"; do
    n="$(count_packets "$f")"
    if [ -z "$n" ]; then status="capinfos cannot read $f"; n=0; fi
    captured=$((captured + n))
    bytes=$((bytes + $(stat -c %s "$f")))
  done
  local detail=""
  case "$tool" in ringcap-*) detail="$(ringcap_detail "$log")" ;; esac
  rm -rf "$dir"
  sync
  [ "$offered" -gt 0 ] || status="nothing offered"
  [ "$status" = ok ] || { KEEP_WORK=1; say "$tag: $status (log: $log)"; }
  local nspp="" run_nspp="" bpp=""
  if [ "$offered" -gt 0 ]; then
    nspp="$(awk -v c="$cpu_ns" -v o="$offered" 'BEGIN { printf "%.1f", c / o }')"
    run_nspp="$(awk -v c="$cpu_ns" -v s="$setup" -v o="$offered" 'BEGIN { printf "%.1f", (c - s) / o }')"
  fi
  if [ "$captured" -gt 0 ]; then
    bpp="$(awk -v b="$bytes" -v c="$captured" 'BEGIN { printf "%.1f", b / c }')"
  fi
  echo "$tool,$sink,$run,$offered,$captured,$((offered - captured)),$cpu_ns,$nspp,$bytes,$bpp,$status,${detail//,/;},$setup,$run_nspp" >>"$CSV"
  progress "run $run/$RUNS $sink $tool: offered $offered captured $captured, $nspp ns/pkt ($run_nspp without set-up), $bytes bytes, $status $detail"
}

fail_row() {
  local tool="$1" sink="$2" run="$3" why="$4" log="$5"
  KEEP_WORK=1
  say "$tool ($sink, run $run): $why; last lines of its output:"
  tail -n 5 "$log" >&2 || true
  echo "$tool,$sink,$run,,,,,,,,failed: $why,,," >>"$CSV"
}

for ((run = 1; run <= RUNS; run++)); do
  for sink in $SINKS; do
    for tool in "${SELECTED[@]}"; do
      run_one "$tool" "$sink" "$run"
    done
  done
done

# ---- Markdown for BENCHMARKS.md -------------------------------------------------------------------------------
echo "### Capture-to-disk benchmark ($(date -u +%Y-%m-%d))"
echo
machine_md
# shellcheck disable=SC2016  # $TX_NS is shown literally
echo "- Sender: \`$(show_cmd ip netns exec '$TX_NS' taskset -c 0 "${GEN_CMD[@]}")\` (simple IMIX sizes,"
echo "  half-random payloads, full speed)"
echo "- $RUNS runs × $PACKETS packets per tool and sink, interleaved; capturer (and a pipe's compressor) pinned to CPU$CAP_CPU;"
echo "  tmpfs: $BENCH_TMPFS_DIR; disk: $BENCH_DISK_DIR (${DISK_FS:-not run})"
echo "- Every tool's ring: $RING_MIB MiB. CPU: utime+stime of the capturer and its children from wait4() (\"excl."
echo "  set-up\" subtracts what it had used when ready: ring allocation, start-up); offered = receiving veth's rx_packets delta;"
echo "  captured = \`capinfos -M -c\` after decompressing with zstd/lz4/gzip; bytes = size of the output files"
echo "- Capturer commands (run as \`ip netns exec \$RX_NS taskset -c $CAP_CPU ...\`):"
for tool in "${SELECTED[@]}"; do
  capture_cmd "$tool" DIR
  echo "  - \`$(show_cmd "${CMD[@]}")\`"
done
echo "- Raw data: \`$CSV\`"
echo
"$PY" - "$CSV" <<'EOF'
import csv, statistics, sys
from collections import OrderedDict

rows = list(csv.DictReader(open(sys.argv[1])))

def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None

def spread(vals, fmt):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "–"
    med = fmt(statistics.median(vals))
    return med if len(vals) == 1 else f"{med} ({fmt(min(vals))}…{fmt(max(vals))})"

groups = OrderedDict()
for r in rows:
    groups.setdefault((r["sink"], r["tool"]), []).append(r)
print("| sink | tool | runs | loss % | CPU ns/pkt | ns/pkt excl. set-up | bytes/pkt | drops and levels (last run) |")
print("|---|---|---|---|---|---|---|---|")
for (sink, tool), rs in groups.items():
    ok = [r for r in rs if r["status"] == "ok"]
    failed = len(rs) - len(ok)
    runs = f"{len(ok)}" + (f" (+{failed} failed)" if failed else "")
    loss = spread([100 * num(r["loss"]) / num(r["offered"]) for r in ok if num(r["offered"])], lambda x: f"{x:.2f}")
    cpu = spread([num(r["ns_per_pkt"]) for r in ok], lambda x: f"{x:.0f}")
    run_cpu = spread([num(r["run_ns_per_pkt"]) for r in ok], lambda x: f"{x:.0f}")
    bpp = spread([num(r["bytes_per_pkt"]) for r in ok], lambda x: f"{x:.0f}")
    detail = (ok or rs)[-1]["detail"].replace(";", ", ") if (ok or rs) else ""
    print(f"| {sink} | {tool} | {runs} | {loss} | {cpu} | {run_cpu} | {bpp} | {detail} |")

# The issue's targets, per sink: ringcap auto vs tcpdump | zstd -1.
print()
for sink in dict.fromkeys(r["sink"] for r in rows):
    def med(tool, field):
        v = [num(r[field]) for r in rows if r["sink"] == sink and r["tool"] == tool and r["status"] == "ok"]
        v = [x for x in v if x is not None]
        return statistics.median(v) if v else None
    a_cpu, z_cpu = med("ringcap-auto", "ns_per_pkt"), med("tcpdump-zstd1", "ns_per_pkt")
    a_b, z_b = med("ringcap-auto", "bytes_per_pkt"), med("tcpdump-zstd1", "bytes_per_pkt")
    a_loss = med("ringcap-auto", "loss")
    if None not in (a_cpu, z_cpu, a_b, z_b, a_loss):
        print(f"- {sink}: ringcap auto loses {a_loss:.0f} packets (target 0), uses {a_cpu / z_cpu:.2f} × the CPU of "
              f"tcpdump | zstd -1 (target ≤ 0.5) and writes {a_b / z_b:.2f} × its bytes (target ≤ 1.1)")
EOF
