//! `--metrics ADDR`: the capture's counters as Prometheus text (exposition format 0.0.4) on
//! `http://ADDR/metrics`, for the same numbers the stats lines and the summary print.
//!
//! Served by the shared `httpd` server: a few connections at once, a request must arrive within
//! [`REQUEST_DEADLINE`] and [`MAX_REQUEST`] bytes, so a stuck or hostile peer can delay scrapes by
//! at most that, never the capture (the counters are atomics read without locks).

use std::fmt::Write as _;
use std::io;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capture::Counters;
use store::{Level, WriterCounters};

use crate::xdp_metrics::{self, XdpMetrics};

/// Longest time a client may take to send its request line and headers.
const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// Largest request accepted (a GET with ordinary headers is a few hundred bytes).
const MAX_REQUEST: usize = 8 * 1024;
/// Scrapes answered at once (Prometheus sends one at a time; a few spare for curl and a stuck peer).
const MAX_CONNECTIONS: usize = 4;

/// What the metrics are read from: the same shared counters the stats printer reads.
pub struct MetricSources {
    /// The capture's interfaces, and each source's interface (an index into them): the receive and
    /// kernel counters are one series per interface.
    pub interfaces: Vec<String>,
    pub interface_of: Vec<u32>,
    pub capture: Vec<Arc<Counters>>,
    pub writer: Option<Arc<WriterCounters>>,
    pub records: Option<records::probe::StatsHandle>,
    /// Output directories (file mode), for their disk use.
    pub dirs: Vec<PathBuf>,
    /// `--source xdp` (one interface): its program's counters and the AF_XDP drop reasons.
    pub xdp: Option<XdpMetrics>,
    /// `--archive`: the archiver's backlog and uploads.
    pub archive: Option<crate::capture_cmd::archiver::ArchiveStatus>,
}

/// Binds `addr` (e.g. `127.0.0.1:9100`, `[::]:9100`) while ringcap still has its privileges (a port
/// below 1024 needs them), so a taken or bad address is reported before the capture starts.
pub fn bind(addr: &str) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
}

/// Serves scrapes from a background thread until the process ends, and logs where.
pub fn serve(listener: TcpListener, sources: MetricSources) -> io::Result<()> {
    let addr = listener.local_addr()?;
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let config = httpd::Config {
        tls: None,
        max_connections: MAX_CONNECTIONS,
        handshake_deadline: REQUEST_DEADLINE,
        limits: httpd::Limits {
            deadline: REQUEST_DEADLINE,
            max_head: MAX_REQUEST,
            max_headers: 64,
            max_body: 0,
        },
        write_stall: REQUEST_DEADLINE,
        name: "metrics".into(),
    };
    httpd::spawn(listener, config, Arc::new(Scrapes { sources, started }))?;
    log::info!("metrics on http://{addr}/metrics");
    Ok(())
}

/// The pages: /metrics, and a link to it at /.
struct Scrapes {
    sources: MetricSources,
    started: f64,
}

impl httpd::Handler for Scrapes {
    fn handle(&self, request: httpd::Request, conn: &mut httpd::Conn) -> io::Result<()> {
        let method = request.method.as_str();
        let (status, kind, body) = match (method, request.path()) {
            ("GET" | "HEAD", "/metrics") => (
                200,
                "text/plain; version=0.0.4; charset=utf-8",
                render(&self.sources, self.started),
            ),
            ("GET" | "HEAD", "/") => (
                200,
                "text/html; charset=utf-8",
                "<html><body><a href=\"/metrics\">ringcap metrics</a></body></html>\n".to_string(),
            ),
            ("GET" | "HEAD", _) => (404, "text/plain", "not found: try /metrics\n".into()),
            _ => (405, "text/plain", "only GET /metrics\n".into()),
        };
        let allow: &[(&str, &str)] = if status == 405 {
            &[("Allow", "GET, HEAD")]
        } else {
            &[]
        };
        httpd::send(conn, status, kind, allow, body.as_bytes(), method == "HEAD")
    }
}

