//! The AF_XDP part of `capture`'s summary (`--source xdp`): how the sockets ran, what the XDP program saw,
//! and whether its prefilter left frames that cannot match the filter to the network stack.

use capture::KernelStats;

/// `--source xdp`: how the sockets ran and what the XDP program saw.
#[derive(Clone, Debug)]
pub struct XdpSummary {
    pub mode: &'static str,
    pub zero_copy: bool,
    pub queues: usize,
    /// Packets the program saw on the interface (every queue), if its map could be read.
    pub seen: Option<u64>,
    /// Each receive queue's socket, queue 0 upwards: packets taken from it and its kernel counters.
    pub per_queue: Vec<(u64, KernelStats)>,
    /// The XDP prefilter's rules (as text) and the frames it left to the stack, if it was on.
    pub prefilter: Option<(String, Option<u64>)>,
}

impl XdpSummary {
    /// "xdp: native, copy, 2 queues; program saw N; drops by stage: ...; prefilter ...".
    pub fn line(&self, kernel: &KernelStats, filtered_out: u64) -> String {
        let x = self;
        let seen = x.seen.map_or(String::new(), |n| {
            format!("; the XDP program saw {n} packets")
        });
        let mut line = format!(
            "xdp: {} mode, {} sockets on {} queue{}{seen}; AF_XDP drops by stage: socket ring full {}, no free \
             frame {}, other {}; filtered out in user space {}",
            x.mode,
            if x.zero_copy { "zero-copy" } else { "copy" },
            x.queues,
            if x.queues == 1 { "" } else { "s" },
            kernel.xsk_ring_full,
            kernel.xsk_fill_empty,
            kernel.xsk_other,
            filtered_out,
        );
        line += &match &x.prefilter {
            Some((rules, left)) => format!(
                "; XDP prefilter on, rules {rules}: {} not matching, left to the stack",
                left.map_or("?".to_string(), |n| n.to_string())
            ),
            None => "; XDP prefilter off (every frame to user space)".to_string(),
        };
        if x.per_queue.len() > 1 {
            let each: Vec<String> = x
                .per_queue
                .iter()
                .enumerate()
                .map(|(q, (packets, k))| {
                    format!(
                        "{q}: {packets} (ring full {}, no free frame {}, other {})",
                        k.xsk_ring_full, k.xsk_fill_empty, k.xsk_other
                    )
                })
                .collect();
            line += &format!("; per queue {}", each.join(", "));
        }
        line
    }

    /// The summary's `xdp` object.
    pub fn json(&self, kernel: &KernelStats, filtered_out: u64) -> serde_json::Value {
        let x = self;
        serde_json::json!({
            "mode": x.mode,
            "zero_copy": x.zero_copy,
            "queues": x.queues,
            "program_seen": x.seen,
            "filtered_out": filtered_out,
            "invalid_descriptors": kernel.xsk_invalid_descs,
            "prefilter": {
                "active": x.prefilter.is_some(),
                "rules": x.prefilter.as_ref().map(|(r, _)| r),
                "left_to_stack": x.prefilter.as_ref().and_then(|(_, n)| *n),
            },
            "drops": {
                "socket_ring_full": kernel.xsk_ring_full,
                "fill_ring_empty": kernel.xsk_fill_empty,
                "other": kernel.xsk_other,
            },
            "per_queue": x.per_queue.iter().enumerate().map(|(q, (packets, k))| {
                serde_json::json!({
                    "queue": q,
                    "packets": packets,
                    "socket_ring_full": k.xsk_ring_full,
                    "fill_ring_empty": k.xsk_fill_empty,
                    "other": k.xsk_other,
                })
            }).collect::<Vec<_>>(),
        })
    }
}
