#!/usr/bin/env python3
# usage: scripts/bench/flow-positions.py CAPTURE_FILE  (its .idx and .flows.parquet next to it; needs pyarrow and zstd)
# Size of the flow table with each flow's positions (the index's postings: frame numbers in a compressed file)
# as a list<uint32> column: parses FILE.idx (docs/index.md layout v2), adds the column, rewrites with zstd 1.
import struct, subprocess, sys, os
import pyarrow as pa, pyarrow.parquet as pq
cap = sys.argv[1]
raw = open(cap + ".idx", "rb").read()
h = raw[12:12 + 116]
postings_len, frames, flows, addrs, prelude_len = struct.unpack_from("<QIIII", h, 48)
body = subprocess.run(["zstd", "-dcq"], input=raw[128:-8], capture_output=True, check=True).stdout
at = (prelude_len + 7) // 8 * 8 + 64 * frames + 16 * addrs
rows = [struct.unpack_from("<IIHHBBHIQ", body, at + 28 * i) for i in range(flows)]
post = body[at + 28 * flows + 4 * flows:]
lists = []
for r in rows:
    n, off, v, prev, out = r[7], r[8], 0, 0, []
    p = off
    while len(out) < n:
        shift = 0; v = 0
        while True:
            b = post[p]; p += 1; v |= (b & 0x7f) << shift; shift += 7
            if b < 0x80: break
        prev += v; out.append(prev)
    lists.append(out)
t = pq.read_table(cap + ".flows.parquet")
lists = [l for l in lists if l]  # the table leaves out flows without packets
assert len(lists) == t.num_rows, (len(lists), t.num_rows)
def size(tab):
    pq.write_table(tab, "/tmp/flows11-pos.parquet", compression="zstd", compression_level=1, use_dictionary=["file", "vlan"])
    return os.path.getsize("/tmp/flows11-pos.parquet")
base = size(t)
with_pos = size(t.append_column("frames", pa.array(lists, type=pa.list_(pa.uint32()))))
print(f"{cap}: {t.num_rows} flows, postings {postings_len} B raw; table {base} B, with frames list {with_pos} B "
      f"(+{100 * (with_pos - base) / base:.0f} %), capture {os.path.getsize(cap)} B")
