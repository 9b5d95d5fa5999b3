# shellcheck shell=bash
# Shared by the scripts/bench-*.sh scripts (sourced, after scripts/testbed.sh).
# Facts behind the choices here: ../shared/design/TESTBED.md (pinning, non-local MAC, signals, counting).

# shellcheck disable=SC2034  # used by the scripts that source this file
BENCH_LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The system python: pyenv shims are shell scripts, slow to start and not always on PATH inside `ip netns exec`.
PY=/usr/bin/python3
[ -x "$PY" ] || PY="$(command -v python3)"
SRC_MAC=00:00:00:00:00:01
PROGRESS="${PROGRESS:-$([ -t 2 ] && echo 1 || echo 0)}"   # one line per run on stderr when it is a terminal
BG_PIDS=()   # everything started in the background, killed on exit if still alive

say() { echo "bench: $*" >&2; }
die() { say "error: $*"; exit 1; }
progress() { if [ "$PROGRESS" = 1 ]; then say "$*"; fi; return 0; }
have() { command -v "$1" >/dev/null 2>&1; }

# Resolve $RINGCAP (the Makefile passes the release binary); fall back to the usual build location or PATH.
resolve_ringcap() {
  if [ -z "${RINGCAP:-}" ]; then
    local built="${CARGO_TARGET_DIR:-$HOME/.cache/ringcap-target}/release/ringcap"
    if [ -x "$built" ]; then RINGCAP="$built"; else RINGCAP="$(command -v ringcap || echo ringcap)"; fi
  fi
}

# True when `$RINGCAP <subcommand> --help` works and prints a usage, i.e. that part of ringcap exists yet
# (a skeleton binary that accepts anything and prints nothing does not count).
ringcap_has() {
  local help
  help="$("$RINGCAP" "$1" --help 2>&1)" || return 1
  grep -qi usage <<<"$help"
}

# Stop a pid politely: SIGINT, then SIGTERM, then SIGKILL (a tool that ignores one still gets the next).
stop_pid() {
  local pid="$1" sig i
  for sig in INT TERM KILL; do
    kill -0 "$pid" 2>/dev/null || return 0
    kill -"$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    [ "$sig" = KILL ] || say "pid $pid still running 10 s after SIG$sig"
  done
}

# Run a command in the background and wait for it: bash runs a trap only after the foreground command ends, but
# it interrupts `wait` at once, so Ctrl-C or SIGTERM stops the benchmark now; the EXIT trap kills the command.
run_waited() {
  local pid rc=0
  "$@" &
  pid=$!
  BG_PIDS+=("$pid")
  wait "$pid" || rc=$?
  return "$rc"
}

# Kill what we started (by pid, never by name), then remove the testbed. Installed as the EXIT trap.
bench_cleanup() {
  local pid
  for pid in "${BG_PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      pkill -KILL -P "$pid" 2>/dev/null || true   # children of our own wrapper only
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  testbed_down
}

# CPU time (ns) used so far by each thread of PID and of its live descendants, one "NAME NS" line per thread
# (NAME: its comm, may hold spaces): sum_exec_runtime from /proc/*/task/*/schedstat (exact ns, unlike
# /proc/PID/stat's 10 ms ticks; the same clock rusage is scaled to).
cpu_tree_threads() {
  local pid="$1" d t name c
  for d in /proc/"$pid"/task/*; do
    read -r t _ <"$d/schedstat" 2>/dev/null || continue
    read -r name <"$d/comm" 2>/dev/null || name="?"
    echo "$name $t"
  done
  for d in /proc/"$pid"/task/*/children; do
    [ -r "$d" ] || continue
    # shellcheck disable=SC2013  # one line of space-separated pids
    for c in $(cat "$d" 2>/dev/null); do cpu_tree_threads "$c"; done
  done
}

# CPU time (ns) used so far by PID, all its threads and its live descendants.
cpu_tree_ns() { cpu_tree_threads "$1" | awk '{ s += $NF } END { printf "%.0f\n", s }'; }

# Number of running packet sockets bound to the receive interface inside the Rx namespace.
rx_packet_sockets() {
  local idx
  idx="$(ip netns exec "$RX_NS" cat "/sys/class/net/$RX_IF/ifindex")"
  # shellcheck disable=SC2016  # awk's own $5, $6
  ip netns exec "$RX_NS" awk -v idx="$idx" 'NR > 1 && $5 == idx && $6 == 1 { n++ } END { print n + 0 }' /proc/net/packet
}

