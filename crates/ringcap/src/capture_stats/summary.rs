//! What `ringcap capture` prints when it ends: tcpdump's three summary lines, then ringcap's per-stage
//! lines (or one JSON object with `--json`).

use std::time::Duration;

use session::{Report, SinkReport};
use store::{Level, WriterStats};

use super::XdpSummary;

/// End-of-capture numbers: tcpdump's three lines, then one line per stage.
pub struct Summary {
    xdp: Option<XdpSummary>,
    filtered_out: u64,
    elapsed: Duration,
    kernel: capture::KernelStats,
    delivered: u64,
    captured: u64,
    storage_drops: u64,
    /// Packets lost in blocks whose headers were corrupt.
    ring_drops: u64,
    wire_bytes: u64,
    blocks: u64,
    blocks_timed_out: u64,
    blocks_losing: u64,
    bytes_written: Option<u64>,
    /// Of `bytes_written`, bytes that went with O_DIRECT (past the page cache).
    bytes_direct: Option<u64>,
    direct_io: bool,
    /// File mode's counters (files, compression, retention, full disks).
    writer: Option<WriterStats>,
    /// Buffers compressed at each level.
    levels: Vec<(Level, u64)>,
    drop_all: bool,
    /// `--records`: the probe's counters.
    records: Option<records::probe::ProbeStats>,
    /// `--cutoff`: what it cut, summed over the threads.
    cutoff: Option<session::CutoffStats>,
    /// `--decap`: the tunnels asked for, and what was decapsulated or kept whole.
    decap: Option<(session::DecapConfig, session::DecapStats)>,
    /// `-j`: the type asked for, and whether the source checked each packet's stamp (the ring does).
    ts_type: capture::TimestampType,
    ts_checked: bool,
    /// Delivered packets by stamp source: [software, hardware, neither].
    ts: [u64; 3],
    /// Several interfaces: each one's name and counters, and the packets written out of stamp order.
    interfaces: Vec<InterfaceSummary>,
    out_of_order: u64,
    /// `--archive`: what the archiver did and left (JSON, and the text line).
    archive: Option<(serde_json::Value, String)>,
}

struct InterfaceSummary {
    name: String,
    kernel: capture::KernelStats,
    delivered: u64,
    written: Option<u64>,
}

impl Summary {
    /// The summary of a session; `file_mode`: a file series (its counters get their own lines).
    pub fn new(r: &Report, count: Option<u64>, drop_all: bool, file_mode: bool) -> Summary {
        let mut written = None;
        let mut levels = Vec::new();
        let mut records = None;
        let mut cutoff = None;
        let mut decap = None;
        let mut written_per_interface = Vec::new();
        for s in &r.sinks {
            match s {
                SinkReport::Written {
                    stats,
                    levels: l,
                    cutoff: c,
                    interfaces,
                    decap: d,
                } => {
                    decap = *d;
                    written = Some(*stats);
                    levels = l.clone();
                    cutoff = *c;
                    written_per_interface = interfaces.clone();
                }
                SinkReport::Records(p) => records = Some(p.clone()),
                _ => {}
            }
        }
        let delivered = r.source.packets;
        Summary {
            xdp: None,
            filtered_out: r.source.filtered_out,
            elapsed: r.elapsed,
            kernel: r.kernel,
            delivered,
            // Without a file: what the sources delivered, cut at -c.
            captured: written.map_or(count.map_or(delivered, |l| delivered.min(l)), |s| s.packets),
            storage_drops: written.map_or(0, |s| s.storage_drops),
            ring_drops: r.source.corrupt,
            wire_bytes: r.source.wire_bytes,
            blocks: r.source.batches,
            blocks_timed_out: r.source.blocks_timed_out,
            blocks_losing: r.source.blocks_losing,
            bytes_written: written.map(|s| s.bytes_written),
            bytes_direct: written.map(|s| s.bytes_direct),
            direct_io: written.is_some_and(|s| s.direct_io),
            writer: written.filter(|_| file_mode),
            levels,
            drop_all,
            records,
            cutoff,
            decap,
            ts_type: capture::TimestampType::Host,
            ts_checked: false,
            ts: [r.source.ts_software, r.source.ts_hardware, r.source.ts_none],
            interfaces: r
                .interfaces
                .iter()
                .enumerate()
                .map(|(i, t)| InterfaceSummary {
                    name: String::new(),
                    kernel: t.kernel,
                    delivered: t.delivered,
                    written: written_per_interface.get(i).copied(),
                })
                .collect(),
            out_of_order: r.out_of_order,
            archive: None,
        }
    }

