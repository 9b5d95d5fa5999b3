#!/usr/bin/env python3
"""Random O_DIRECT reads over a store's files: what the disk serves to a query that reads
scattered frames (one-host queries read one compressed frame per packet found).

Usage: random-reads.py 'GLOB' THREADS READS_PER_THREAD BLOCK_BYTES
Prints reads per second and MB/s. O_DIRECT bypasses this machine's page cache, not the
hypervisor's: interleave with other runs and quote the spread.
"""
import glob
import mmap
import os
import random
import sys
import threading
import time

pattern, threads, per_thread, block = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
files = sorted(glob.glob(pattern))
fds = [os.open(f, os.O_RDONLY | os.O_DIRECT) for f in files]
sizes = [os.fstat(fd).st_size for fd in fds]


def work(seed):
    r = random.Random(seed)
    buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT needs
    for _ in range(per_thread):
        i = r.randrange(len(fds))
        off = r.randrange(0, sizes[i] - block) & ~4095
        os.preadv(fds[i], [buf], off)


t0 = time.time()
ts = [threading.Thread(target=work, args=(s,)) for s in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
dt = time.time() - t0
n = threads * per_thread
print(f"threads {threads}, block {block}: {n / dt:.0f} reads/s, {n * block / dt / 1e6:.0f} MB/s")
