# shellcheck shell=bash
# Shared by scripts/bench-capture.sh and scripts/bench-gen.sh (sourced, after scripts/testbed.sh).
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

# CPU time (ns) used so far by PID, all its threads and its live descendants: sum of sum_exec_runtime from
# /proc/*/schedstat (exact ns, unlike /proc/PID/stat's 10 ms ticks; the same clock rusage is scaled to).
cpu_tree_ns() {
  local pid="$1" total=0 f t c
  for f in /proc/"$pid"/task/*/schedstat; do
    [ -r "$f" ] || continue
    read -r t _ <"$f" 2>/dev/null || continue
    total=$((total + t))
  done
  for f in /proc/"$pid"/task/*/children; do
    [ -r "$f" ] || continue
    # shellcheck disable=SC2013  # one line of space-separated pids
    for c in $(cat "$f" 2>/dev/null); do total=$((total + $(cpu_tree_ns "$c"))); done
  done
  echo "$total"
}

# Number of running packet sockets bound to the receive interface inside the Rx namespace.
rx_packet_sockets() {
  local idx
  idx="$(ip netns exec "$RX_NS" cat "/sys/class/net/$RX_IF/ifindex")"
  # shellcheck disable=SC2016  # awk's own $5, $6
  ip netns exec "$RX_NS" awk -v idx="$idx" 'NR > 1 && $5 == idx && $6 == 1 { n++ } END { print n + 0 }' /proc/net/packet
}

# Wait until a capturer is ready: its log shows PATTERN (if given) and a packet socket is bound and running
# on the interface. Fails if the process exits first or nothing happens within 20 s.
wait_ready() {
  local pid="$1" log="$2" pattern="$3" i
  for ((i = 0; i < 400; i++)); do
    kill -0 "$pid" 2>/dev/null || return 1
    if { [ -z "$pattern" ] || grep -q -- "$pattern" "$log" 2>/dev/null; } && [ "$(rx_packet_sockets)" -gt 0 ]; then
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
    ringcap) "$RINGCAP" --version 2>&1 | head -1 ;;
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
