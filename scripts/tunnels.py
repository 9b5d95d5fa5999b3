#!/usr/bin/python3
"""Tunnelled test traffic for ringcap's decapsulation tests (issue 36, crates/ringcap/tests/tunnels.rs).

Builds frames that wrap inner TCP/UDP conversations (several inner hosts, ports and flows, both
directions, some inner IPv6) in one tunnel kind each, plus deliberately truncated tunnel headers and
nestings, and sends them through a real interface with a real packet socket (scapy's sendp, run
inside the testbed's Tx namespace) while `ringcap capture` records the other end of the veth.

Why an encoder and not Linux tunnel devices: the kernel of the test machines (6.18, no modules, no
modprobe) has only CONFIG_VXLAN built in; `ip link add type geneve|gre|gretap|erspan|ipip|sit|ip6tnl`
fail with "Unknown device type" and MPLS routing (net.mpls) is absent. So VXLAN also comes from a
real kernel `vxlan` device (crates/testbed, VxlanOptions), and every other kind from this script.
Scapy (Debian's python3-scapy, run by /usr/bin/python3) is an encoder independent of ringcap's
parser and of libpcap and Wireshark, the decoders the tests compare.

Deterministic: a fixed seed gives the same frames in the same order. With --manifest, prints one
JSON object per frame (in sending order, so `n` is tshark's frame.number when nothing else is
captured): kind, frame length, tunnel identity (vlans, labels, key, vni, span), the innermost
5-tuple (null for malformed frames) and, for malformed frames, what is wrong with them.

Usage: tunnels.py --kind KIND [--seed N] [--iface IF] [--write FILE] [--manifest]
Kinds: qinq mpls gre gre-key gretap erspan2 erspan3 vxlan geneve ipip ip6in4 nested malformed
"""

import argparse
import json
import random
import sys

from scapy.all import IP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPv6, Raw, sendp, wrpcap
from scapy.contrib.erspan import ERSPAN_II, ERSPAN_III
from scapy.contrib.geneve import GENEVE
from scapy.contrib.mpls import MPLS
from scapy.layers.l2 import GRE
from scapy.layers.vxlan import VXLAN

KINDS = ["qinq", "mpls", "gre", "gre-key", "gretap", "erspan2", "erspan3", "vxlan", "geneve",
         "ipip", "ip6in4", "nested", "malformed"]

INNER4 = [f"10.1.0.{i}" for i in range(1, 7)]
INNER6 = [f"fd00:1::{i}" for i in range(1, 5)]
# Tunnel end points (outer addresses) and the MACs of the outer frames.
OUT_A, OUT_B = "192.0.2.1", "192.0.2.2"
MIRROR_SRC, COLLECTOR = "192.0.2.10", "192.0.2.20"
MAC_A, MAC_B = "02:00:00:00:01:01", "02:00:00:00:01:02"


def mac_of(host):
    """A locally administered MAC per inner host, for the inner Ethernet headers."""
    n = sum(ord(c) for c in host) & 0xFF
    return f"02:00:00:00:02:{n:02x}"


def tcp_conv(rng, a, b, sport, dport):
    """A whole TCP connection a->b: (forward, packet) in order."""
    L3 = IPv6 if ":" in a else IP
    sa, sb = rng.randrange(1 << 32), rng.randrange(1 << 32)
    fwd = lambda **kw: (True, L3(src=a, dst=b) / TCP(sport=sport, dport=dport, **kw))
    rev = lambda **kw: (False, L3(src=b, dst=a) / TCP(sport=dport, dport=sport, **kw))
    n1, n2 = rng.randrange(10, 400), rng.randrange(10, 900)
    out = [fwd(flags="S", seq=sa), rev(flags="SA", seq=sb, ack=sa + 1),
           fwd(flags="A", seq=sa + 1, ack=sb + 1)]
    p = fwd(flags="PA", seq=sa + 1, ack=sb + 1)
    out.append((True, p[1] / Raw(bytes(rng.randrange(256) for _ in range(n1)))))
    p = rev(flags="PA", seq=sb + 1, ack=sa + 1 + n1)
    out.append((False, p[1] / Raw(bytes(rng.randrange(256) for _ in range(n2)))))
    out += [fwd(flags="FA", seq=sa + 1 + n1, ack=sb + 1 + n2),
            rev(flags="FA", seq=sb + 1 + n2, ack=sa + 2 + n1),
            fwd(flags="A", seq=sa + 2 + n1, ack=sb + 2 + n2)]
    return out