    /// `--archive`: the archiver's report, as JSON and as a line.
    pub fn archive(mut self, json: serde_json::Value, line: String) -> Summary {
        self.archive = Some((json, line));
        self
    }

    /// Several interfaces: their names, in interface-number order (none: one interface, no lines).
    pub fn interfaces(mut self, names: Vec<String>) -> Summary {
        for (s, n) in self.interfaces.iter_mut().zip(names) {
            s.name = n;
        }
        self
    }

    /// The source was AF_XDP sockets.
    pub fn xdp(mut self, x: XdpSummary) -> Summary {
        self.xdp = Some(x);
        self
    }

    /// The time stamp type asked for (-j) and whether the source checked the stamps it delivered.
    pub fn timestamps(mut self, asked: capture::TimestampType, checked: bool) -> Summary {
        self.ts_type = asked;
        self.ts_checked = checked;
        self
    }

    /// "timestamps: 1000 software (host)": what the ring said of each packet's stamp. A packet with
    /// neither stamp bit got the kernel's software clock as it was put in the ring (skb stamps are off
    /// while no socket on the machine asks for them), so it counts as software, with a note.
    fn timestamps_line(&self) -> String {
        let name = self.ts_type.name();
        if self.xdp.is_some() {
            return format!(
                "timestamps: {name} (CLOCK_MONOTONIC read by the XDP program in the driver, converted to wall-clock \
                 time per batch)"
            );
        }
        if !self.ts_checked {
            return format!(
                "timestamps: {name} ({}; not checked per packet by --source copy)",
                self.ts_type.source()
            );
        }
        let [sw, hw, at_ring] = self.ts;
        let mut parts = Vec::new();
        if sw + at_ring > 0 {
            parts.push(format!("{} software", sw + at_ring));
        }
        if hw > 0 {
            parts.push(format!("{hw} hardware"));
        }
        let counts = if parts.is_empty() {
            "no packets".to_string()
        } else {
            parts.join(", ")
        };
        let note = if at_ring > 0 {
            format!("; {at_ring} of them stamped as the ring was filled, not at receive")
        } else {
            String::new()
        };
        format!("timestamps: {counts} ({name}{note})")
    }

    /// Hardware stamps were asked for but some packets came without: the NIC or kernel ignored it.
    fn timestamps_warning(&self) -> Option<String> {
        let not_hw = self.ts[0] + self.ts[2];
        (self.ts_checked && self.ts_type.is_hardware() && not_hw > 0).then(|| {
            format!(
                "WARNING: -j {} asked for the NIC's hardware stamps, but {not_hw} packets carry the \
                 kernel's software stamps instead (the driver or kernel did not deliver hardware stamps{}); \
                 their times are host times",
                self.ts_type.name(),
                if self.ts_type == capture::TimestampType::Adapter {
                    "; recent kernels no longer convert them to system time: try -j adapter_unsynced"
                } else {
                    ""
                }
            )
        })
    }