/// Writes one metric family: its HELP and TYPE lines, then one sample per (labels, value).
pub(crate) fn family(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: &[(String, f64)],
) {
    let _ = writeln!(out, "# HELP ringcap_{name} {help}");
    let _ = writeln!(out, "# TYPE ringcap_{name} {kind}");
    for (labels, v) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "ringcap_{name} {v}");
        } else {
            let _ = writeln!(out, "ringcap_{name}{{{labels}}} {v}");
        }
    }
}

/// A label value with `\`, `"` and newlines escaped, as the text format asks.
pub(crate) fn label(key: &str, value: &str) -> String {
    let v = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    format!("{key}=\"{v}\"")
}

/// The number of a compression level: N for zstd level N (-7..=22), -99 for lz4, -100 for stored blocks.
fn level_code(l: Level) -> f64 {
    match l {
        Level::Stored => -100.0,
        Level::Lz4 => -99.0,
        Level::Zstd(n) => n as f64,
    }
}

/// What one interface's sockets counted, summed over its capture threads.
#[derive(Clone, Default)]
struct InterfaceTotals {
    packets: u64,
    wire_bytes: u64,
    corrupt: u64,
    /// Rejected by the filter in user space (`--source xdp` only).
    filtered: u64,
    kernel: capture::KernelStats,
}

