//! `capture --drop-all --source xdp`: ringcap's counting XDP program counts every packet and drops it in the
//! driver; no socket, no copy, no thread per packet. Seed 002's offered-rate oracle at the lowest cost there
//! is, and the ceiling every capturer's rate is a share of.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use session::Stop;

use crate::cli::CaptureArgs;
use crate::xdp_metrics::XdpMetrics;
use crate::{metrics, Fatal};

pub fn run(
    a: &CaptureArgs,
    mode: capture::XdpMode,
    stop: Stop,
    metrics_listener: Option<TcpListener>,
) -> Result<(), Fatal> {
    if !a.filter.join(" ").trim().is_empty() {
        return Err(Fatal::usage(anyhow!(
            "--drop-all --source xdp counts every packet in the driver and cannot apply a filter: \
             leave the filter out, or drop --source xdp"
        )));
    }
    let program = capture::XdpProgram::count_and_drop(&a.interface[0], mode)
        .map_err(|e| super::capture_fatal(capture::xdp_error(e)))?;
    // Shared with the metrics thread, which holds it weakly: dropping it below still detaches it.
    let program = Arc::new(program);
    if let Some(listener) = metrics_listener {
        let sources = metrics::MetricSources {
            archive: None,
            interfaces: a.interface.clone(),
            interface_of: Vec::new(),
            capture: Vec::new(),
            writer: None,
            records: None,
            dirs: Vec::new(),
            xdp: Some(XdpMetrics::new(&program, true)),
        };
        metrics::serve(listener, sources)
            .map_err(|e| Fatal::runtime(anyhow!("cannot start the metrics thread: {e}")))?;
    }
    // Printed even with -q, as the other sources do for --drop-all: scripts wait for it.
    eprintln!(
        "ringcap: listening on {}, counting and dropping every packet in the driver (--drop-all, XDP {} mode)",
        a.interface[0],
        mode.name()
    );
    let started = Instant::now();
    let deadline = a.duration.map(|d| started + d);
    let interval = Duration::from_secs_f64(a.stats_interval.max(0.05));
    let mut next_line = started + interval;
    let mut last = (started, 0u64);
    let seen = || program.seen().map_err(|e| Fatal::runtime(anyhow!(e)));
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        let s = seen()?;
        if stop.stopping()
            || deadline.is_some_and(|d| now >= d)
            || a.count.is_some_and(|c| s.packets >= c)
        {
            break;
        }
        if !a.quiet.on && a.stats_interval > 0.0 && now >= next_line {
            next_line += interval;
            let pps =
                (s.packets - last.1) as f64 / now.duration_since(last.0).as_secs_f64().max(1e-9);
            last = (now, s.packets);
            if a.json.on {
                eprintln!(
                    "{}",
                    serde_json::json!({"type": "stats", "time_ns": sys::now_ns(), "pps": pps, "received": s.packets})
                );
            } else {
                eprintln!("{:>10} packets counted | {}", s.packets, units::pps(pps));
            }
        }
    }
    let s = seen()?;
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    drop(program); // detaches: the interface passes packets to the stack again
    if a.json.on {
        eprintln!(
            "{}",
            serde_json::json!({
                "type": "summary",
                "drop_all": true,
                "captured": s.packets,
                "received_by_filter": s.packets,
                "dropped_by_kernel": 0,
                "delivered_to_ringcap": s.packets,
                "wire_bytes": s.bytes,
                "seconds": secs,
                "xdp": { "mode": mode.name(), "program_seen": s.packets, "counted_and_dropped": s.packets },
            })
        );
    } else {
        eprintln!(
            "{} packets counted and dropped by the XDP program (--drop-all: nothing written)",
            s.packets
        );
        // As the other sources' --drop-all: "captured" is what reached ringcap's count.
        eprintln!("{} packets captured", s.packets);
        eprintln!("{} packets received by filter", s.packets);
        eprintln!("0 packets dropped by kernel");
        eprintln!(
            "ringcap: {} in {secs:.1} s ({}, {})",
            units::bytes(s.bytes),
            units::pps(s.packets as f64 / secs),
            units::bits_per_sec(s.bytes as f64 / secs),
        );
    }
    Ok(())
}
