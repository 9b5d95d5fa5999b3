#!/usr/bin/env python3
"""Receive-side rate measurement from an interface's rx_packets/rx_bytes counters.

usage: rxsample.py record IFACE OUT [INTERVAL_S]   # run inside the receiver's netns; stop with SIGTERM/SIGINT
       rxsample.py steady OUT                      # -> packets bytes pps mean_frame seconds
       rxsample.py windows OUT RATE N [SKIP_S]     # -> one line per 1 s window: k packets seconds pps error_pct

record writes "t_ns packets bytes" lines (CLOCK_MONOTONIC), one sample every INTERVAL_S (default 0.01) on
absolute deadlines, each timestamp taken right after the read, so a window's length is known exactly.
steady: rate over the middle 90 % of the packets (from the 5 % to the 95 % crossing, interpolated between
samples), which leaves out the sender's start-up and exit. windows: N windows of 1 s starting SKIP_S
(default 1) after the first packet; each window runs from the first sample at or after its start to the first
at or after its end, and error_pct compares its rate with RATE.
"""
import signal
import sys
import time


def record(iface, out, interval):
    base = f"/sys/class/net/{iface}/statistics/"
    fp = open(base + "rx_packets", "rb", buffering=0)
    fb = open(base + "rx_bytes", "rb", buffering=0)
    samples = []
    stop = False

    def on_signal(_s, _f):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    step = int(interval * 1e9)
    deadline = time.monotonic_ns()
    while not stop:
        p = int(fp.read(64) or 0)   # sysfs attributes are re-read from offset 0
        t = time.monotonic_ns()     # right after the packet count: the windows are timed by packets
        b = int(fb.read(64) or 0)
        fp.seek(0)
        fb.seek(0)
        samples.append((t, p, b))
        deadline += step
        delay = deadline - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        else:
            deadline = time.monotonic_ns()   # fell behind (noisy machine): don't burst to catch up
    with open(out, "w") as f:
        f.writelines(f"{t} {p} {b}\n" for t, p, b in samples)


def load(path):
    rows = [tuple(int(x) for x in line.split()) for line in open(path) if line.strip()]
    if len(rows) < 3:
        sys.exit(f"rxsample.py: {path} has {len(rows)} samples; the recorder did not run long enough")
    return rows


def crossing(rows, target):
    """Interpolated time (ns) at which the packet counter reaches target."""
    if target <= rows[0][1]:
        return rows[0][0]
    for (t0, p0, _), (t1, p1, _) in zip(rows, rows[1:]):
        if p0 < target <= p1:
            return t0 + (t1 - t0) * (target - p0) / (p1 - p0)
    return rows[-1][0]


def steady(path):
    rows = load(path)
    p_first, b_first = rows[0][1], rows[0][2]
    packets, nbytes = rows[-1][1] - p_first, rows[-1][2] - b_first
    if packets <= 0:
        print("0 0 0 0 0")
        return
    lo, hi = p_first + 0.05 * packets, p_first + 0.95 * packets
    seconds = (crossing(rows, hi) - crossing(rows, lo)) / 1e9
    pps = 0.9 * packets / seconds if seconds > 0 else 0
    print(f"{packets} {nbytes} {pps:.0f} {nbytes / packets:.2f} {seconds:.6f}")


def windows(path, rate, n, skip):
    rows = load(path)
    p_first = rows[0][1]
    start = next((t for t, p, _ in rows if p > p_first), None)
    if start is None:
        sys.exit("rxsample.py: no packet arrived")
    last_change = max(t for (t, p, _), (_, p_prev, _) in zip(rows[1:], rows) if p != p_prev)

    def at(t):
        return next(((ts, p) for ts, p, _ in rows if ts >= t), None)

    for k in range(n):
        a, b = at(start + (skip + k) * 1e9), at(start + (skip + k + 1) * 1e9)
        if a is None or b is None or b[0] > last_change:
            sys.exit(f"rxsample.py: traffic stopped before window {k + 1} of {n} ended; send for longer")
        secs = (b[0] - a[0]) / 1e9
        pps = (b[1] - a[1]) / secs
        print(f"{k + 1} {b[1] - a[1]} {secs:.6f} {pps:.1f} {100 * (pps / rate - 1):.4f}")


def main():
    args = sys.argv[1:]
    if args[:1] == ["record"] and len(args) in (3, 4):
        record(args[1], args[2], float(args[3]) if len(args) == 4 else 0.01)
    elif args[:1] == ["steady"] and len(args) == 2:
        steady(args[1])
    elif args[:1] == ["windows"] and len(args) in (4, 5):
        windows(args[1], float(args[2]), int(args[3]), float(args[4]) if len(args) == 5 else 1.0)
    else:
        print("\n".join(__doc__.strip().splitlines()[2:5]), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
