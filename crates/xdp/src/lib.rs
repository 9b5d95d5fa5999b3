//! ringcap below the network stack: its XDP programs and AF_XDP sockets.
//!
//! * [`Program`]: `ringcap_xsk` (stamp each frame, redirect it to the AF_XDP socket of its receive queue, unless
//!   the [`Prefilter`] says it cannot match the capture filter: then the stack gets it) or
//!   `ringcap_drop` (count and drop in the driver), attached through a BPF link that disappears with the
//!   process, however it ends.
//! * [`XskSocket`]: one AF_XDP socket per (interface, queue) with its own UMEM, for receiving
//!   (`capture --source xdp`) or sending (`gen --backend xdp`).
//! * [`LiveSender`]: `ringcap_tx` run by BPF_PROG_TEST_RUN in live-frames mode, sending from inside the kernel
//!   (`gen --backend xdp-live`).
//!
//! The packet sources built on these live in `capture`; this crate knows nothing of batches or sinks.

mod error;
mod live;
mod prefilter;
mod prefilter_probe;
mod program;
mod recognise;
mod xsk;

pub use error::XdpError;
pub use live::{LiveSender, LIVE_MAX_BATCH};
pub use prefilter::{AddrTest, Direction, PortTest, Prefilter, PrefilterMap, Rule, VlanTest};
pub use prefilter_probe::PrefilterProbe;
pub use program::{Mode, Program, Seen};
pub use xsk::{Bind, XskConfig, XskSocket, XskStats};

/// Receive queues of an interface (its `/sys/class/net/IF/queues/rx-*` entries; 1 if it shows none).
pub fn rx_queues(interface: &str) -> u32 {
    let dir = format!("/sys/class/net/{interface}/queues");
    let n = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
        })
        .unwrap_or(0);
    (n as u32).max(1)
}