# Wait until a capturer is ready: its log shows PATTERN (if given) and a packet socket is bound and running
# on the interface (unless SOCKET is 0: AF_XDP has none). Fails if the process exits first or nothing happens
# within 20 s.
wait_ready() {
  local pid="$1" log="$2" pattern="$3" socket="${4:-1}" i
  for ((i = 0; i < 400; i++)); do
    kill -0 "$pid" 2>/dev/null || return 1
    if { [ -z "$pattern" ] || grep -q -- "$pattern" "$log" 2>/dev/null; } && { [ "$socket" = 0 ] || [ "$(rx_packet_sockets)" -gt 0 ]; }; then
      sleep 0.5   # let it reach its capture loop after printing
      return 0
    fi
    sleep 0.05
  done
  return 1
}

rx_counters() {
  ip netns exec "$RX_NS" sh -c "cat /sys/class/net/$RX_IF/statistics/rx_packets /sys/class/net/$RX_IF/statistics/rx_bytes" | paste -sd' '
}

# trafgen config for one UDP/IPv4 frame of FRAME_LEN bytes (no FCS) to the non-local DST_MAC.
trafgen_cfg() {
  local file="$1" frame_len="$2"
  local payload=$((frame_len - 14 - 20 - 8))
  [ "$payload" -ge 0 ] || die "frame length $frame_len is below 42 bytes (Ethernet + IPv4 + UDP headers)"
  cat >"$file" <<EOF
{ eth(da=$DST_MAC, sa=$SRC_MAC), ipv4(saddr=10.77.0.1, daddr=10.77.0.9, ttl=64), udp(sp=9, dp=9), fill(0x00, $payload) }
EOF
}

# The filesystem type of DIR; refuse tmpfs/ramfs (page allocation there is not the cost of a disk).
check_real_disk() {
  local dir="$1" fstype
  mkdir -p "$dir"
  fstype="$(stat -f -c %T "$dir")"
  case "$fstype" in
    tmpfs | ramfs) die "$dir is on $fstype, not a disk: set BENCH_DISK_DIR to a directory on a real disk" ;;
  esac
  echo "$fstype"
}

# First line of a tool's version output, or "missing".
tool_version() {
  case "$1" in
    tcpdump) tcpdump --version 2>&1 | head -1 ;;
    netsniff-ng | trafgen) "$1" -v 2>&1 | head -1 | sed 's/,.*Git id.*//' ;;
    dumpcap | capinfos) "$1" -v 2>&1 | head -1 ;;
    ringcap | ringcap-*) "$RINGCAP" --version 2>&1 | head -1 ;;
    *) "$1" --version 2>&1 | head -1 ;;
  esac
}

# Markdown lines describing the machine, for BENCHMARKS.md.
machine_md() {
  local cpu
  cpu="$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- Kernel: $(uname -r); CPU: ${cpu:-unknown} × $(nproc); RAM: $(free -g | awk '/^Mem:/ { print $2 }') GiB"
  echo "- Testbed: scripts/testbed.sh (two network namespaces, one veth pair, IPv6 off, no RPS), frames to the"
  echo "  non-local MAC $DST_MAC from $SRC_MAC"
}

# Quote a command (array) for display, the way a user would type it.
show_cmd() {
  local out="" a
  for a in "$@"; do
    [ "$a" = "${RINGCAP:-}" ] && a=ringcap   # the binary's path is noise in a table
    [ -n "${WORK:-}" ] && a="${a//$WORK\//}"  # so are temporary directories
    if [[ "$a" =~ ^[A-Za-z0-9_./:,=@%+\$-]+$ ]]; then out+="$a "; else out+="'$a' "; fi
  done
  echo "${out% }"
}

# ---- Stores written by `ringcap capture -w DIR/cap -C ...` (bench-query.sh, bench-everything.sh) ---------------

