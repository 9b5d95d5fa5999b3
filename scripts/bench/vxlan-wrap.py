#!/usr/bin/env python3
"""Wrap every Ethernet frame of a pcap in VXLAN, as AWS VPC Traffic Mirroring delivers it (issue 36's benchmark).

Usage: vxlan-wrap.py IN.pcap OUT.pcap [VNI]

Each frame becomes outer Ethernet / IPv4 192.0.2.1 -> 192.0.2.2 (DF, TTL 64, header checksum) / UDP
srcport 49152 + hash(inner 5-tuple) % 16384, dstport 4789, checksum 0 / VXLAN (I flag, VNI, default 42) /
the original frame. Timestamps and the file's byte order and timestamp precision are kept; the snaplen
grows by the 50 bytes of wrapping; a record cut by the snaplen stays cut (its wire length grows by 50 too).
Stdlib only. The hash is symmetric (both directions of a flow get the same source port) and stable
across runs (crc32, not Python's salted hash).
"""

import struct
import sys
import zlib

OUTER_MAC = bytes.fromhex("020000000002" "020000000001")  # dst, src
SRC_IP = bytes([192, 0, 2, 1])
DST_IP = bytes([192, 0, 2, 2])
WRAP = 14 + 20 + 8 + 8


def inner_tuple(f):
    """The inner 5-tuple (sorted endpoints) of an Ethernet frame, or the frame's first 34 bytes."""
    off, et = 12, None
    if len(f) >= 14:
        et = struct.unpack_from("!H", f, 12)[0]
        off = 14
        while et in (0x8100, 0x88A8) and len(f) >= off + 4:
            et = struct.unpack_from("!H", f, off + 2)[0]
            off += 4
    if et == 0x0800 and len(f) >= off + 20:
        ihl = (f[off] & 15) * 4
        proto = f[off + 9]
        src, dst = f[off + 12 : off + 16], f[off + 16 : off + 20]
        sp = dp = b""
        if proto in (6, 17) and len(f) >= off + ihl + 4:
            sp, dp = f[off + ihl : off + ihl + 2], f[off + ihl + 2 : off + ihl + 4]
    elif et == 0x86DD and len(f) >= off + 40:
        proto = f[off + 6]
        src, dst = f[off + 8 : off + 24], f[off + 24 : off + 40]
        sp = dp = b""
        if proto in (6, 17) and len(f) >= off + 44:
            sp, dp = f[off + 40 : off + 42], f[off + 42 : off + 44]
    else:
        return f[:34]
    a, b = sorted([src + sp, dst + dp])
    return a + b + bytes([proto])


def ip_checksum(h):
    s = sum(struct.unpack("!10H", h))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def wrap(frame, wire_len, vni, ident):
    sport = 49152 + zlib.crc32(inner_tuple(frame)) % 16384
    inner_len = wire_len  # lengths describe the packet on the wire, not the captured part
    udp_len = 8 + 8 + inner_len
    ip_len = 20 + udp_len
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len & 0xFFFF, ident, 0x4000, 64, 17, 0, SRC_IP, DST_IP))
    struct.pack_into("!H", ip, 10, ip_checksum(bytes(ip)))
    udp = struct.pack("!HHHH", sport, 4789, udp_len & 0xFFFF, 0)
    vx = struct.pack("!BBHI", 0x08, 0, 0, vni << 8)
    return OUTER_MAC + b"\x08\x00" + bytes(ip) + udp + vx + frame


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    vni = int(sys.argv[3]) if len(sys.argv) == 4 else 42
    with open(sys.argv[1], "rb") as fin:
        data = fin.read()
    magic = data[:4]
    for end in "<>":
        m = struct.unpack(end + "I", magic)[0]
        if m in (0xA1B2C3D4, 0xA1B23C4D):
            break
    else:
        sys.exit(f"{sys.argv[1]}: not a plain pcap file")
    vmaj, vmin, zone, sigfigs, snaplen, linktype = struct.unpack_from(end + "HHiIII", data, 4)
    if linktype & 0xFFFF != 1:
        sys.exit(f"{sys.argv[1]}: link type {linktype}, not Ethernet")
    rec = struct.Struct(end + "IIII")
    out = [data[:4], struct.pack(end + "HHiIII", vmaj, vmin, zone, sigfigs, snaplen + WRAP, linktype)]
    at, n = 24, 0
    while at + 16 <= len(data):
        sec, frac, caplen, wire_len = rec.unpack_from(data, at)
        frame = data[at + 16 : at + 16 + caplen]
        if len(frame) < caplen:
            break
        w = wrap(frame, wire_len, vni, n & 0xFFFF)
        out.append(rec.pack(sec, frac, len(w), wire_len + WRAP))
        out.append(w)
        at += 16 + caplen
        n += 1
    with open(sys.argv[2], "wb") as fout:
        fout.write(b"".join(out))
    print(f"{n} packets wrapped in VXLAN VNI {vni}", file=sys.stderr)


if __name__ == "__main__":
    main()
