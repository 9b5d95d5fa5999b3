//! The `--source xdp` part of `--metrics`: the AF_XDP drop stages, what the filter rejected where, and what
//! the XDP program saw; the same numbers as the summary's `xdp` object (`xdp_summary`).
//!
//! Names follow the ring source's series: a drop is still `dropped_packets_total{stage="kernel"}` (the
//! kernel lost a packet meant for ringcap's socket), with a `reason` label for which AF_XDP ring it was.

use std::sync::{Arc, Mutex, Weak};

use capture::{KernelStats, XdpProgram};

use crate::metrics::{family, label};

/// The XDP program's counters, as the metrics thread reads them.
pub struct XdpMetrics {
    /// Weak: a scrape must not keep the program attached once the capture has let it go.
    program: Weak<XdpProgram>,
    /// Whether the program tests a prefilter (then it counts what it left to the stack).
    prefilter: bool,
    /// `--drop-all --source xdp`: no sockets; what the program counted is what ringcap received.
    pub drop_all: bool,
    /// The last values read, served once the program is gone (detached at the end of the capture).
    last: Mutex<ProgramCounts>,
}

/// One read of the program's maps; `None` until a read succeeded.
#[derive(Clone, Copy, Default)]
pub struct ProgramCounts {
    pub seen_packets: Option<u64>,
    pub seen_bytes: Option<u64>,
    pub left_to_stack: Option<u64>,
}

impl XdpMetrics {
    pub fn new(program: &Arc<XdpProgram>, drop_all: bool) -> XdpMetrics {
        XdpMetrics {
            program: Arc::downgrade(program),
            prefilter: program.prefilter().is_some(),
            drop_all,
            last: Mutex::new(ProgramCounts::default()),
        }
    }

    /// The program's counters now, or the last ones read if it is gone or a read failed.
    pub fn read(&self) -> ProgramCounts {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = self.program.upgrade() {
            if let Ok(s) = p.seen() {
                last.seen_packets = Some(s.packets);
                last.seen_bytes = Some(s.bytes);
            }
            if self.prefilter {
                if let Ok(n) = p.left_to_stack() {
                    last.left_to_stack = Some(n);
                }
            }
        }
        *last
    }
}

/// The kernel stage's drops of an interface read by AF_XDP sockets, one series per reason (they add up to
/// the socket's drops; the names are the summary's `xdp.drops` keys).
pub fn kernel_drops(interface: &str, k: &KernelStats) -> Vec<(String, f64)> {
    [
        ("socket_ring_full", k.xsk_ring_full),
        ("fill_ring_empty", k.xsk_fill_empty),
        ("other", k.xsk_other),
    ]
    .into_iter()
    .map(|(reason, n)| {
        (
            format!(
                "{interface},{},{}",
                label("stage", "kernel"),
                label("reason", reason)
            ),
            n as f64,
        )
    })
    .collect()
}

/// The series only `--source xdp` has, for its one interface (`interface` is its label).
pub fn render(
    out: &mut String,
    x: &XdpMetrics,
    counts: &ProgramCounts,
    interface: &str,
    kernel: &KernelStats,
    filtered_in_user_space: u64,
) {
    if !x.drop_all {
        let mut filtered = Vec::new();
        if x.prefilter {
            if let Some(n) = counts.left_to_stack {
                filtered.push((
                    format!("{interface},{}", label("stage", "xdp_prefilter")),
                    n as f64,
                ));
            }
        }
        filtered.push((
            format!("{interface},{}", label("stage", "user_space")),
            filtered_in_user_space as f64,
        ));
        family(
            out,
            "filtered_packets_total",
            "counter",
            "Packets the capture filter rejected (--source xdp; the other sources filter in the kernel, which \
             cannot count them), by the stage that judged them: xdp_prefilter (the XDP program's 5-tuple \
             prefilter, in the driver: left to the network stack, never copied), user_space (the full filter \
             run by ringcap on each frame taken from the AF_XDP sockets).",
            &filtered,
        );
        family(
            out,
            "xdp_invalid_descriptors_total",
            "counter",
            "Descriptors the kernel rejected on the AF_XDP sockets' rings (XDP_STATISTICS rx and tx invalid \
             descs): not packets and not drops; anything but 0 is a bug in ringcap.",
            &[(interface.to_string(), kernel.xsk_invalid_descs as f64)],
        );
    }
    if let (Some(packets), Some(bytes)) = (counts.seen_packets, counts.seen_bytes) {
        family(
            out,
            "xdp_seen_packets_total",
            "counter",
            "Packets ringcap's XDP program saw on the interface (every receive queue), in the driver before \
             the prefilter, the AF_XDP sockets and their drops.",
            &[(interface.to_string(), packets as f64)],
        );
        family(
            out,
            "xdp_seen_bytes_total",
            "counter",
            "Wire bytes of the packets the XDP program saw.",
            &[(interface.to_string(), bytes as f64)],
        );
    }
}