# Sum of the sizes of the files directly in DIR whose name matches the find -name pattern.
sum_bytes() { find "$1" -maxdepth 1 -type f -name "$2" -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
# The capture files in DIR (not their indexes, flow tables or .coverage.json records), in name (= time) order.
capture_files() { find "$1" -maxdepth 1 -type f -name 'cap-*.pcap*' ! -name '*.idx' ! -name '*.parquet' ! -name '*.json' | sort; }
# One field of the capture's final JSON summary line (a dotted path), from its stderr log (bench-fleet.sh too).
summary_field() {
  "$PY" - "$1" "$2" <<'EOF'
import json, sys
log, path = sys.argv[1:]
s = None
for line in open(log, errors="replace"):
    line = line.strip()
    if line.startswith("{") and '"summary"' in line:
        try:
            s = json.loads(line)
        except ValueError:
            pass
v = s
for k in path.split("."):
    v = v.get(k) if isinstance(v, dict) else None
print("-" if v is None else v)
EOF
}

# ---- Capture runs (bench-capture.sh, bench-xdp.sh) ------------------------------------------------------------

CAPTURE_CSV_HEADER="tool,sink,mode,run,offered,captured,drops,cpu_ns,ns_per_pkt,capture_rate,cpu_setup_ns,run_ns_per_pkt,offered_pps,status,drop_detail,sys_ns,sys_setup_ns,sys_ns_per_pkt,bg_busy_pct,sys_net_ns_per_pkt"
JIFFY_NS=$((1000000000 / $(getconf CLK_TCK)))

# Busy jiffies of all CPUs together (/proc/stat "cpu" line: user nice system irq softirq steal; not idle, iowait;
# guest time is already inside user).
busy_jiffies() {
  awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}

# parse_summary TOOL LOG prints "captured drops detail" from the tool's final summary (- when it has none).
parse_summary() {
  local tool="$1" log="$2"
  case "$tool" in
    xdp-drop)   # ringcap --drop-all --source xdp: what the XDP program counted and dropped is the "capture"
      awk '/packets received by filter/ { c = $1 } END { printf "%s 0 kernel=0\n", (c == "" ? "-" : c) }' "$log" ;;
    ringcap-*|before-*)
      # tcpdump's three lines, then "ringcap: ... drops by stage: kernel 0, storage 0": drops = sum of the stages.
      awk '/packets captured/ { c = $1 } /dropped by kernel/ { d = $1 }
           /drops by stage:/ && !/AF_XDP/ { st = $0; sub(/.*drops by stage: */, "", st); n = split(st, kv, /, */); sum = 0
             for (i = 1; i <= n; i++) { split(kv[i], p, " "); sum += p[2]; det = det (det ? ";" : "") p[1] "=" p[2] } }
           /AF_XDP drops by stage:/ { x = $0; sub(/.*AF_XDP drops by stage: */, "", x); sub(/;.*/, "", x)
             gsub(/socket ring full /, "xsk_full=", x); gsub(/no free frame /, "fill_empty=", x); gsub(/other /, "xsk_other=", x)
             gsub(/, */, ";", x) }
           END { if (det != "") d = sum; if (x != "") det = det ";" x
             printf "%s %s %s\n", (c == "" ? "-" : c), (d == "" ? "-" : d), (det == "" ? "kernel=" d : det) }' "$log" ;;
    tcpdump | tcpdump-*)
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

# send_measured TPID TX_LOG SENDER...: with the capturer TPID ready, the CPU its set-up took (SETUP_NS), the
# background load in an idle second (BG_S1, BG_S2: busy jiffies; BG_B1, BG_B2: the clock in ns), then the sender in
# the Tx namespace (output to TX_LOG) and the drain: rx_packets before sending and after the drain (RX_P0, RX_P1),
# the clock around the sending (SEND_T0, SEND_T1). Returns the sender's status. (run_one, bench-everything.sh)
send_measured() {
  local tpid="$1" txlog="$2" rc=0
  shift 2
  SETUP_NS="$(cpu_tree_ns "$tpid")"
  # The machine may be shared: the busy share of an idle second before sending is the background load.
  BG_S1="$(busy_jiffies)"; BG_B1="$(date +%s%N)"; sleep 1; BG_S2="$(busy_jiffies)"; BG_B2="$(date +%s%N)"
  read -r RX_P0 _ < <(rx_counters)
  SEND_T0="$(date +%s%N)"
  run_waited ip netns exec "$TX_NS" "$@" >"$txlog" 2>&1 || rc=$?
  SEND_T1="$(date +%s%N)"
  wait_drained "$tpid"
  read -r RX_P1 _ < <(rx_counters)
  return "$rc"
}