    pub fn print(&self, json: bool) {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        if json {
            let v = serde_json::json!({
                "type": "summary",
                "captured": self.captured,
                "received_by_filter": self.kernel.packets,
                "dropped_by_kernel": self.kernel.drops,
                "delivered_to_ringcap": self.delivered,
                "drops": { "kernel": self.kernel.drops, "ring": self.ring_drops, "storage": self.storage_drops },
                "ring": { "blocks": self.blocks, "timed_out": self.blocks_timed_out, "losing": self.blocks_losing, "freezes": self.kernel.freeze_q_cnt },
                "wire_bytes": self.wire_bytes,
                "bytes_written": self.bytes_written,
                "bytes_direct": self.bytes_direct,
                "direct_io": self.direct_io,
                "seconds": secs,
                "timestamps": {
                    "type": self.ts_type.name(),
                    "checked": self.ts_checked,
                    "software": self.ts[0],
                    "hardware": self.ts[1],
                    "software_at_ring": self.ts[2],
                },
            });
            let mut v = v;
            if let Some(w) = self.timestamps_warning() {
                v["timestamps"]["warning"] = w.into();
            }
            if self.drop_all {
                v["drop_all"] = true.into();
            }
            if !self.interfaces.is_empty() {
                v["interfaces"] = self
                    .interfaces
                    .iter()
                    .map(|i| {
                        serde_json::json!({
                            "name": i.name,
                            "received_by_filter": i.kernel.packets,
                            "dropped_by_kernel": i.kernel.drops,
                            "delivered": i.delivered,
                            "written": i.written,
                        })
                    })
                    .collect();
                v["out_of_order"] = self.out_of_order.into();
            }
            if let Some(x) = &self.xdp {
                v["xdp"] = x.json(&self.kernel, self.filtered_out);
            }
            if let Some(r) = &self.records {
                v["drops"]["queue"] = r.queue_drops.into();
                v["records"] = serde_json::to_value(r).unwrap_or_default();
            }
            if let Some(c) = &self.cutoff {
                // Cut packets are their own stage, not drops.
                v["cutoff"] = serde_json::json!({
                    "size": c.size,
                    "packets": c.packets,
                    "bytes": c.bytes,
                    "packets_cut": c.packets_cut,
                    "bytes_cut": c.bytes_cut,
                    "connections": c.connections,
                    "evictions": c.evictions,
                });
            }
            if let Some((cfg, d)) = &self.decap {
                v["decap"] = serde_json::json!({
                    "tunnels": cfg.to_string(),
                    "decapsulated": d.decapsulated,
                    "bytes_stripped": d.bytes_stripped,
                    "kept_whole": d.kept_whole(),
                    "kept_not_tunnelled": d.not_tunnelled,
                    "kept_not_ethernet": d.not_ethernet,
                    "kept_cut_or_malformed": d.bad,
                });
            }
            if let Some(w) = &self.writer {
                v["files"] = serde_json::json!({
                    "complete": w.files_done,
                    "deleted": w.files_deleted,
                    "bytes_deleted": w.bytes_deleted,
                    "disk_full_events": w.disk_full_events,
                    "indexed": w.files_indexed,
                    "unindexed": w.files_unindexed,
                    "buffers_not_indexed": w.index_skipped,
                    "indexer_cpu_ns": w.index_cpu_ns,
                    "indexer_packets": w.index_packets,
                    "caught_up": w.files_caught_up,
                    "older_indexed": w.older_files_indexed,
                    "catch_up_cpu_ns": w.catch_up_cpu_ns,
                });
                if w.compressing {
                    let levels: serde_json::Map<String, serde_json::Value> = self
                        .levels
                        .iter()
                        .map(|(l, n)| (l.name(), (*n).into()))
                        .collect();
                    v["compression"] = serde_json::json!({
                        "ratio": w.ratio(),
                        "bytes_in": w.compressed_in,
                        "bytes_out": w.compressed_out,
                        "levels": levels,
                    });
                }
            }
            if let Some((a, _)) = &self.archive {
                v["archive"] = a.clone();
            }
            eprintln!("{v}");
            return;
        }
        if self.drop_all {
            eprintln!(
                "{} packets counted and dropped (--drop-all: nothing written)",
                self.delivered
            );
        }
        eprintln!("{} packets captured", self.captured);
        eprintln!("{} packets received by filter", self.kernel.packets);
        eprintln!("{} packets dropped by kernel", self.kernel.drops);
        eprintln!(
            "ringcap: {} in {:.1} s ({}, {}); drops by stage: kernel {}, ring {}, storage {}",
            units::bytes(self.wire_bytes),
            secs,
            units::pps(self.delivered as f64 / secs),
            units::bits_per_sec(self.wire_bytes as f64 / secs),
            self.kernel.drops,
            self.ring_drops,
            self.storage_drops,
        );
        match &self.xdp {
            Some(x) => eprintln!("ringcap: {}", x.line(&self.kernel, self.filtered_out)),
            None => eprintln!(
                "ringcap: ring: {} blocks ({} closed by timeout, {} while losing), {} ring-full freezes",
                self.blocks, self.blocks_timed_out, self.blocks_losing, self.kernel.freeze_q_cnt
            ),
        }
        for i in &self.interfaces {
            eprintln!(
                "ringcap: interface {}: {} received by filter, {} dropped by kernel, {} delivered{}",
                i.name,
                i.kernel.packets,
                i.kernel.drops,
                i.delivered,
                i.written.map_or(String::new(), |w| format!(", {w} written"))
            );
        }
        if self.out_of_order > 0 {
            eprintln!(
                "ringcap: {} packets written out of time order (arrived later than the merge waits for)",
                self.out_of_order
            );
        }
        eprintln!("ringcap: {}", self.timestamps_line());
        if let Some(w) = self.timestamps_warning() {
            eprintln!("ringcap: {w}");
        }
        if let Some(r) = &self.records {
            print_records(r);
        }
        if let Some((_, line)) = &self.archive {
            eprintln!("ringcap: {line}");
        }
        if let Some(c) = &self.cutoff {
            eprintln!("ringcap: {}", cutoff_line(c));
        }
        if let Some((cfg, d)) = &self.decap {
            eprintln!("ringcap: {}", decap_line(cfg, d));
        }
        if let Some(b) = self.bytes_written {
            eprintln!(
                "ringcap: wrote {} ({})",
                units::bytes(b),
                if self.direct_io {
                    "O_DIRECT"
                } else {
                    "page cache"
                }
            );
        }
        if let Some(w) = &self.writer {
            eprintln!(
                "ringcap: files: {} complete, {} deleted by retention ({}), {} disk-full event{}",
                w.files_done,
                w.files_deleted,
                units::bytes(w.bytes_deleted),
                w.disk_full_events,
                if w.disk_full_events == 1 { "" } else { "s" }
            );
            if w.indexing {
                let left = w.files_unindexed.saturating_sub(w.files_caught_up);
                let behind = if w.files_unindexed > 0 {
                    format!(
                        ", {} left behind by the indexer (it fell behind or a write failed), {} of them \
                         indexed later when the CPU was idle{}",
                        w.files_unindexed,
                        w.files_caught_up,
                        if left > 0 {
                            format!("; {left} still without an index: run `ringcap index` on the store")
                        } else {
                            String::new()
                        }
                    )
                } else {
                    String::new()
                };
                let older = match w.older_files_indexed {
                    0 => String::new(),
                    n => format!(
                        " (+{n} older file{} of the store that had no index)",
                        if n == 1 { "" } else { "s" }
                    ),
                };
                let per_packet = w.index_cpu_ns as f64 / w.index_packets.max(1) as f64;
                eprintln!(
                    "ringcap: index: {} files indexed{older}{behind}; indexer CPU {:.0} ns per packet",
                    w.files_indexed, per_packet
                );
            }
            if w.compressing {
                let levels: Vec<String> = self
                    .levels
                    .iter()
                    .map(|(l, n)| format!("{} ×{n}", l.name()))
                    .collect();
                eprintln!(
                    "ringcap: compression: ratio {:.2} ({} → {}); 1 MiB chunks by level: {}",
                    w.ratio(),
                    units::bytes(w.compressed_in),
                    units::bytes(w.compressed_out),
                    levels.join(", ")
                );
            }
        }
    }
}