def udp_conv(rng, a, b, sport, dport):
    """Request/response pairs a->b and back."""
    L3 = IPv6 if ":" in a else IP
    out = []
    for _ in range(rng.randrange(2, 5)):
        q = bytes(rng.randrange(256) for _ in range(rng.randrange(8, 200)))
        r = bytes(rng.randrange(256) for _ in range(rng.randrange(8, 600)))
        out.append((True, L3(src=a, dst=b) / UDP(sport=sport, dport=dport) / Raw(q)))
        out.append((False, L3(src=b, dst=a) / UDP(sport=dport, dport=sport) / Raw(r)))
    return out


def conversations(rng, v4=True, v6=True):
    """Inner flows: [(flow number, [(forward, inner IP packet)])]."""
    flows = []
    if v4:
        for _ in range(3):
            a, b = rng.sample(INNER4, 2)
            flows.append(tcp_conv(rng, a, b, rng.randrange(1024, 65535), rng.choice([80, 443, 22])))
        for _ in range(2):
            a, b = rng.sample(INNER4, 2)
            flows.append(udp_conv(rng, a, b, rng.randrange(1024, 65535), rng.choice([5300, 12300])))
    if v6:
        for _ in range(1 if v4 else 3):
            a, b = rng.sample(INNER6, 2)
            flows.append(tcp_conv(rng, a, b, rng.randrange(1024, 65535), 443))
        a, b = rng.sample(INNER6, 2)
        flows.append(udp_conv(rng, a, b, rng.randrange(1024, 65535), 5300))
    return list(enumerate(flows))


def interleave(rng, flows):
    """The flows' packets mixed, each flow's order kept: [(flow number, forward, packet)]."""
    queues = [(i, list(pkts)) for i, pkts in flows]
    out = []
    while queues:
        q = rng.choice(queues)
        fwd, p = q[1].pop(0)
        out.append((q[0], fwd, p))
        if not q[1]:
            queues.remove(q)
    return out


def eth(inner):
    """An inner IP packet in an Ethernet header (for the kinds that carry Ethernet)."""
    t = 0x86DD if inner.version == 6 else 0x0800
    return Ether(src=mac_of(inner.src), dst=mac_of(inner.dst), type=t) / inner


def outer_ip(fwd, proto=None):
    a, b = (OUT_A, OUT_B) if fwd else (OUT_B, OUT_A)
    e = Ether(src=MAC_A if fwd else MAC_B, dst=MAC_B if fwd else MAC_A)
    return e / (IP(src=a, dst=b) if proto is None else IP(src=a, dst=b, proto=proto))


def five_tuple(p):
    """The innermost IP header's 5-tuple of a scapy packet."""
    ips = [l for l in p.iterpayloads() if isinstance(l, (IP, IPv6))]
    ip = ips[-1]
    l4 = ip.payload
    proto = "tcp" if isinstance(l4, TCP) else "udp" if isinstance(l4, UDP) else str(ip.proto)
    return {"src": ip.src, "dst": ip.dst, "proto": proto,
            "sport": getattr(l4, "sport", None), "dport": getattr(l4, "dport", None)}


