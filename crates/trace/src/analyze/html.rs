//! The report's `index.html`: the plots and the tables, no scripts, no external files.

use std::fmt::Write;

use plot::html::esc;

use super::traffic::Share;
use super::Analysis;
use units::time::utc_seconds;

const CSS: &str = "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}\
                   td,th{border:1px solid #bbb;padding:2px 8px;text-align:right}td{white-space:nowrap}th{background:#eee}";

fn share_table(out: &mut String, title: &str, rows: &[Share]) {
    let _ = write!(
        out,
        "<h3>{}</h3><table><tr><th>name</th><th>packets</th><th>%</th><th>bytes</th><th>%</th></tr>",
        esc(title)
    );
    for r in rows {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{:.2}</td></tr>",
            esc(&r.name),
            r.packets,
            r.packets_pct,
            r.bytes,
            r.bytes_pct
        );
    }
    out.push_str("</table>");
}

/// The whole page.
pub fn page(a: &Analysis) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<h1>Trace analysis</h1><p>{} ({} files): {} packets, {} on the wire, {} → {} UTC ({:.3} s).<br>\
         {} flows. Rates pass: {:.1} M rows/s; sizes and flows pass: {:.1} M rows/s.</p>",
        esc(&a.input),
        a.files.len(),
        a.packets,
        units::si(a.bytes as f64, "B"),
        utc_seconds(a.first_ns),
        utc_seconds(a.last_ns),
        a.duration_s,
        a.flows,
        a.timing.rates_mpps,
        a.timing.traffic_mpps
    );
    o.push_str("<h2>Rate timeline</h2><img src=\"timeline.svg\" width=\"1000\">");
    o.push_str("<h3>Per hour (over the minute averages)</h3><table><tr><th>hour (UTC)</th><th>minutes</th><th>min pps</th><th>avg pps</th><th>max pps</th><th>min Mb/s</th><th>avg Mb/s</th><th>max Mb/s</th></tr>");
    for h in &a.hours {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td></tr>",
            utc_seconds(h.start_ns),
            h.minutes,
            units::si(h.min_pps, ""),
            units::si(h.avg_pps, ""),
            units::si(h.max_pps, ""),
            h.min_mbps,
            h.avg_mbps,
            h.max_mbps
        );
    }
    o.push_str("</table><h2>Burstiness</h2><img src=\"burstiness.svg\" width=\"1000\"><table><tr><th>window</th><th>windows</th><th>empty</th>");
    if let Some(b) = a.burstiness.first() {
        for p in &b.percentiles {
            let _ = write!(o, "<th>p{p} pps</th>");
        }
    }
    o.push_str("<th>mean pps</th><th>max Mb/s</th></tr>");
    for b in &a.burstiness {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td>",
            units::seconds(b.window_s),
            b.windows,
            b.empty
        );
        for v in &b.pps {
            let _ = write!(o, "<td>{}</td>", units::si(*v, ""));
        }
        let _ = write!(
            o,
            "<td>{}</td><td>{:.2}</td></tr>",
            units::si(b.mean_pps, ""),
            b.mbps.last().copied().unwrap_or(0.0)
        );
    }
    let s = &a.sizes;
    let _ = write!(
        o,
        "</table><h2>Packet sizes</h2><img src=\"sizes.svg\" width=\"1000\"><p>{} IP packets, {} distinct IP lengths \
         ({}–{}, mean {:.1}); {} / {} / {} lengths cover 50 / 90 / 99 % of packets. {} packets without an IP length. \
         As a generator distribution: <a href=\"sizes.dist\">sizes.dist</a>.</p>\
         <table><tr><th>IP length</th><th>packets</th><th>share %</th><th>cumulative %</th></tr>",
        s.ip_packets,
        s.distinct,
        s.min,
        s.max,
        s.mean,
        s.sizes_for_50_90_99_pct[0],
        s.sizes_for_50_90_99_pct[1],
        s.sizes_for_50_90_99_pct[2],
        a.packets_without_ip_len
    );
    for h in &s.heavy_hitters {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td></tr>",
            h.size, h.packets, h.share_pct, h.cumulative_pct
        );
    }
    o.push_str("</table><h2>Traffic mix</h2>");
    share_table(&mut o, "Protocols", &a.mix.protocols);
    share_table(&mut o, "Top sources (by bytes)", &a.mix.top_sources);
    share_table(
        &mut o,
        "Top destinations (by bytes)",
        &a.mix.top_destinations,
    );
    share_table(
        &mut o,
        "Top destination ports (by packets)",
        &a.mix.top_ports,
    );
    let _ = write!(
        o,
        "<h2>Flows</h2><p>{} directional 5-tuples in <a href=\"flows.parquet\">flows.parquet</a> \
         (ip_version, protocol, ethertype, src_ip4, dst_ip4, src_ip6, dst_ip6, src_port, dst_port, first_ts, last_ts, packets, bytes; addresses typed as in the packet table).</p>\
         <p>All numbers: <a href=\"report.json\">report.json</a>.</p>",
        a.flows
    );
    plot::html::page(&format!("ringcap analyze: {}", a.input), CSS, &o)
}