/// `decap vxlan:4789: 1 200 decapsulated (60.0 KiB of outer headers stripped), 34 kept whole (30 not
/// tunnelled, 0 carrying IP, 4 cut or malformed)`.
fn decap_line(cfg: &session::DecapConfig, d: &session::DecapStats) -> String {
    format!(
        "decap {cfg}: {} decapsulated ({} of outer headers stripped), {} kept whole ({} not tunnelled, {} carrying IP or MPLS, {} cut or malformed)",
        d.decapsulated,
        units::bytes(d.bytes_stripped),
        d.kept_whole(),
        d.not_tunnelled,
        d.not_ethernet,
        d.bad
    )
}

/// `cutoff 64 KiB: cut 1 234 567 packets (850 MiB, 91 % of the bytes) of 3 400 connections; 12 entries evicted`.
fn cutoff_line(c: &session::CutoffStats) -> String {
    let pct = if c.bytes == 0 {
        0.0
    } else {
        100.0 * c.bytes_cut as f64 / c.bytes as f64
    };
    format!(
        "cutoff {}: cut {} packet{} ({}, {} % of the bytes) of {} connection{}; {} entr{} evicted",
        units::bytes(c.size),
        grouped(c.packets_cut),
        if c.packets_cut == 1 { "" } else { "s" },
        units::bytes(c.bytes_cut),
        units::sig(pct),
        grouped(c.connections),
        if c.connections == 1 { "" } else { "s" },
        grouped(c.evictions),
        if c.evictions == 1 { "y" } else { "ies" },
    )
}

