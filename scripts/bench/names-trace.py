#!/usr/bin/env python3
"""A trace dense in names, for the indexer's cost of reading them (BENCHMARKS.md, "Names per flow").

Usage: names-trace.py OUT.pcap [CONVERSATIONS]

Each conversation (a new client address and ports each time) is 12 IPv4 packets:
- DNS over UDP 53: a real query and its answer (crates/wire/testdata/dns-latest-frame10{5,8}: 4 answers);
- TLS over TCP 443: SYN, SYN-ACK, ACK, openssl s_client's ClientHello, a ServerHello-like record, ACK;
- HTTP over TCP 8000: curl's request and a response;
- QUIC to UDP 443: Chrome's client Initial (decrypted by the indexer) and a server long-header packet
  (which fails to decrypt with the client's keys, as a real server Initial does).
So 6 of 12 packets go to a parser: the worst case, far from ordinary traffic. Written as pcap-ns,
native byte order, as ringcap writes (indexer_cost reads that).
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "crates", "wire", "testdata")


def read(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


DNS_Q = read("dns-latest-frame105-query.bin")
DNS_A = read("dns-latest-frame108.bin")
HELLO = read("openssl-s_client-tls13.bin")
HTTP = read("curl-http11.bin")
QUIC = read("ja4-tls-sni-frame2-quic-initial.bin")
SERVER_HELLO = b"\x16\x03\x03\x00\x5a\x02\x00\x00\x56" + bytes(86)
HTTP_OK = b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nhello\n"
QUIC_SERVER = b"\xc0\x00\x00\x00\x01\x08" + bytes(8) + b"\x00\x00\x44\x00" + bytes(1100)


def frame(src, dst, proto, sp, dp, payload, flags=0x18):
    if proto == 17:
        l4 = struct.pack(">HHHH", sp, dp, 8 + len(payload), 0) + payload
    else:
        l4 = struct.pack(">HHIIBBHHH", sp, dp, 1, 1, 0x50, flags, 65535, 0, 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0x4000, 64, proto, 0, src, dst)
    eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
    return eth + ip + l4


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    server = bytes([10, 2, 0, 1])
    ts = 1_700_000_000 * 10**9
    with open(out, "wb") as f:
        f.write(struct.pack("=IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for i in range(n):
            client = bytes([10, 1, (i >> 8) & 0xFF, i & 0xFF])
            p = 1024 + i % 60000
            pkts = [
                frame(client, server, 17, p, 53, DNS_Q),
                frame(server, client, 17, 53, p, DNS_A),
                frame(client, server, 6, p, 443, b"", 0x02),
                frame(server, client, 6, 443, p, b"", 0x12),
                frame(client, server, 6, p, 443, b"", 0x10),
                frame(client, server, 6, p, 443, HELLO),
                frame(server, client, 6, 443, p, SERVER_HELLO),
                frame(client, server, 6, p, 443, b"", 0x10),
                frame(client, server, 6, p + 1, 8000, HTTP),
                frame(server, client, 6, 8000, p + 1, HTTP_OK),
                frame(client, server, 17, p + 2, 443, QUIC),
                frame(server, client, 17, 443, p + 2, QUIC_SERVER),
            ]
            for d in pkts:
                ts += 10_000
                f.write(struct.pack("=IIII", ts // 10**9, ts % 10**9, len(d), len(d)))
                f.write(d)


if __name__ == "__main__":
    main()