def tunnelled(kind, rng):
    """[(frame, tunnel identity)] of one kind."""
    out = []
    flows = conversations(rng, v4=kind != "ip6in4", v6=kind != "ipip")
    seq = 0
    for flow, fwd, p in interleave(rng, flows):
        seq += 1
        if kind == "qinq":
            # 802.1ad outer tag, 802.1Q inner; one flow in two 802.1Q tags (also QinQ in practice).
            outer, _, inner_tag = [(0x88A8, 10, 20), (0x88A8, 10, 30), (0x8100, 11, 21)][flow % 3]
            e = Ether(src=mac_of(p.src), dst=mac_of(p.dst), type=outer)
            outer_tag = 10 if outer == 0x88A8 else 11
            first = (Dot1AD if outer == 0x88A8 else Dot1Q)(vlan=outer_tag, type=0x8100)
            t = 0x86DD if p.version == 6 else 0x0800
            f = e / first / Dot1Q(vlan=inner_tag, type=t) / p
            ids = {"vlans": [first.vlan, inner_tag]}
        elif kind == "mpls":
            labels = [[100], [101, 200]][flow % 2]
            e = Ether(src=MAC_A if fwd else MAC_B, dst=MAC_B if fwd else MAC_A, type=0x8847)
            stack = None
            for i, l in enumerate(labels):
                m = MPLS(label=l, s=int(i == len(labels) - 1), ttl=64)
                stack = m if stack is None else stack / m
            f = e / stack / p
            ids = {"labels": labels}
        elif kind in ("gre", "gre-key"):
            t = 0x86DD if p.version == 6 else 0x0800
            if kind == "gre":
                g, ids = GRE(proto=t), {}
            else:
                key = [5, 6][flow % 2]
                g, ids = GRE(key_present=1, key=key, proto=t), {"key": key}
            f = outer_ip(fwd, 47) / g / p
        elif kind == "gretap":
            key = 9 if flow % 2 else None
            g = GRE(proto=0x6558) if key is None else GRE(key_present=1, key=key, proto=0x6558)
            f = outer_ip(fwd, 47) / g / eth(p)
            ids = {} if key is None else {"key": key}
        elif kind in ("erspan2", "erspan3"):
            # A switch mirrors both directions of the inner conversation to one collector.
            e = Ether(src=MAC_A, dst=MAC_B) / IP(src=MIRROR_SRC, dst=COLLECTOR, proto=47)
            if kind == "erspan2":
                span = [123, 124][flow % 2]
                hdr = GRE(seqnum_present=1, seqence_number=seq, proto=0x88BE) / ERSPAN_II(
                    ver=1, session_id=span, index=flow)
            else:
                span = [125, 126][flow % 2]
                hdr = GRE(seqnum_present=1, seqence_number=seq, proto=0x22EB) / ERSPAN_III(
                    ver=2, session_id=span, timestamp=seq * 1000)
            f = e / hdr / eth(p)
            ids = {"span": span}
        elif kind == "vxlan":
            # 4789 is VXLAN's port in libpcap-less tools and tshark; 8472 (Linux's old default) needs
            # tshark's decode-as (udp.port==8472,vxlan).
            vni, port = [(42, 4789), (43, 4789), (44, 8472)][flow % 3]
            sport = 49152 + (flow * 97) % 16000
            f = outer_ip(fwd) / UDP(sport=sport, dport=port) / VXLAN(vni=vni) / eth(p)
            ids = {"vni": vni, "port": port}
        elif kind == "geneve":
            vni = [7, 8][flow % 2]
            sport = 49152 + (flow * 97) % 16000
            f = outer_ip(fwd) / UDP(sport=sport, dport=6081) / GENEVE(vni=vni, proto=0x6558) / eth(p)
            ids = {"vni": vni}
        elif kind == "ipip":
            f = outer_ip(fwd, 4) / p
            ids = {}
        elif kind == "ip6in4":
            f = outer_ip(fwd, 41) / p
            ids = {}
        else:
            raise SystemExit(f"unknown kind {kind}")
        out.append((f, ids))
    return out


def nested(rng):
    """Tunnels in tunnels, 2 to 8 deep."""
    out = []
    flows = conversations(rng, v6=False)
    for flow, fwd, p in interleave(rng, flows):
        v = flow % 3
        if v == 0:
            # VXLAN inside GRE (key 9) inside QinQ 10/20.
            o = (Ether(src=MAC_A, dst=MAC_B, type=0x88A8) / Dot1AD(vlan=10, type=0x8100)
                 / Dot1Q(vlan=20, type=0x0800))
            a, b = (OUT_A, OUT_B) if fwd else (OUT_B, OUT_A)
            f = (o / IP(src=a, dst=b) / GRE(key_present=1, key=9, proto=0x0800)
                 / IP(src="198.51.100.1", dst="198.51.100.2") / UDP(sport=50000 + flow, dport=4789)
                 / VXLAN(vni=77) / eth(p))
            ids = {"vlans": [10, 20], "key": 9, "vni": 77, "depth": 4}
        elif v == 1:
            # A VLAN tag inside GENEVE, inside MPLS 300.
            t = 0x0800
            f = (Ether(src=MAC_A, dst=MAC_B, type=0x8847) / MPLS(label=300, s=1, ttl=64)
                 / IP(src=OUT_A, dst=OUT_B) / UDP(sport=50100 + flow, dport=6081) / GENEVE(vni=7, proto=0x6558)
                 / Ether(src=mac_of(p.src), dst=mac_of(p.dst), type=0x8100) / Dot1Q(vlan=30, type=t) / p)
            ids = {"labels": [300], "vni": 7, "vlans": [30], "depth": 3}
        else:
            # IP-in-IP 8 deep (a bound on nesting depth must count these, not loop).
            f = p
            for d in range(8):
                f = IP(src=f"203.0.113.{d + 1}", dst=f"203.0.113.{d + 101}", proto=4) / f
            f = Ether(src=MAC_A, dst=MAC_B) / f
            ids = {"depth": 8}
        out.append((f, ids))
    return out


