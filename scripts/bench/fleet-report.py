#!/usr/bin/env python3
"""The Markdown body of scripts/bench-fleet.sh's report.

usage: fleet-report.py FACTS CSV

FACTS: key<TAB>value lines the script wrote; CSV: its raw rows (part,name,run,cache,wall_ms,packets,requests,
bytes_fetched,bytes,cpu_ns,objects,detail). Medians over runs with (min–max); each target's verdict is
computed from the same figures the tables show.
"""
import csv
import statistics
import sys

facts = {}
for line in open(sys.argv[1]):
    k, _, v = line.rstrip("\n").partition("\t")
    facts[k] = v
rows = list(csv.DictReader(open(sys.argv[2])))


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def gb(b):
    b = num(b)
    return "-" if b is None else (f"{b / 1e9:.2f} GB" if b >= 1e8 else f"{b / 1e6:.2f} MB")


def ms(v):
    if v is None:
        return "-"
    return f"{v:.0f} ms" if v < 10000 else f"{v / 1000:.1f} s"


def med(vals, fmt=ms):
    v = [x for x in vals if x is not None]
    if not v:
        return None, "-"
    m = statistics.median(v)
    return m, fmt(m) + (f" ({fmt(min(v))}–{fmt(max(v))})" if len(v) > 1 else "")


def sel(part, name=None, cache=None):
    return [r for r in rows if r["part"] == part and (name is None or r["name"] == name)
            and (cache is None or r["cache"] == cache)]


def mark(ok):
    return "-" if ok is None else ("met" if ok else "**missed**")


def i(x):
    x = num(x)
    return "-" if x is None else f"{int(x):,}"


# ---- Set-up ----
st = [num(facts.get(f"store_s{n}_bytes")) for n in (1, 2, 3)]
print(f"- Sensors: three stores of {', '.join(gb(b) for b in st)} of capture files ({gb(sum(b for b in st if b))} in all; "
      f"{facts.get('stores_files')} files with indexes and flow tables, {gb(facts.get('stores_tree_bytes'))}; "
      f"{i(facts.get('stores_packets'))} packets), built in {facts.get('build_seconds')} s")
for n in (1, 2, 3):
    print(f"  - s{n}: {i(facts.get(f'build_s{n}_captured'))} packets captured, drops kernel "
          f"{facts.get(f'build_s{n}_drops.kernel')} storage {facts.get(f'build_s{n}_drops.storage')}, "
          f"{facts.get(f'build_s{n}_chunks')} gen chunks")
print(f"- Traffic per sensor: `{facts.get('synth_cmd')}` ({i(facts.get('synth_packets'))} packets, the same trace for "
      f"the three) replayed with `ringcap replay --topspeed`, then `{facts.get('gen_cmd')}` × chunks (K per chunk) into "
      f"`{facts.get('capture_cmd')}`")
print(f"- Object store: {facts.get('s3proxy')}; archive s3://fleet/site: {gb(facts.get('archive_bytes'))} "
      f"({gb(facts.get('archive_capture_object_bytes'))} of capture objects), first written by `ringcap archive --once` "
      f"in {ms(num(facts.get('archive_first_ms')))}")
print(f"- Queries: host = `{facts.get('expr_host')}` (a gen source host, in all three sensors); conn = "
      f"`{facts.get('expr_conn')}` (the synth trace's TCP connection with the most packets, "
      f"{facts.get('conn_trace_packets')} in the trace, so ×3 over the sensors)")
print()

