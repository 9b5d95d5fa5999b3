#!/usr/bin/env python3
"""Inter-arrival statistics and packet-size fidelity of a capture.

usage: pcapstats.py CAPTURE.pcap [MODEL] [HIST_OUT]
prints: packets mean_gap_s stddev_gap_s cv tv tv_noise

CAPTURE is classic pcap (µs or ns timestamps, either byte order; capture with a snaplen ≥ 64). Sizes are IP
packet lengths as the generator's model counts them: the IPv4 total length or 40 + the IPv6 payload length,
after any VLAN tags; other frames count as their wire length − 14. MODEL is a "<size> <count>" file (the
`ringcap dist -O dist` format; '#' comments, blank lines, and ',' ';' or tab separators allowed). tv is the
total-variation distance ½ Σ |p_capture − p_model| ("-" without a model) and tv_noise the value a perfect
sender would still show from sampling alone, ≈ Σ √(p(1−p) / (2πn)). HIST_OUT receives the capture's own
"<size> <count>" histogram.
"""
import math
import re
import struct
import sys
from collections import Counter

MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
         b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}


def ip_size(frame, orig_len):
    off = 12
    etype = int.from_bytes(frame[off:off + 2], "big")
    while etype in (0x8100, 0x88A8) and len(frame) >= off + 6:
        off += 4
        etype = int.from_bytes(frame[off:off + 2], "big")
    ip = off + 2
    if etype == 0x0800 and len(frame) >= ip + 4:
        return int.from_bytes(frame[ip + 2:ip + 4], "big")
    if etype == 0x86DD and len(frame) >= ip + 6:
        return 40 + int.from_bytes(frame[ip + 4:ip + 6], "big")
    return orig_len - 14


def read_pcap(path):
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24 or head[:4] not in MAGIC:
            sys.exit(f"pcapstats.py: {path} is not a classic pcap file (pcapng: convert with editcap -F pcap)")
        order, unit = MAGIC[head[:4]]
        rec = struct.Struct(order + "IIII")
        data = f.read()
    pos, times, sizes = 0, [], Counter()
    while pos + 16 <= len(data):
        sec, frac, incl, orig = rec.unpack_from(data, pos)
        pos += 16
        if pos + incl > len(data):
            break   # truncated last record (capture stopped mid-write): ignore it
        times.append(sec + frac * unit)
        sizes[ip_size(data[pos:pos + 64], orig)] += 1
        pos += incl
    return times, sizes


def read_model(path):
    model = Counter()
    for n, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [p for p in re.split(r"[\s,;]+", line) if p]
        if len(parts) != 2 or not all(re.fullmatch(r"\d+(\.\d+)?", p) for p in parts):
            sys.exit(f"pcapstats.py: {path} line {n}: expected '<size> <count>', got {line!r}")
        model[int(parts[0])] += float(parts[1])
    if not model:
        sys.exit(f"pcapstats.py: {path} has no '<size> <count>' line")
    return model


def main():
    if len(sys.argv) not in (2, 3, 4):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    times, sizes = read_pcap(sys.argv[1])
    if len(times) < 3:
        sys.exit(f"pcapstats.py: {sys.argv[1]} has {len(times)} packets; need at least 3")
    gaps = [b - a for a, b in zip(times, times[1:])]
    mean = sum(gaps) / len(gaps)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1))
    tv = noise = "-"
    if len(sys.argv) >= 3:
        model = read_model(sys.argv[2])
        mt, n = sum(model.values()), len(times)
        q = {s: c / mt for s, c in model.items()}
        p = {s: c / n for s, c in sizes.items()}
        tv = f"{0.5 * sum(abs(p.get(s, 0) - q.get(s, 0)) for s in set(p) | set(q)):.5f}"
        noise = f"{sum(math.sqrt(x * (1 - x) / (2 * math.pi * n)) for x in q.values()):.5f}"
    if len(sys.argv) == 4:
        with open(sys.argv[3], "w") as f:
            f.writelines(f"{s} {c}\n" for s, c in sorted(sizes.items()))
    print(f"{len(times)} {mean:.9f} {sd:.9f} {sd / mean if mean > 0 else 0:.4f} {tv} {noise}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
