//! The stats line `ringcap capture` prints on stderr every interval while it runs (or a JSON object with
//! `--json`), and the settings of it that a reload may change.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capture::Counters;
use store::{WriterCounters, WriterStats};

/// The stats line's settings that a reload (SIGHUP with --config) may change while the capture runs.
#[derive(Debug)]
pub struct LiveStats {
    interval_us: AtomicU64,
    silent: std::sync::atomic::AtomicBool,
}

impl LiveStats {
    fn new(interval_s: f64, silent: bool) -> LiveStats {
        LiveStats {
            interval_us: AtomicU64::new(interval_micros(interval_s)),
            silent: std::sync::atomic::AtomicBool::new(silent || interval_s <= 0.0),
        }
    }

    /// `--stats-interval` (0: none) and `-q`.
    pub fn set(&self, interval_s: f64, quiet: bool) {
        self.interval_us.store(interval_micros(interval_s), Relaxed);
        self.silent.store(quiet || interval_s <= 0.0, Relaxed);
    }
}

fn interval_micros(s: f64) -> u64 {
    (s.max(0.05) * 1e6) as u64
}

/// Prints one stats line per interval on stderr.
pub struct StatsPrinter {
    json: bool,
    live: Arc<LiveStats>,
    interval: Duration,
    next: Instant,
    last: Instant,
    last_packets: u64,
    last_bytes: u64,
    last_written: u64,
    /// Several interfaces: their names, the interface number of each source, packets written of each.
    per_interface: Option<PerInterface>,
}

struct PerInterface {
    names: Vec<String>,
    interface_of: Vec<u32>,
    written: Option<Arc<[AtomicU64]>>,
}

impl StatsPrinter {
    pub fn new(json: bool, silent: bool, interval_s: f64) -> StatsPrinter {
        let interval = Duration::from_secs_f64(interval_s.max(0.05));
        StatsPrinter {
            json,
            live: Arc::new(LiveStats::new(interval_s, silent)),
            interval,
            next: Instant::now() + interval,
            last: Instant::now(),
            last_packets: 0,
            last_bytes: 0,
            last_written: 0,
            per_interface: None,
        }
    }

    /// Several interfaces: each line also gives each interface's received, kernel drops and written.
    pub fn interfaces(
        mut self,
        names: Vec<String>,
        interface_of: Vec<u32>,
        written: Option<Arc<[AtomicU64]>>,
    ) -> StatsPrinter {
        self.per_interface = Some(PerInterface {
            names,
            interface_of,
            written,
        });
        self
    }