summ = {}
# ---- 1. Archive ----
if sel("archive"):
    whole = num(facts.get("archive_capture_object_bytes"))
    print("**Queries over the archive** (`ringcap query s3://fleet/site EXPR --endpoint … --explain --json -w /dev/null`; "
          "cold after `drop_caches`, warm repeated at once; median (min–max)). Needed = frames + index chunks the local "
          "query of the same files reads (`--explain`). Whole objects = every capture object, what a reader without an "
          f"index downloads for any query: {gb(whole)}"
          + (f", {ms(num(facts.get('whole_objects_ms')))} to download once with `rclone cat` (cold)." if facts.get("whole_objects_ms") else "."))
    print()
    print("| query | packets | needed (frames + index) | fetched | fetched / needed | fetched / whole objects | requests | cold | warm |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for q in ("host", "conn"):
        a = sel("archive", q)
        if not a:
            continue
        need = (num(facts.get(f"local_{q}_frames")) or 0) + (num(facts.get(f"local_{q}_index")) or 0)
        fetched = statistics.median([num(r["bytes_fetched"]) for r in a if num(r["bytes_fetched"]) is not None] or [0])
        reqs = statistics.median([num(r["requests"]) for r in a if num(r["requests"]) is not None] or [0])
        _, cs = med([num(r["wall_ms"]) for r in a if r["cache"] == "cold"])
        cm, _ = med([num(r["wall_ms"]) for r in a if r["cache"] == "cold"])
        _, ws = med([num(r["wall_ms"]) for r in a if r["cache"] == "warm"])
        ratio = fetched / need if need else None
        summ[f"archive_{q}"] = dict(ratio=ratio, fetched=fetched, need=need, cold=cm)
        print(f"| {q} | {'/'.join(sorted({r['packets'] for r in a}))} (local {facts.get(f'local_{q}_packets')}) | "
              f"{i(need)} B ({i(facts.get(f'local_{q}_frames'))} + {i(facts.get(f'local_{q}_index'))}) | {i(fetched)} B | "
              f"{'-' if ratio is None else f'{ratio:.3f}'} | {'-' if not whole else f'{100 * fetched / whole:.3f} %'} | "
              f"{i(reqs)} | {cs} | {ws} |")
    print()

# ---- 2. Fleet ----
if sel("fleet"):
    print("**Queries over three sensors**: `ringcap query http://…:P1 http://…:P2 http://…:P3 EXPR -w /dev/null --json` "
          "against each sensor's own `curl -X POST --data EXPR http://…:Pi/query` (time_total): alone = one sensor at a "
          "time, the slowest of the three (the issue's baseline); at once = the three curls started together, the "
          "slowest (the same load the fleet query puts on this one machine, where the three sensors share 2 CPUs and "
          "one disk); one-sensor client = `ringcap query http://…:Pi EXPR` of each sensor alone, the slowest (the "
          "client's own cost: process start, connection, pcap written, without the fan-out). Ratio per run, then the "
          "median (min–max).")
    print()
    print("| query | cache | packets | fleet query | slowest sensor alone | fleet / alone | slowest sensor, three at once | fleet / at once | one-sensor client, slowest | fleet / one-sensor client |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for q in ("host", "conn"):
        for cache in ("cold", "warm"):
            f = sel("fleet", q, cache)
            if not f:
                continue
            ra, rc, fl, al, co, on, ro = [], [], [], [], [], [], []
            for r in f:
                fm = num(r["wall_ms"])
                alone = [num(o["wall_ms"]) for o in sel("own", q, cache) if o["run"] == r["run"]]
                conc = [num(o["wall_ms"]) for o in sel("own-concurrent", q, cache) if o["run"] == r["run"]]
                fl.append(fm)
                if alone:
                    al.append(max(alone)); ra.append(fm / max(alone))
                if conc:
                    co.append(max(conc)); rc.append(fm / max(conc))
                one = [num(o["wall_ms"]) for o in sel("one", q, cache) if o["run"] == r["run"]]
                if one:
                    on.append(max(one)); ro.append(fm / max(one))
            x = lambda v: f"{v:.2f}×"
            rm, rs = med(ra, x)
            cm, cs = med(rc, x)
            om, os_ = med(ro, x)
            summ[f"fleet_{q}_{cache}"] = dict(alone=rm, conc=cm, one=om)
            print(f"| {q} | {cache} | {'/'.join(sorted({r['packets'] for r in f}))} | {med(fl)[1]} | {med(al)[1]} | {rs} | "
                  f"{med(co)[1]} | {cs} | {med(on)[1]} | {os_} |")
    print()

# ---- 3. Upload ----
if sel("upload"):
    ub = num(facts.get("stores_tree_bytes"))
    print(f"**Upload** of the same {facts.get('upload_files')} files ({gb(ub)}: captures, indexes, flow tables) into a "
          "fresh bucket per run, interleaved rounds (order rotated), cold source (`drop_caches` before each), uploader "
          "pinned to CPU1 and s3proxy to CPU0, rclone and curl under `nice -n 10 ionice -c2 -n7` (ringcap archive "
          f"sets that itself). {facts.get('rclone_version', '')}. CPU = utime + stime of the uploader and its children "
          "(wait4).")
    print()
    print("| uploader | runs | throughput | CPU per GB | objects |")
    print("|---|---:|---:|---:|---:|")
    desc = {"ringcap": "`ringcap archive sN --once`, N = 1..3 in turn (16 MiB parts, 4 in flight)",
            "rclone": "`rclone copy` defaults (--transfers 4, --s3-upload-concurrency 4, 5 MiB chunks)",
            "rclone-1": "`rclone copy --transfers 1 --s3-upload-concurrency 1 --s3-chunk-size 16M`",
            "curl": "`curl -T FILE` per file, one PUT each (the floor: a trivial uploader)"}
    up = {}
    for t in ("ringcap", "rclone", "rclone-1", "curl"):
        u = sel("upload", t)
        if not u:
            continue
        mbps = [num(r["bytes"]) / num(r["wall_ms"]) / 1e3 for r in u]
        cpg = [num(r["cpu_ns"]) / 1e9 / (num(r["bytes"]) / 1e9) for r in u]
        tm, ts = med(mbps, lambda v: f"{v:.0f} MB/s")
        cm, cs = med(cpg, lambda v: f"{v:.2f} s")
        up[t] = (tm, cm)
        print(f"| {desc[t]} | {len(u)} | {ts} | {cs} | {'/'.join(sorted({r['objects'] for r in u}))} |")
    summ["upload"] = up
    print()

# ---- 4. Loss ----
if sel("loss"):
    print(f"**Capture loss**, archiving off vs on (interleaved rounds, same gen traffic at top speed): "
          f"`{facts.get('loss_gen_cmd')}` (CPU0, with s3proxy) into `{facts.get('loss_capture_cmd')}` (CPU1); on: "
          "`ringcap archive DIR --to s3://… --watch --interval 2` beside it (unpinned; it runs at SCHED_IDLE while "
          f"the capture writes); s3proxy's data on {facts.get('loss_s3_dir', '?')}.")
    print()
    print("| mode | round | offered | offered rate | captured | kernel drops | storage drops | loss | files | archived during the capture | archive's exit after SIGINT |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    lo = {"on": [], "off": []}
    for r in sel("loss"):
        off, cap = num(r["bytes"]), num(r["packets"])
        d = dict(kv.split("=", 1) for kv in r["detail"].split(";") if "=" in kv)
        drops = sum(num(d.get(k)) or 0 for k in ("kernel", "storage"))
        lost = (1 - cap / off) if off and cap is not None else None
        lo[r["name"]].append((lost, drops))
        rate = f"{off / (num(r['wall_ms']) / 1e3) / 1e3:.0f} kpps" if off and num(r["wall_ms"]) else "-"
        print(f"| {r['name']} | {r['run']} | {i(off)} | {rate} | {i(cap)} | {d.get('kernel')} | {d.get('storage')} | "
              f"{'-' if lost is None else f'{100 * lost:.3f} %'} | {r['objects']} | {d.get('archived')} | {d.get('archive_exit_s', '-')}{'' if d.get('archive_exit_s', '-') == '-' else ' s'} |")
    summ["loss"] = lo
    print()

# ---- Targets ----
print("| target | measured | |")
print("|---|---|---|")
c = summ.get("archive_conn")
if c and c["ratio"] is not None:
    print(f"| one-connection query over the archive fetches ≤ 2 × the frames + index chunks it needs | "
          f"{c['ratio']:.3f} × ({i(c['fetched'])} B fetched for {i(c['need'])} B needed) | {mark(c['ratio'] <= 2)} |")
for cache in ("cold", "warm"):
    for q in ("host", "conn"):
        f = summ.get(f"fleet_{q}_{cache}")
        if f and f["alone"] is not None:
            extra = f"; against the three at once {f['conc']:.2f} ×" if f["conc"] is not None else ""
            extra += f"; against ringcap query of one sensor {f['one']:.2f} ×" if f.get("one") is not None else ""
            print(f"| a query over three sensors ≤ 1.2 × the slowest sensor's own ({q}, {cache}) | {f['alone']:.2f} × "
                  f"(median){extra} | {mark(f['alone'] <= 1.2)} |")
up = summ.get("upload", {})
if "ringcap" in up:
    for peer in ("rclone", "rclone-1"):
        if peer in up:
            (rt, rcpu), (pt, pcpu) = up["ringcap"], up[peer]
            print(f"| upload at ≥ {peer}'s throughput for ≤ its CPU | {rt:.0f} vs {pt:.0f} MB/s ({rt / pt:.2f} ×), "
                  f"{rcpu:.2f} vs {pcpu:.2f} s CPU per GB ({rcpu / pcpu:.2f} ×) | "
                  f"{mark(rt >= pt and rcpu <= pcpu)}{'' if rt >= pt else ' (throughput)'}{'' if rcpu <= pcpu else ' (CPU)'} |")
lo = summ.get("loss")
if lo:
    on = [x for x in lo["on"] if x[0] is not None]
    off = [x for x in lo["off"] if x[0] is not None]
    don = sum(d for _, d in on)
    print(f"| 0 capture loss with archiving on | on: {int(don)} drops, loss {', '.join(f'{100 * l:.3f} %' for l, _ in on)}; "
          f"off: {int(sum(d for _, d in off))} drops, loss {', '.join(f'{100 * l:.3f} %' for l, _ in off)} | "
          f"{mark(don == 0 and all(l <= 0 for l, _ in on))} |")