def malformed(rng):
    """Truncated or inconsistent tunnel headers, each behind a well-formed outer header."""
    inner = bytes(IP(src=INNER4[0], dst=INNER4[1]) / TCP(sport=1234, dport=80, flags="S"))
    o = lambda proto=None: outer_ip(True, proto)
    cases = [
        ("gre header cut after 1 byte", o(47) / Raw(b"\x00")),
        ("gre key flag without the key", o(47) / Raw(b"\x20\x00\x08\x00")),
        ("gre version 3", o(47) / Raw(b"\x00\x03\x08\x00") / Raw(inner)),
        ("vxlan header cut after 3 bytes", o() / UDP(sport=40000, dport=4789) / Raw(b"\x08\x00\x00")),
        ("vxlan inner ethernet cut after 8 bytes", o() / UDP(sport=40001, dport=4789) / VXLAN(vni=42) / Raw(b"\x02" * 8)),
        ("geneve options longer than the packet", o() / UDP(sport=40002, dport=6081) / Raw(b"\x3f\x00\x65\x58\x00\x00\x07\x00" + b"\x00" * 8)),
        ("mpls stack without bottom of stack", Ether(src=MAC_A, dst=MAC_B, type=0x8847) / MPLS(label=100, s=0) / MPLS(label=101, s=0)),
        ("ip-in-ip inner header cut after 12 bytes", o(4) / Raw(inner[:12])),
        ("ipv6-in-ip inner header cut after 20 bytes", o(41) / Raw(bytes(IPv6(src=INNER6[0], dst=INNER6[1]))[:20])),
        ("erspan ii header cut after 4 bytes", o(47) / GRE(seqnum_present=1, seqence_number=1, proto=0x88BE) / Raw(b"\x10\x00\x00\x7b")),
        # (Cut inside the second tag, Linux's receive path drops the frame before any capture sees it.)
        ("qinq inner ip header cut after 10 bytes", Ether(src=MAC_A, dst=MAC_B, type=0x88A8) / Dot1AD(vlan=10, type=0x8100) / Dot1Q(vlan=20, type=0x0800) / Raw(inner[:10])),
        ("vxlan inner ip total length beyond the frame", o() / UDP(sport=40003, dport=4789) / VXLAN(vni=42) / Ether(src=MAC_A, dst=MAC_B, type=0x0800) / Raw(b"\x45\x00\x05\xdc" + inner[4:20])),
    ]
    out = []
    for _ in range(3):
        for why, f in cases:
            out.append((f, {"malformed": why}))
    rng.shuffle(out)
    return out


def frames(kind, seed):
    rng = random.Random(f"{seed}:{kind}")
    if kind == "nested":
        return nested(rng)
    if kind == "malformed":
        return malformed(rng)
    return tunnelled(kind, rng)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kind", required=True, choices=KINDS)
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--iface", help="send the frames through this interface (sendp, a packet socket)")
    ap.add_argument("--write", help="also write the frames to this pcap file")
    ap.add_argument("--manifest", action="store_true", help="print one JSON line per frame")
    args = ap.parse_args()
    fs = frames(args.kind, args.seed)
    if args.manifest:
        for n, (f, ids) in enumerate(fs, 1):
            bad = ids.pop("malformed", None)
            rec = {"n": n, "kind": args.kind, "len": len(bytes(f)), "ids": ids,
                   "inner": None if bad else five_tuple(f), "malformed": bad}
            print(json.dumps(rec))
    if args.write:
        wrpcap(args.write, [f for f, _ in fs])
    if args.iface:
        sendp([f for f, _ in fs], iface=args.iface, verbose=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