    /// (name, received, kernel drops, written) of each interface.
    fn interface_counts(&self, counters: &[Arc<Counters>]) -> Vec<(String, u64, u64, Option<u64>)> {
        let Some(p) = &self.per_interface else {
            return Vec::new();
        };
        let mut v: Vec<(String, u64, u64, Option<u64>)> = p
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let w = p
                    .written
                    .as_ref()
                    .and_then(|w| w.get(i))
                    .map(|c| c.load(Relaxed));
                (n.clone(), 0, 0, w)
            })
            .collect();
        for (c, &i) in counters.iter().zip(&p.interface_of) {
            let e = &mut v[i as usize];
            e.1 += c.snapshot().packets;
            e.2 += c.kernel_stats().drops;
        }
        v
    }

    /// Where a reload changes the interval and quiet.
    pub fn live(&self) -> Arc<LiveStats> {
        self.live.clone()
    }

    pub fn maybe_print(&mut self, counters: &[Arc<Counters>], writer: Option<&WriterCounters>) {
        let now = Instant::now();
        let interval = Duration::from_micros(self.live.interval_us.load(Relaxed));
        if interval != self.interval {
            // Reloaded: the next line one new interval from now at the latest.
            self.interval = interval;
            self.next = self.next.min(now + interval);
        }
        if self.live.silent.load(Relaxed) || now < self.next {
            return;
        }
        self.next = (self.next + self.interval).max(now);
        let mut packets = 0;
        let mut bytes = 0;
        let mut kernel = capture::KernelStats::default();
        let mut ring = 0;
        for c in counters {
            let s = c.snapshot();
            packets += s.packets;
            ring += s.corrupt;
            bytes += s.wire_bytes;
            kernel.add(&c.kernel_stats());
        }
        let dt = now.duration_since(self.last).as_secs_f64().max(1e-9);
        let pps = (packets - self.last_packets) as f64 / dt;
        let bps = (bytes - self.last_bytes) as f64 / dt;
        self.last = now;
        self.last_packets = packets;
        self.last_bytes = bytes;
        let w = writer.map(|w| w.snapshot());
        let storage = w.map_or(0, |w| w.storage_drops);
        let written = w.map_or(0, |w| w.bytes_written);
        let write_rate = (written - self.last_written.min(written)) as f64 / dt;
        self.last_written = written;
        let per_if = self.interface_counts(counters);
        if self.json {
            let mut v = serde_json::json!({
                "type": "stats",
                "time_ns": sys::now_ns(),
                "pps": pps,
                "bits_per_sec": bps * 8.0,
                "captured": w.map_or(packets, |w| w.packets),
                "received": packets,
                "drops": { "kernel": kernel.drops, "ring": ring, "storage": storage },
                "ring_freezes": kernel.freeze_q_cnt,
            });
            if let Some(w) = w {
                v["written_bytes"] = w.bytes_written.into();
                v["written_bytes_per_sec"] = write_rate.into();
                v["backlog"] =
                    serde_json::json!({ "filled": w.buffers_filled, "total": w.buffers_total });
                if w.compressing {
                    v["compression"] =
                        serde_json::json!({ "ratio": w.ratio(), "level": current_level(&w) });
                }
                if w.indexing {
                    v["index"] = serde_json::json!({ "files": w.files_indexed, "unindexed": w.files_unindexed, "caught_up": w.files_caught_up, "older_indexed": w.older_files_indexed });
                }
            }
            if !per_if.is_empty() {
                v["interfaces"] = per_if
                    .iter()
                    .map(|(n, r, d, w)| serde_json::json!({ "name": n, "received": r, "drops_kernel": d, "written": w }))
                    .collect();
            }
            eprintln!("{v}");
        } else {
            let backlog = w.map_or(String::new(), |w| {
                let zip = if w.compressing {
                    format!(
                        " ratio {:.2} level {}",
                        w.ratio(),
                        current_level(&w).unwrap_or_else(|| "-".into())
                    )
                } else {
                    String::new()
                };
                let index = if w.indexing {
                    format!(" | indexed {}", w.files_indexed)
                        + &if w.files_unindexed > 0 {
                            format!(
                                " ({} unindexed, {} since)",
                                w.files_unindexed, w.files_caught_up
                            )
                        } else {
                            String::new()
                        }
                        + &if w.older_files_indexed > 0 {
                            format!(" (+{} older)", w.older_files_indexed)
                        } else {
                            String::new()
                        }
                } else {
                    String::new()
                };
                format!(
                    " | wrote {:.1} MB/s{zip} | backlog {}/{}{index}",
                    write_rate / 1e6,
                    w.buffers_filled,
                    w.buffers_total
                )
            });
            let ifs: String = per_if
                .iter()
                .map(|(n, r, d, w)| {
                    format!(
                        " | {n}: received {r} kernel drops {d}{}",
                        w.map_or(String::new(), |w| format!(" written {w}"))
                    )
                })
                .collect();
            eprintln!(
                "{:>10} {:>10} | captured {} | drops: kernel {} ring {} storage {}{}{ifs}",
                units::pps(pps),
                units::bits_per_sec(bps),
                w.map_or(packets, |w| w.packets),
                kernel.drops,
                ring,
                storage,
                backlog
            );
        }
    }
}

/// The level of the last compressed buffer; none before the first.
fn current_level(w: &WriterStats) -> Option<String> {
    (w.compressed_out > 0).then(|| w.level.name())
}