fn render(s: &MetricSources, started: f64) -> String {
    let mut out = String::with_capacity(4096);
    // Writer-side series (after the merge) carry all the interfaces' names, as one label.
    let ifl = label("interface", &s.interfaces.join(","));
    let one = |v: u64| vec![(ifl.clone(), v as f64)];
    // Per interface: packets, wire bytes, corrupt blocks, kernel stats.
    let mut per_if = vec![InterfaceTotals::default(); s.interfaces.len().max(1)];
    for (i, c) in s.capture.iter().enumerate() {
        let snap = c.snapshot();
        let t = &mut per_if
            [s.interface_of.get(i).copied().unwrap_or(0) as usize % s.interfaces.len().max(1)];
        t.packets += snap.packets;
        t.wire_bytes += snap.wire_bytes;
        t.corrupt += snap.corrupt;
        t.filtered += snap.filtered_out;
        t.kernel.add(&c.kernel_stats());
    }
    let program = s.xdp.as_ref().map(|x| x.read());
    if let (Some(x), Some(p)) = (&s.xdp, &program) {
        if x.drop_all {
            // No sockets: the program counts (and drops) every packet, and that count is what ringcap got.
            per_if[0].packets = p.seen_packets.unwrap_or(0);
            per_if[0].wire_bytes = p.seen_bytes.unwrap_or(0);
        }
    }
    let if_label = |i: usize| label("interface", s.interfaces.get(i).map_or("", |n| n.as_str()));
    let each = |f: &dyn Fn(&InterfaceTotals) -> u64| -> Vec<(String, f64)> {
        per_if
            .iter()
            .enumerate()
            .map(|(i, t)| (if_label(i), f(t) as f64))
            .collect()
    };
    family(
        &mut out,
        "start_time_seconds",
        "gauge",
        "When this capture started (Unix time).",
        &[(String::new(), started)],
    );
    family(
        &mut out,
        "received_packets_total",
        "counter",
        "Packets delivered to ringcap after the capture filter: taken from the packet ring (ring, copy), from \
         the AF_XDP sockets after the user-space filter (--source xdp), or counted by the XDP program \
         (--drop-all --source xdp).",
        &each(&|t| t.packets),
    );
    family(
        &mut out,
        "received_bytes_total",
        "counter",
        "Wire bytes of the received packets.",
        &each(&|t| t.wire_bytes),
    );
    let w = s.writer.as_ref().map(|w| w.snapshot());
    let mut drops = Vec::new();
    for (i, t) in per_if.iter().enumerate() {
        match &s.xdp {
            // AF_XDP sockets: the kernel stage by reason; no ring blocks to find corrupt.
            Some(x) if !x.drop_all => {
                drops.extend(xdp_metrics::kernel_drops(&if_label(i), &t.kernel))
            }
            Some(_) => {} // --drop-all in the driver: no socket, nothing lost on the way
            None => {
                drops.push((
                    format!("{},{}", if_label(i), label("stage", "kernel")),
                    t.kernel.drops as f64,
                ));
                drops.push((
                    format!("{},{}", if_label(i), label("stage", "ring")),
                    t.corrupt as f64,
                ));
            }
        }
    }
    if let Some(w) = &w {
        drops.push((
            format!("{ifl},{}", label("stage", "storage")),
            w.storage_drops as f64,
        ));
    }
    if !drops.is_empty() {
        family(&mut out, "dropped_packets_total", "counter", "Packets lost, by the stage that lost them: kernel (before ringcap: the socket's ring was full; \
             with --source xdp a reason label says why: socket_ring_full, the AF_XDP receive ring was \
             full (ringcap fell behind); fill_ring_empty, no free frame to receive into; other, e.g. a frame \
             too large for a UMEM frame), ring (corrupt block), storage (no free buffer or a failed output).", &drops);
    }
    if s.xdp.is_none() {
        family(
            &mut out,
            "ring_freezes_total",
            "counter",
            "Times the kernel found the ring full (TPACKET_V3 queue freezes).",
            &each(&|t| t.kernel.freeze_q_cnt),
        );
    }
    if let (Some(x), Some(p)) = (&s.xdp, &program) {
        xdp_metrics::render(
            &mut out,
            x,
            p,
            &if_label(0),
            &per_if[0].kernel,
            per_if[0].filtered,
        );
    }
    if let Some(w) = &w {
        family(
            &mut out,
            "written_packets_total",
            "counter",
            "Packets in the output.",
            &one(w.packets),
        );
        family(
            &mut out,
            "written_bytes_total",
            "counter",
            "Bytes that reached the output (after compression).",
            &one(w.bytes_written),
        );
        family(
            &mut out,
            "writer_backlog_buffers",
            "gauge",
            "Filled buffers waiting for the writer.",
            &one(w.buffers_filled),
        );
        family(
            &mut out,
            "writer_buffers",
            "gauge",
            "Buffers in the writer's pool.",
            &one(w.buffers_total),
        );
        family(
            &mut out,
            "write_errors_total",
            "counter",
            "Write errors (the first one stops the output).",
            &one(w.write_errors),
        );
        // The level is known once a chunk was compressed (before that it reads "stored").
        if w.compressing && w.compressed_in > 0 {
            family(
                &mut out,
                "compression_level",
                "gauge",
                "Level of the latest compressed chunk: zstd level, -99 lz4, -100 stored.",
                &one_f(&ifl, level_code(w.level)),
            );
        }
        if w.compressing {
            family(
                &mut out,
                "compression_input_bytes_total",
                "counter",
                "Bytes given to the compressors.",
                &one(w.compressed_in),
            );
            family(
                &mut out,
                "compression_output_bytes_total",
                "counter",
                "Bytes the compressors produced.",
                &one(w.compressed_out),
            );
        }
        family(
            &mut out,
            "files_written_total",
            "counter",
            "Capture files completed (synced and renamed into place).",
            &one(w.files_done),
        );
        family(
            &mut out,
            "files_deleted_total",
            "counter",
            "Old capture files deleted by retention (-W, --disk-budget).",
            &one(w.files_deleted),
        );
        family(
            &mut out,
            "deleted_bytes_total",
            "counter",
            "Bytes of the files retention deleted.",
            &one(w.bytes_deleted),
        );
        family(
            &mut out,
            "disk_full_total",
            "counter",
            "Times an output directory was found full.",
            &one(w.disk_full_events),
        );
        if w.indexing {
            family(
                &mut out,
                "files_indexed_total",
                "counter",
                "Completed files whose packet index was written.",
                &one(w.files_indexed),
            );
            family(
                &mut out,
                "files_unindexed_total",
                "counter",
                "Completed files the live indexer left without an index (the capture indexes them \
                 later when the CPU is idle, or ringcap index does).",
                &one(w.files_unindexed),
            );
            family(
                &mut out,
                "files_caught_up_total",
                "counter",
                "Files left unindexed that the capture indexed later from disk.",
                &one(w.files_caught_up),
            );
            family(
                &mut out,
                "files_older_indexed_total",
                "counter",
                "Files found in the store without an index when the capture started, which it \
                 indexed from disk when the CPU was idle.",
                &one(w.older_files_indexed),
            );
            let lag = w
                .files_done
                .saturating_sub(w.files_indexed + w.files_unindexed);
            family(
                &mut out,
                "index_lag_files",
                "gauge",
                "Completed files the indexer has not finished yet.",
                &one(lag),
            );
        }
    }
    let disks: Vec<_> = s
        .dirs
        .iter()
        .filter_map(|d| disk_use(d).map(|u| (d, u)))
        .collect();
    if !disks.is_empty() {
        let size = disks
            .iter()
            .map(|(d, u)| (label("dir", &d.display().to_string()), u.0 as f64))
            .collect::<Vec<_>>();
        let avail = disks
            .iter()
            .map(|(d, u)| (label("dir", &d.display().to_string()), u.1 as f64))
            .collect::<Vec<_>>();
        family(
            &mut out,
            "disk_size_bytes",
            "gauge",
            "Size of the file system of each output directory.",
            &size,
        );
        family(
            &mut out,
            "disk_available_bytes",
            "gauge",
            "Bytes available to ringcap there (df's Avail).",
            &avail,
        );
    }
    if let Some(a) = &s.archive {
        let (left, left_bytes, up, up_bytes, failed) = a.read();
        for (name, kind, help, v) in [
            ("archive_backlog_objects", "gauge", "Objects (captures and their companions) not archived yet, as of the archiver's latest pass.", left),
            ("archive_backlog_bytes", "gauge", "Their bytes.", left_bytes),
            ("archive_uploaded_objects_total", "counter", "Objects archived and verified.", up),
            ("archive_uploaded_bytes_total", "counter", "Their bytes.", up_bytes),
            ("archive_failed_passes_total", "counter", "Archive passes that failed (the object store was down or refused); retried.", failed),
        ] {
            family(&mut out, name, kind, help, &[(String::new(), v as f64)]);
        }
    }
    if let Some(r) = &s.records {
        let p = r.snapshot();
        family(
            &mut out,
            "records_total",
            "counter",
            "Header records built from packets.",
            &one(p.records),
        );
        family(
            &mut out,
            "records_queue_dropped_total",
            "counter",
            "Header records dropped because the sender's queue was full.",
            &one(p.queue_drops),
        );
        family(
            &mut out,
            "records_pending",
            "gauge",
            "Header records waiting for a live collector.",
            &one(p.pending),
        );
        let per = |f: fn(&records::probe::CollectorStats) -> u64| {
            p.collectors
                .iter()
                .map(|c| (label("collector", &c.dest), f(c) as f64))
                .collect::<Vec<_>>()
        };
        family(
            &mut out,
            "records_sent_total",
            "counter",
            "Header records written to each collector (with re-sends).",
            &per(|c| c.sent),
        );
        family(
            &mut out,
            "records_acked_total",
            "counter",
            "Header records each TCP collector acknowledged (stored durably).",
            &per(|c| c.acked),
        );
        family(
            &mut out,
            "records_dropped_total",
            "counter",
            "Header records meant for each collector and dropped.",
            &per(|c| c.dropped),
        );
        family(
            &mut out,
            "collector_failures_total",
            "counter",
            "Times each collector failed (refused, reset, ack timeout).",
            &per(|c| c.failures),
        );
        family(
            &mut out,
            "collector_up",
            "gauge",
            "1 while connected to the collector.",
            &per(|c| c.up as u64),
        );
    }
    out
}

fn one_f(labels: &str, v: f64) -> Vec<(String, f64)> {
    vec![(labels.to_string(), v)]
}

/// (size, available) bytes of the file system holding `dir`, as df counts them.
fn disk_use(dir: &std::path::Path) -> Option<(u64, u64)> {
    let st = sys::fs_space(dir).ok()?;
    Some((st.size, st.available))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_as_the_text_format_says() {
        assert_eq!(label("dir", "a\"b\\c\nd"), "dir=\"a\\\"b\\\\c\\nd\"");
    }

    #[test]
    fn a_family_has_help_type_and_samples() {
        let mut out = String::new();
        family(
            &mut out,
            "x_total",
            "counter",
            "X.",
            &[(label("a", "1"), 3.0)],
        );
        assert_eq!(out, "# HELP ringcap_x_total X.\n# TYPE ringcap_x_total counter\nringcap_x_total{a=\"1\"} 3\n");
    }
}
