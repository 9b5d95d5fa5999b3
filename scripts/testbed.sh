# Shared by the demo and benchmark scripts: a throwaway pair of network namespaces joined by a veth pair.
# (The Rust tests use the testbed crate, which does the same; this copy exists so the scripts read as plain commands.)
# Usage: source scripts/testbed.sh; testbed_up [rps_cpu]; ... ; testbed_down (also run on EXIT).

TB_ID="rcs$$"
TX_NS="${TB_ID}t"; RX_NS="${TB_ID}r"; TX_IF=veth-tx; RX_IF=veth-rx
DST_MAC=02:00:00:00:00:02   # not the receiver's MAC: the kernel does no UDP work, the capturer sees all (promiscuous)

testbed_down() {
  ip netns del "$TX_NS" 2>/dev/null || true
  ip netns del "$RX_NS" 2>/dev/null || true
}

testbed_up() {
  local rps_cpu="${1:-}"
  testbed_down
  ip netns add "$TX_NS"; ip netns add "$RX_NS"
  ip link add "${TB_ID}a" type veth peer name "${TB_ID}b"
  ip link set "${TB_ID}a" netns "$TX_NS"; ip link set "${TB_ID}b" netns "$RX_NS"
  ip -n "$TX_NS" link set "${TB_ID}a" name "$TX_IF"; ip -n "$RX_NS" link set "${TB_ID}b" name "$RX_IF"
  for ns in "$TX_NS" "$RX_NS"; do
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  done
  ip netns exec "$TX_NS" sysctl -qw "net.ipv6.conf.$TX_IF.disable_ipv6=1"
  ip netns exec "$RX_NS" sysctl -qw "net.ipv6.conf.$RX_IF.disable_ipv6=1"
  ip -n "$TX_NS" addr add 10.77.0.1/24 dev "$TX_IF"; ip -n "$RX_NS" addr add 10.77.0.2/24 dev "$RX_IF"
  ip -n "$TX_NS" link set "$TX_IF" up; ip -n "$RX_NS" link set "$RX_IF" up
  if [ -n "$rps_cpu" ]; then
    ip netns exec "$RX_NS" sh -c "printf %x $((1 << rps_cpu)) > /sys/class/net/$RX_IF/queues/rx-0/rps_cpus"
  fi
}

rx_packets() { ip netns exec "$RX_NS" cat "/sys/class/net/$RX_IF/statistics/rx_packets"; }