/// Digits in groups of three: 1234567 → "1 234 567".
fn grouped(n: u64) -> String {
    units::group_digits(&n.to_string(), ' ')
}

fn print_records(r: &records::probe::ProbeStats) {
    eprintln!(
        "ringcap: records: {} built, {} batches; drops by stage: queue {}, no live collector {}",
        r.records,
        r.batches,
        r.queue_drops,
        r.collectors.iter().map(|c| c.dropped).sum::<u64>()
    );
    let t = &r.tunnels;
    if t.decapsulated + t.undecoded() > 0 {
        eprintln!(
            "ringcap: records of tunnelled packets: {} by the packet carried; by the outer headers: \
             truncated {}, malformed {}, too deep {}, unsupported {}, nested {}",
            t.decapsulated, t.truncated, t.malformed, t.too_deep, t.unsupported, t.nested
        );
    }
    for c in &r.collectors {
        eprintln!(
            "ringcap: records to {}: sent {} (re-sent {}), acked {}, dropped {}, unacked {}, failures {}, \
             bad acks {}, failed handshakes {}",
            c.dest,
            c.sent,
            c.resent,
            c.acked,
            c.dropped,
            c.unacked,
            c.failures,
            c.bad_acks,
            c.handshake_failures
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cutoff_line_reads_as_documented() {
        assert_eq!(grouped(1_234_567), "1 234 567");
        assert_eq!(grouped(3_400), "3 400");
        assert_eq!(grouped(12), "12");
        let c = session::CutoffStats {
            size: 64 << 10,
            packets: 2_000_000,
            bytes: 1000,
            packets_cut: 1_234_567,
            bytes_cut: 910,
            connections: 3_400,
            evictions: 1,
        };
        assert_eq!(
            cutoff_line(&c),
            "cutoff 64.0 KiB: cut 1 234 567 packets (910 B, 91 % of the bytes) of 3 400 connections; 1 entry evicted"
        );
    }
}
