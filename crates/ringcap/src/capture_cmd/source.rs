//! From the capture flags to the sources' settings: the ring or AF_XDP configuration, the compiled filter,
//! how several interfaces merge, and `-J`'s listing.

use std::time::Duration;

use anyhow::anyhow;
use capture::{Fanout, SourceConfig};

use super::capture_fatal;
use crate::cli::CaptureArgs;
use crate::Fatal;

pub(super) fn source_config(
    a: &CaptureArgs,
    linktype: wire::LinkType,
) -> Result<SourceConfig, Fatal> {
    if a.threads == 0 {
        return Err(Fatal::usage(anyhow!("--threads must be at least 1")));
    }
    let mut cfg = SourceConfig::new(&a.interface[0]);
    cfg.kind = a.source.into();
    cfg.snaplen = if *a.snaplen == 0 {
        capture::MAX_SNAPLEN
    } else {
        a.snaplen.min(capture::MAX_SNAPLEN)
    };
    cfg.promiscuous = !a.no_promisc;
    cfg.timestamps = a.time_stamp_type.into();
    cfg.set_buffer_kib(a.buffer_kib as usize);
    cfg.ring.block_size = a.block_size as usize;
    cfg.ring.block_timeout = Duration::from_millis(a.block_timeout_ms as u64);
    if a.source == crate::cli::SourceKind::Xdp {
        cfg.xdp_mode = match a.xdp_mode {
            crate::cli::XdpMode::Native => capture::XdpMode::Native,
            crate::cli::XdpMode::Generic => capture::XdpMode::Generic,
        };
        cfg.xsk.bind = match a.xdp_bind {
            crate::cli::XdpBind::Auto => capture::XdpBind::Auto,
            crate::cli::XdpBind::Copy => capture::XdpBind::Copy,
            crate::cli::XdpBind::Zerocopy => capture::XdpBind::ZeroCopy,
        };
        cfg.xsk.need_wakeup = a.xdp_need_wakeup;
        // The UMEM gets -B, as the ring would: same buffer for every source.
        let frames =
            (a.buffer_kib * 1024 / u64::from(cfg.xsk.frame_size)).clamp(64, 1 << 20) as u32;
        let ring = match a.xdp_ring {
            Some(r) => r,
            None => (1u32 << (31 - frames.leading_zeros())).min(65536),
        };
        cfg.xsk.ring_size = ring;
        cfg.xsk.frames = frames.max(ring);
    } else if a.threads > 1 {
        cfg.fanout = Some(Fanout {
            mode: a.fanout.into(),
            rollover: a.rollover,
            defrag: true,
        });
    }
    let expr = a.filter.join(" ");
    if !expr.trim().is_empty() {
        let prog = capture::compile_filter(&expr, linktype, cfg.snaplen)
            .map_err(|e| Fatal::usage(anyhow!(e)))?;
        cfg.filter = Some(prog);
        // The prefilter tests Ethernet frames; libpcap's program stays the judge of every frame delivered.
        if cfg.kind == capture::SourceKind::Xdp
            && a.xdp_prefilter
            && linktype == wire::LinkType::Ethernet
        {
            cfg.prefilter = capture::XdpPrefilter::recognise(&expr);
        }
    }
    Ok(cfg)
}

/// How the sources of several interfaces merge: each interface's number, the grace the ring's block
/// timeout needs, and for SLL2 records each interface's index and MAC address.
pub(super) fn merge_config(
    ifaces: &[String],
    interface_of: Vec<u32>,
    block_timeout_ms: u32,
    sll2: bool,
) -> Result<session::MergeConfig, Fatal> {
    let sll2 = if sll2 {
        let mut v = Vec::new();
        for name in ifaces {
            let ifc = sys::Interface::lookup(name)
                .map_err(|e| Fatal::runtime(anyhow!("interface {name}: {e}")))?;
            v.push(session::Sll2Interface {
                ifindex: ifc.index as u32,
                mac: ifc.mac,
            });
        }
        Some(v)
    } else {
        None
    };
    Ok(session::MergeConfig {
        interface_of,
        // A packet waits at most one block timeout in a partly filled block; the margin covers the timer.
        grace: Duration::from_millis(u64::from(block_timeout_ms) + 100),
        sll2,
    })
}

/// `-J`: tcpdump's listing, on stdout, of the types libpcap would offer for the interface.
pub(super) fn list_time_stamp_types(interface: &str) -> Result<(), Fatal> {
    let types = capture::supported_timestamp_types(interface).map_err(capture_fatal)?;
    println!("Time stamp types for {interface} (use option -j to set):");
    for t in types {
        println!("  {} ({})", t.name(), t.description());
    }
    Ok(())
}
