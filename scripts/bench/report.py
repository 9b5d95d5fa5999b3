#!/usr/bin/env python3
"""Markdown summaries of the benchmark CSVs (for BENCHMARKS.md).

usage: report.py capture CSV    # rows of scripts/bench-capture.sh
       report.py gen CSV        # rows of scripts/bench-gen.sh
       report.py xdp CSV        # capture rows of scripts/bench-xdp.sh (bench-capture's columns)
       report.py xdp-filter CSV # the filter rows of scripts/bench-xdp.sh (PARTS=filter)
       report.py everything CSV # rows of scripts/bench-everything.sh (issue 37 item 3)
Medians with min…max over runs; failed runs are counted, never averaged in.
"""
import csv
import statistics
import sys
from collections import OrderedDict


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def spread(values, fmt):
    """'median (min…max)' of the values, formatted with fmt; '–' when empty."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    med = fmt(statistics.median(values))
    if len(values) == 1:
        return med
    return f"{med} ({fmt(min(values))}…{fmt(max(values))})"


def pct(x):
    return f"{100 * x:.2f} %"


def grouped(rows, keys):
    groups = OrderedDict()
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    return groups


def median_of(rows, field):
    vals = [num(r[field]) for r in rows if num(r[field]) is not None]
    return statistics.median(vals) if vals else None


# ---- capture ---------------------------------------------------------------------------------------------------
def capture(path):
    rows = list(csv.DictReader(open(path)))
    print("| mode | sink | tool | runs | offered pps | CPU ns/pkt | ns/pkt excl. set-up | capture rate "
          "| loss (median, max) | drops reported (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    groups = grouped(rows, ["mode", "sink", "tool"])
    for (mode, sink, tool), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        failed = len(rs) - len(ok)
        runs = f"{len(ok)}" + (f" (+{failed} failed)" if failed else "")
        losses = [int(r["offered"]) - int(r["captured"]) for r in ok if r["captured"].isdigit()]
        loss = f"{statistics.median(losses):.0f}, {max(losses)}" if losses else "–"
        drops = [num(r["drops"]) for r in ok]
        drops_s = f"{statistics.median([d for d in drops if d is not None]):.0f}" if any(
            d is not None for d in drops) else "–"
        print(f"| {mode} | {'/dev/null' if sink == 'null' else 'disk'} | {tool} | {runs} "
              f"| {spread([num(r['offered_pps']) for r in ok], lambda v: f'{v / 1e6:.2f} M')} "
              f"| {spread([num(r['ns_per_pkt']) for r in ok], lambda v: f'{v:.0f}')} "
              f"| {spread([num(r['run_ns_per_pkt']) for r in ok], lambda v: f'{v:.0f}')} "
              f"| {spread([num(r['capture_rate']) for r in ok], pct)} | {loss} | {drops_s} |")
    print()
    dropped = [r for r in rows if r["status"] == "ok" and (num(r["drops"]) or 0) > 0]
    if dropped:
        print("Drops by stage as the tools report them (runs with drops):")
        print()
        for r in dropped:
            print(f"- {r['tool']}, {r['sink']}, {r['mode']}, run {r['run']}: {r['drop_detail']}")
        print()
    print("Targets of issue 2 (dual mode, medians; ratio = ringcap ring / tcpdump):")
    print()
    ok = [r for r in rows if r["status"] == "ok" and r["mode"] == "dual"]
    for sink, target, label in (("disk", 1 / 3, "to the real disk"), ("null", 0.6, "to /dev/null")):
        ring = [r for r in ok if r["sink"] == sink and r["tool"] == "ringcap-ring"]
        tcpd = [r for r in ok if r["sink"] == sink and r["tool"] == "tcpdump"]
        if not ring or not tcpd:
            missing = "ringcap ring" if not ring else "tcpdump"
            print(f"- {label}: not measured ({missing} has no successful run)")
            continue
        parts = []
        for field, name in (("ns_per_pkt", "total CPU"), ("run_ns_per_pkt", "excl. set-up")):
            a, b = median_of(ring, field), median_of(tcpd, field)
            if a is None or not b:
                continue
            verdict = "met" if a / b <= target else "NOT met"
            parts.append(f"{name} {a:.0f} vs {b:.0f} ns/pkt = {a / b:.2f} × ({verdict})")
        print(f"- {label} (target ≤ {target:.2f} ×): " + "; ".join(parts))
    ring = [r for r in ok if r["tool"] == "ringcap-ring"]
    if ring:
        lost = sum(int(r["offered"]) - int(r["captured"]) for r in ring if r["captured"].isdigit())
        print(f"- ringcap ring loss over all dual-mode runs (target 0): {lost} packets "
              f"({'met' if lost == 0 else 'NOT met'})")
    else:
        print("- ringcap ring loss: not measured")


# ---- xdp filter (issue 15) ------------------------------------------------------------------------------------
def xdp_filter(path):
    rows = list(csv.DictReader(open(path)))
    print("| tool | runs | offered pps | kept (median; 1 % of offered) | drops reported | capturer CPU ns/pkt offered "
          "| system CPU ns/pkt offered (both CPUs) | net of background | background busy % |")
    print("|---|---|---|---|---|---|---|---|---|")
    med = {}
    for (tool,), rs in grouped(rows, ["tool"]).items():
        good = [r for r in rs if r["status"] == "ok"]
        failed = len(rs) - len(good)
        kept = [int(r["captured"]) for r in good if r["captured"].isdigit()]
        share = [int(r["offered"]) / 100 for r in good]
        med[tool] = (median_of(good, "sys_ns_per_pkt"), median_of(good, "sys_net_ns_per_pkt"), median_of(good, "ns_per_pkt"))
        print(f"| {tool} | {len(good)}{f' (+{failed} failed)' if failed else ''} "
              f"| {spread([num(r['offered_pps']) for r in good], lambda v: f'{v / 1e6:.3f} M')} "
              f"| {f'{statistics.median(kept):.0f}; {statistics.median(share):.0f}' if kept else '–'} "
              f"| {spread([num(r['drops']) for r in good], lambda v: f'{v:.0f}')} "
              f"| {spread([num(r['ns_per_pkt']) for r in good], lambda v: f'{v:.1f}')} "
              f"| {spread([num(r['sys_ns_per_pkt']) for r in good], lambda v: f'{v:.0f}')} "
              f"| {spread([num(r['sys_net_ns_per_pkt']) for r in good], lambda v: f'{v:.0f}')} "
              f"| {spread([num(r['bg_busy_pct']) for r in good], lambda v: f'{v:.0f}')} |")
    print()
    pre, user, tcpd = med.get("ringcap-xdp-pre"), med.get("ringcap-xdp-user"), med.get("tcpdump-filter")
    for other, name in ((user, "user space only"), (tcpd, "tcpdump")):
        if pre and other and pre[0] and other[0]:
            print(f"- prefilter / {name} (medians): system CPU {pre[0]:.0f} / {other[0]:.0f} ns = {pre[0] / other[0]:.2f} ×; "
                  f"capturer CPU {pre[2]:.1f} / {other[2]:.1f} ns = {pre[2] / other[2]:.2f} ×")
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        print(f"- {len(failed)} run(s) failed: " + "; ".join(f"{r['tool']} run {r['run']}: {r['status']}" for r in failed))


# ---- xdp (issue 15) -------------------------------------------------------------------------------------------
def xdp(path):
    rows = list(csv.DictReader(open(path)))
    ok = [r for r in rows if r["status"] == "ok"]
    ceil_rows = [r for r in ok if r["tool"] == "xdp-drop"]
    ceiling = median_of(ceil_rows, "offered_pps")
    print("| sink | tool | runs | offered pps | lost (median, max) | capturer CPU ns/pkt | excl. set-up "
          "| system CPU ns/pkt (both CPUs, softirq incl.) | net of background | system CPU at set-up (ms) "
          "| background busy % "
          "| loss-free rate / XDP drop rate |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    med = {}
    for (sink, tool), rs in grouped(rows, ["sink", "tool"]).items():
        good = [r for r in rs if r["status"] == "ok"]
        failed = len(rs) - len(good)
        lost = [int(r["offered"]) - int(r["captured"]) for r in good if r["captured"].isdigit()]
        pps = [num(r["offered_pps"]) for r in good]
        share = "–"
        if ceiling and lost and pps:
            if max(lost) == 0:   # never lost at the sender's top speed: the loss-free rate is at least that
                share = f"≥ {100 * statistics.median(pps) / ceiling:.0f} %"
            else:                # lost: its loss-free rate is below what it delivered
                got = [num(r["capture_rate"]) * num(r["offered_pps"]) for r in good if num(r["capture_rate"]) is not None]
                share = f"< {100 * statistics.median(got) / ceiling:.0f} % (loses)"
        if tool == "xdp-drop":
            share = "100 % (the ceiling)"
        med[(sink, tool)] = (lost, median_of(good, "sys_ns_per_pkt"), median_of(good, "sys_net_ns_per_pkt"))
        print(f"| {'/dev/null' if sink == 'null' else 'disk'} | {tool} | {len(good)}"
              f"{f' (+{failed} failed)' if failed else ''} | {spread(pps, lambda v: f'{v / 1e6:.3f} M')} "
              f"| {f'{statistics.median(lost):.0f}, {max(lost)}' if lost else '–'} "
              f"| {spread([num(r['ns_per_pkt']) for r in good], lambda v: f'{v:.0f}')} "
              f"| {spread([num(r['run_ns_per_pkt']) for r in good], lambda v: f'{v:.0f}')} "
              f"| {spread([num(r['sys_ns_per_pkt']) for r in good], lambda v: f'{v:.0f}')} "
              f"| {spread([num(r['sys_net_ns_per_pkt']) for r in good], lambda v: f'{v:.0f}')} "
              f"| {spread([num(r['sys_setup_ns']) / 1e6 for r in good if num(r['sys_setup_ns']) is not None], lambda v: f'{v:.0f}')} "
              f"| {spread([num(r['bg_busy_pct']) for r in good], lambda v: f'{v:.0f}')} | {share} |")
    print()
    print(f"XDP drop rate (the ceiling, median): {ceiling / 1e6:.3f} Mpps" if ceiling else "XDP drop rate: not measured")
    print()
    print("Target: ringcap xdp loses nothing and costs less system CPU per packet than ringcap ring (medians):")
    print()
    for sink in ("null", "disk"):
        x, g = med.get((sink, "ringcap-xdp")), med.get((sink, "ringcap-ring"))
        if not x or not g or x[1] is None or not g[1]:
            print(f"- {sink}: not measured")
            continue
        lossless = bool(x[0]) and max(x[0]) == 0
        verdict = lambda cheaper: "met" if lossless and cheaper else "NOT met"
        print(f"- {'/dev/null' if sink == 'null' else 'disk'}: xdp lost {sum(x[0])} packets over {len(x[0])} runs, "
              f"system CPU {x[1]:.0f} vs ring {g[1]:.0f} ns/pkt = {x[1] / g[1]:.2f} ×, net of background "
              f"{x[2]:.0f} vs {g[2]:.0f} (raw: {verdict(x[1] < g[1])}; net of background: "
              f"{verdict(x[2] is not None and g[2] is not None and x[2] < g[2])})")
    print()
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        print(f"{len(failed)} run(s) failed: " + "; ".join(f"{r['tool']} {r['sink']} run {r['run']}: {r['status']}"
                                                       for r in failed))
        print()


# ---- gen -------------------------------------------------------------------------------------------------------
def gen(path):
    rows = list(csv.DictReader(open(path)))
    ok = [r for r in rows if r["status"] == "ok"]
    failed = [r for r in rows if r["status"] != "ok"]

    maxrows = [r for r in ok if r["test"] in ("max", "dist")]
    if maxrows:
        print("Maximum rate (packets counted at the receiving veth, middle 90 % of each run):")
        print()
        print("| test | sender | sizes (IP bytes) | runs | pps | mean frame (bytes) | Mb/s (frames) "
              "| CPU0 ns/pkt (sender + softirqs) | received / sent (lowest) |")
        print("|---|---|---|---|---|---|---|---|---|")
        groups = grouped(maxrows, ["test", "sender", "dist"])
        for (test, sender, dist), rs in groups.items():
            pps = [num(r["pps"]) for r in rs]
            mbps = [num(r["pps"]) * num(r["mean_frame"]) * 8 / 1e6 for r in rs
                    if num(r["pps"]) is not None and num(r["mean_frame"]) is not None]
            label = "60-byte frames" if test == "max" else "size mix"
            worst = min(rs, key=lambda r: (num(r["packets"]) or 0) / (num(r["count"]) or 1))
            print(f"| {label} | {sender} | {dist} | {len(rs)} | {spread(pps, lambda v: f'{v / 1e6:.3f} M')} "
                  f"| {spread([num(r['mean_frame']) for r in rs], lambda v: f'{v:.1f}')} "
                  f"| {spread(mbps, lambda v: f'{v:.0f}')} "
                  f"| {spread([num(r.get('cpu0_ns_per_pkt') or '') for r in rs], lambda v: f'{v:.0f}')} "
                  f"| {worst['packets']} / {worst['count']} |")
        print()
        by = {k: median_of(v, "pps") for k, v in groups.items()}
        rc = by.get(("max", "ringcap", "fixed:46"))
        tg = by.get(("max", "trafgen", "fixed:46"))
        if rc and tg:
            print(f"- 60-byte frames, ringcap gen / trafgen = {rc / tg:.2f} × (target ≥ 1.20: "
                  f"{'met' if rc / tg >= 1.2 else 'NOT met'})")
        elif ("max", "ringcap", "fixed:46") in groups:
            print("- ringcap gen / trafgen: not measured")
        for backend in ("xdp", "xdp-live"):   # issue 15
            xdp = by.get(("max", f"ringcap-{backend}", "fixed:46"))
            if not xdp:
                continue
            for other in ("trafgen", "ringcap-sendmmsg", "ringcap", "ringcap-xdp"):
                o = by.get(("max", other, "fixed:46"))
                if o and other != f"ringcap-{backend}":
                    goal = f" (target ≥ 1.50: {'met' if xdp / o >= 1.5 else 'NOT met'})" if other == "trafgen" else ""
                    print(f"- 60-byte frames, ringcap gen --backend {backend} / {other} = {xdp / o:.2f} ×{goal}")
        d = by.get(("dist", "ringcap", "default"))
        same = [(k[2], v) for k, v in by.items() if k[0] == "dist" and k[2] != "default"]
        if d and same and same[0][1]:
            name, s_pps = same[0]
            print(f"- default distribution vs {name} (same mean frame size): {d / s_pps:.3f} × "
                  f"(target within 10 %: {'met' if abs(d / s_pps - 1) <= 0.10 else 'NOT met'})")
        print()

    raterows = [r for r in ok if r["test"] == "rate"]
    if raterows:
        print("Rate accuracy (1 s windows at the receiving veth; error = achieved / requested − 1):")
        print()
        print("| sender | requested pps | windows | achieved pps (median, min…max) | error over all windows "
              "| worst window error | within 1 % |")
        print("|---|---|---|---|---|---|---|")
        for (sender, req), rs in grouped(raterows, ["sender", "requested_pps"]).items():
            errs = [num(r["error_pct"]) for r in rs if num(r["error_pct"]) is not None]
            worst = max(errs, key=abs) if errs else None
            secs = sum(num(r["seconds"]) or 0 for r in rs)
            overall = 100 * (sum(num(r["packets"]) or 0 for r in rs) / secs / float(req) - 1) if secs else None
            print(f"| {sender} | {float(req):.0f} | {len(rs)} "
                  f"| {spread([num(r['pps']) for r in rs], lambda v: f'{v:.0f}')} "
                  f"| {'–' if overall is None else f'{overall:+.3f} %'} "
                  f"| {'–' if worst is None else f'{worst:+.3f} %'} "
                  f"| {'–' if worst is None else ('yes' if abs(worst) <= 1 else 'NO')} |")
        print()

    fid = [r for r in ok if r["test"] == "fidelity"]
    if fid:
        print("Receiver-side inter-arrival and size fidelity (the packets captured at the receiver):")
        print()
        print("| sender | sizes (IP bytes) | requested pps | packets captured | inter-arrival mean (µs) | CV "
              "| TV distance to model |")
        print("|---|---|---|---|---|---|---|")
        for r in fid:
            tv = num(r["tv"])
            if tv is None:
                tv_s = "– (no model)"
            elif r["sender"] == "ringcap":
                tv_s = f"{tv:.4f} (target ≤ 0.01: {'met' if tv <= 0.01 else 'NOT met'})"
            else:
                tv_s = f"{tv:.4f}"
            print(f"| {r['sender']} | {r['dist']} | {float(r['requested_pps']):.0f} | {r['packets']} "
                  f"| {num(r['seconds']) * 1e6:.3f} | {num(r['cv']):.3f} | {tv_s} |")
        print()
    if failed:
        print(f"{len(failed)} run(s) failed: " + "; ".join(
            f"{r['test']} {r['sender']} {r['dist']} run {r['run']}: {r['status']}" for r in failed))

# ---- everything on (issue 37 item 3) ---------------------------------------------------------------------------
def everything(path):
    rows = list(csv.DictReader(open(path)))
    ok = [r for r in rows if r["status"] == "ok"]
    base = {r["round"]: r for r in ok if r["tool"] == "tcpdump"}

    def per_round(rs, field):
        """tool / tcpdump -w of FIELD, round by round (the rounds where both ran)."""
        return [num(r[field]) / num(base[r["round"]][field]) for r in rs
                if r["round"] in base and num(r[field]) is not None and num(base[r["round"]][field])]

    def plus_catchup(r):
        # A no-op `ringcap index` (every file current) costs its start-up only: not part of capturing.
        cu = (num(r["catchup_cpu_ns"]) or 0) if (num(r["catchup_files"]) or 0) > 0 else 0
        c, o = num(r["cpu_ns"]), num(r["offered"])
        return (c + cu) / o if c is not None and o else None

    mb = lambda v: f"{v / 1e6:.0f}"
    ns = lambda v: f"{v:.0f}"
    x = lambda v: f"{v:.2f}"
    print("| tool | rounds | offered pps | lost per round | drops reported | CPU ns/pkt, whole process "
          "| excl. set-up | set-up CPU ms | incl. catch-up indexing | CPU / tcpdump -w | MB on disk "
          "| captures + .idx + flows MB | bytes / tcpdump -w | load (1 min) |")
    print("|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for (tool,), rs in grouped(rows, ["tool"]).items():
        good = [r for r in rs if r["status"] == "ok"]
        failed = len(rs) - len(good)
        parts = "–"
        if tool == "ringcap" and good:
            parts = " + ".join(f"{median_of(good, f) / 1e6:.1f}" for f in ("capture_bytes", "idx_bytes", "flows_bytes"))
        catch = "–"
        if tool == "ringcap":
            catch = spread([plus_catchup(r) for r in good], ns)
        print(f"| {tool} | {len(good)}{f' (+{failed} failed)' if failed else ''} "
              f"| {spread([num(r['offered_pps']) for r in good], lambda v: f'{v / 1e3:.0f} k')} "
              f"| {', '.join(r['lost'] for r in good) or '–'} "
              f"| {', '.join(r['reported_drops'] for r in good) or '–'} "
              f"| {spread([num(r['ns_per_pkt']) for r in good], ns)} "
              f"| {spread([num(r['run_ns_per_pkt']) for r in good], ns)} "
              f"| {spread([num(r['cpu_setup_ns']) / 1e6 for r in good if num(r['cpu_setup_ns']) is not None], ns)} "
              f"| {catch} "
              f"| {spread(per_round(good, 'ns_per_pkt'), x)} "
              f"| {spread([num(r['disk_bytes']) for r in good], mb)} | {parts} "
              f"| {spread(per_round(good, 'disk_bytes'), x)} "
              f"| {spread([num(r['load1']) for r in good], lambda v: f'{v:.2f}')} |")
    print()
    print("Medians over the rounds (min…max); ratios are the median of the rounds' own ratios to that round's "
          "`tcpdump -w`.")
    print()
    print("Where the CPU went, ns per packet offered (median over the rounds): each thread (or process of the pipe) "
          "when the replay had drained, and the rest of the process's CPU: after the stop (flush, last file, exit) and "
          "threads that had ended by then (ringcap's per-file finishing threads, ringcap-index-w):")
    print()
    for (tool,), rs in grouped(ok, ["tool"]).items():
        per = OrderedDict()
        for r in rs:
            o = num(r["offered"])
            for kv in filter(None, r["threads_at_stop"].split(";")):
                name, _, v = kv.rpartition("=")
                per.setdefault(name, []).append(num(v) / o)
        after = [(num(r["cpu_ns"]) - num(r["cpu_at_stop_ns"])) / num(r["offered"]) for r in rs
                 if num(r["cpu_at_stop_ns"]) is not None]
        parts = [f"{k} {statistics.median(v):.0f}" for k, v in sorted(per.items(), key=lambda kv: -statistics.median(kv[1]))]
        print(f"- {tool}: {', '.join(parts)}; the rest {spread(after, ns)}")
    rc = [r for r in ok if r["tool"] == "ringcap"]
    if rc:
        live = ", ".join(f"{r['files_indexed_live']}/{r['files']}" for r in rc)
        late = ", ".join(r["catchup_files"] for r in rc)
        print(f"ringcap: files indexed by the capture itself per round (as written + later when idle / files) {live}; "
              f"left for `ringcap index` "
              f"afterwards {late}; compression ratio {spread([num(r['compression_ratio']) for r in rc], x)}; "
              f"drops by stage: {'; '.join(r['drop_detail'] for r in rc)}.")
    print()
    print("Targets of issue 37 item 3 (everything on):")
    print()
    if not rc or not base:
        print(f"- not measured: {'ringcap' if not rc else 'tcpdump -w'} has no successful run")
    else:
        cpu, cpu_all, disk = per_round(rc, "ns_per_pkt"), median_of(rc, "ns_per_pkt"), per_round(rc, "disk_bytes")
        lost = [int(r["lost"]) for r in rc if r["lost"].lstrip("-").isdigit()]
        med = statistics.median
        print(f"- CPU per packet ≤ 1.0 × tcpdump -w: {cpu_all:.0f} vs {median_of(list(base.values()), 'ns_per_pkt'):.0f} "
              f"ns = {med(cpu):.2f} × (rounds {', '.join(x(v) for v in cpu)}): {'met' if med(cpu) <= 1.0 else '**missed**'}")
        print(f"- 0 loss: lost {', '.join(str(v) for v in lost)} packets per round: "
              f"{'met' if lost and max(lost) == 0 and len(lost) == len(rc) else '**missed**'}")
        print(f"- bytes on disk ≤ 0.6 × tcpdump -w: {med(disk):.3f} × (rounds {', '.join(f'{v:.3f}' for v in disk)}): "
              f"{'met' if med(disk) <= 0.6 else '**missed**'}")
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        print()
        print(f"{len(failed)} run(s) failed: " + "; ".join(f"{r['tool']} round {r['round']}: {r['status']}" for r in failed))


def main():
    reports = {"capture": capture, "gen": gen, "xdp": xdp, "xdp-filter": xdp_filter, "everything": everything}
    if len(sys.argv) != 3 or sys.argv[1] not in reports:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    reports[sys.argv[1]](sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
