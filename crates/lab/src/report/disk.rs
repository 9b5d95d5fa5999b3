//! Seed 000 Fig 6.13: the disk's raw write speed (DIR/disk.json, timed before the runs) against what
//! capturing to it demands at the testbed's rate: every byte of every frame, or only the first 76 bytes of
//! each (the thesis's headers to disk), and the CPU the writing costs.

use std::path::Path;

use plot::{Chart, ErrorPoint, Series};
use serde::Deserialize;

use super::data::RunResult;
use super::figures::{Figure, Section};
use crate::bench::disk::DiskSample;

/// Bytes kept per packet when only the headers go to disk (seed 000 §6.3.5).
pub const HEADER_BYTES: f64 = 76.0;

#[derive(Deserialize)]
struct DiskJson {
    write_mib: u64,
    samples: Vec<DiskSample>,
}

/// The write rates capture to disk needs at the highest offered rate of the plan's runs, MB/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Demand {
    pub pps: f64,
    /// Every byte of every frame: the frame data rate.
    pub full_mb_s: f64,
    /// The first 76 bytes of each frame (the whole frame if it is shorter).
    pub headers_mb_s: f64,
}

/// Demand at the run that offered the most packets per second (the generator's top rate on this testbed).
/// Bytes of the capture file's record headers (16 per packet in pcap) are not counted, as in the thesis.
pub fn demand(runs: &[RunResult]) -> Option<Demand> {
    let top = runs
        .iter()
        .filter(|r| r.ok)
        .filter_map(|r| Some((r.values.get("pps")?, r.values.get("mbps")?)))
        .filter(|(p, m)| **p > 0.0 && m.is_finite())
        .max_by(|a, b| a.0.total_cmp(b.0))?;
    let (pps, mbps) = (*top.0, *top.1);
    let full_mb_s = mbps / 8.0;
    let frame_bytes = full_mb_s * 1e6 / pps;
    Some(Demand {
        pps,
        full_mb_s,
        headers_mb_s: pps * frame_bytes.min(HEADER_BYTES) / 1e6,
    })
}

/// The two panels of Fig 6.13 (write speed with the demand lines; CPU), or none without disk.json.
pub fn disk_figures(dir: &Path, runs: &[RunResult], warnings: &mut Vec<String>) -> Vec<Figure> {
    let Ok(text) = std::fs::read_to_string(dir.join("disk.json")) else {
        return Vec::new();
    };
    let disk: DiskJson = match serde_json::from_str(&text) {
        Ok(d) => d,
        Err(e) => {
            warnings.push(format!("disk.json is not readable ({e}): no disk figure"));
            return Vec::new();
        }
    };
    let mut blocks: Vec<u64> = disk.samples.iter().map(|s| s.block_kib).collect();
    blocks.sort_unstable();
    blocks.dedup();
    let per_block = |value: fn(&DiskSample) -> f64| -> Vec<ErrorPoint> {
        blocks
            .iter()
            .filter_map(|&b| {
                let ys: Vec<f64> = disk
                    .samples
                    .iter()
                    .filter(|s| s.block_kib == b)
                    .map(value)
                    .collect();
                ErrorPoint::from_reruns(&vec![b as f64; ys.len()], &ys)
            })
            .collect()
    };
    let log_x = |c: &mut Chart| {
        // Block sizes are powers of two over three decades: a log axis spaces them evenly.
        c.x.log = matches!((blocks.first(), blocks.last()), (Some(lo), Some(hi)) if *hi >= lo * 4);
    };
    let speed = per_block(|s| s.mb_per_s);
    let top = speed.iter().map(|p| p.y_max).fold(0.0f64, f64::max);
    let mut write = Chart::new(
        "Raw disk write speed against the capture's demand",
        "write block size (KiB)",
        "MB/s written (incl. fdatasync)",
    )
    .series("write speed", speed);
    log_x(&mut write);
    let mut line_top = 0.0f64;
    match demand(runs) {
        Some(d) => {
            let kpps = d.pps / 1e3;
            write = write
                .hline(
                    d.full_mb_s,
                    &format!("full frames at {kpps:.0} kpps: {:.1} MB/s", d.full_mb_s),
                )
                .hline(
                    d.headers_mb_s,
                    &format!(
                        "76-byte headers at {kpps:.0} kpps: {:.1} MB/s",
                        d.headers_mb_s
                    ),
                );
            line_top = d.full_mb_s.max(d.headers_mb_s);
        }
        None => {
            warnings.push("no run with a measured rate: the disk figure has no demand lines".into())
        }
    }
    write.y.range = Some(0.0..top.max(line_top).max(1e-3) * 1.12);

    let mut cpu = Chart::new(
        "CPU used while writing to disk",
        "write block size (KiB)",
        "CPU (%)",
    )
    .with(Series::new(
        "writer thread (% of one CPU)",
        per_block(|s| s.writer_cpu_pct),
    ))
    .with(Series::new(
        "machine busy (% of all CPUs)",
        per_block(|s| s.machine_busy_pct),
    ));
    log_x(&mut cpu);
    let cpu_top = cpu
        .series
        .iter()
        .flat_map(|s| &s.points)
        .map(|p| p.y_max)
        .fold(0.0f64, f64::max);
    cpu.y.range = Some(0.0..cpu_top.max(100.0) * 1.04);

    let reruns = disk
        .samples
        .iter()
        .map(|s| s.rerun)
        .max()
        .map_or(0, |r| r + 1);
    let how = format!(
        "{} MiB written per measurement, {reruns} rerun(s) per block size; points: average, bars: min and max",
        disk.write_mib
    );
    let mut out = Vec::new();
    for (name, chart, caption) in [
        (
            "disk_write_speed",
            &write,
            format!(
                "Seed 000 Figure 6.13: the disk's write speed (a file written in blocks and fdatasync'd, \
                 as bonnie++'s block write) against the rate capture to disk needs at the highest packet \
                 rate the runs reached: every frame whole, or its first 76 bytes (snaplen 76; the thesis's \
                 13.56 MB/s at 178 kpps). Capture file record headers are not counted. {how}."
            ),
        ),
        (
            "disk_write_cpu",
            &cpu,
            format!(
                "Seed 000 Figure 6.13, CPU: the writing thread's CPU time over the elapsed time \
                 (bonnie++'s %CPU, user + system) and the machine's share of CPU time neither idle nor in \
                 iowait during the write (kernel writeback runs in other threads; anything else running on \
                 the machine counts too). {how}."
            ),
        ),
    ] {
        match plot::chart_svg(chart) {
            Ok(svg) => out.push(Figure {
                name: name.into(),
                caption,
                section: Section::Main,
                svg,
            }),
            Err(e) => warnings.push(e.to_string()),
        }
    }
    out
}