# run_one TOOL SINK MODE RUN: one capture run; appends one CSV row ($CAPTURE_CSV_HEADER) to $CSV. The script
# defines capture_cmd TOOL OUT CPU (sets CMD, READY and, for a tool without a packet socket, SOCKET=0), file_ext
# TOOL, and TG_CMD (the sender, run in the Tx namespace on CPU0); it sets RUNS, WORK, KEEP_WORK, BENCH_DISK_DIR.
# System-wide CPU: busy time of all CPUs from /proc/stat (softirq included, idle and iowait not), from the
# start of sending until drained (sys_ns) and from launch until ready (sys_setup_ns); on a shared machine,
# sys_net_ns_per_pkt subtracts the background load measured in an idle second just before sending.
run_one() {
  local tool="$1" sink="$2" mode="$3" run="$4"
  local cpu=1 out tag log ru pidf wpid tpid setup p0 p1 t0 t1 s0 s1 s2 s3 b1 b2 t3 rc=0 status=ok
  [ "$mode" = single ] && cpu=0
  tag="$tool-$sink-$mode-$run"
  if [ "$sink" = disk ]; then out="$BENCH_DISK_DIR/bench-$$-$tag.$(file_ext "$tool")"; else out=/dev/null; fi
  log="$WORK/$tag.log"; ru="$WORK/$tag.ru"; pidf="$WORK/$tag.pid"
  SOCKET=1
  capture_cmd "$tool" "$out" "$cpu"
  # Never for the null sink: removing /dev/null lets the tool create a regular file in its place.
  if [ "$sink" = disk ]; then rm -f "$out"; fi

  s0="$(busy_jiffies)"
  "$PY" "$BENCH_LIB/rusage.py" "$ru" "$pidf" -- ip netns exec "$RX_NS" taskset -c "$cpu" "${CMD[@]}" >"$log" 2>&1 &
  wpid=$!
  BG_PIDS+=("$wpid")
  if ! wait_ready "$wpid" "$log" "$READY" "$SOCKET" || [ ! -s "$pidf" ]; then
    local why="not capturing after 20 s"
    kill -0 "$wpid" 2>/dev/null || why="exited before capturing"
    stop_pid "$wpid"; wait "$wpid" 2>/dev/null || true
    fail_row "$tool" "$sink" "$mode" "$run" "$why (log: $log)" "$log"; return 0
  fi
  tpid="$(cat "$pidf")"
  send_measured "$tpid" "$WORK/$tag.trafgen.log" taskset -c 0 "${TG_CMD[@]}" || status="trafgen failed"
  setup="$SETUP_NS"; s1="$BG_S1"; s2="$BG_S2"; b1="$BG_B1"; b2="$BG_B2"
  p0="$RX_P0"; p1="$RX_P1"; t0="$SEND_T0"; t1="$SEND_T1"
  s3="$(busy_jiffies)"; t3="$(date +%s%N)"
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
  row="$("$PY" - "$offered" "$captured" "$cpu_ns" "$setup" "$t0" "$t1" "$s0" "$s1" "$s2" "$s3" "$JIFFY_NS" "$b1" "$b2" "$t3" <<'EOF'
import sys
offered, captured, cpu, setup, t0, t1, s0, s1, s2, s3, jiffy, b1, b2, t3 = sys.argv[1:]
s0, s1, s2, s3, jiffy, b1, b2, t3 = (int(v) for v in (s0, s1, s2, s3, jiffy, b1, b2, t3))
offered, cpu, setup = int(offered), int(cpu), int(setup)
nspp = f"{cpu / offered:.1f}" if offered else ""
run_nspp = f"{(cpu - setup) / offered:.1f}" if offered else ""
rate = f"{int(captured) / offered:.6f}" if offered and captured.isdigit() else ""
pps = f"{offered / ((int(t1) - int(t0)) / 1e9):.0f}" if int(t1) > int(t0) else ""
sys_ns, sys_setup_ns = (s3 - s2) * jiffy, (s1 - s0) * jiffy   # sending + drain; launch until ready
sys_nspp = f"{sys_ns / offered:.1f}" if offered else ""
bg_rate = (s2 - s1) * jiffy / max(b2 - b1, 1)   # busy CPUs in the idle second (1.0 = one CPU's worth)
bg = f"{100 * bg_rate:.1f}"
# Net of background: what the same load would have used over the measured window anyway (an estimate).
net_nspp = f"{(sys_ns - bg_rate * (t3 - int(t0))) / offered:.1f}" if offered else ""
print(f"{nspp},{rate},{run_nspp},{pps},{sys_ns},{sys_setup_ns},{sys_nspp},{bg},{net_nspp}")
EOF
)"
  local nspp rate run_nspp pps sys_ns sys_setup_ns sys_nspp bg net_nspp
  IFS=, read -r nspp rate run_nspp pps sys_ns sys_setup_ns sys_nspp bg net_nspp <<<"$row"
  echo "$tool,$sink,$mode,$run,$offered,$captured,$drops,$cpu_ns,$nspp,$rate,$setup,$run_nspp,$pps,$status,${detail//,/;},$sys_ns,$sys_setup_ns,$sys_nspp,$bg,$net_nspp" >>"$CSV"
  progress "run $run/$RUNS $mode $sink $tool: offered $offered captured $captured drops $drops, $nspp ns/pkt ($run_nspp without set-up), $status"
}

fail_row() {
  local tool="$1" sink="$2" mode="$3" run="$4" why="$5" log="$6"
  KEEP_WORK=1
  say "$tool ($sink, $mode, run $run): $why; last lines of its output:"
  tail -n 5 "$log" >&2 || true
  echo "$tool,$sink,$mode,$run,,,,,,,,,,failed: $why,,,,,," >>"$CSV"
}
