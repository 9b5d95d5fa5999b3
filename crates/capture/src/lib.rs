//! Packet sources for ringcap: where packets come from, never where they go (no files here).
//!
//! * [`RingSource`]: AF_PACKET TPACKET_V3 ring mapped into the process, read in place, block by block.
//! * [`CopySource`]: the classic per-packet path, recvmmsg into preallocated buffers (`--source copy`).
//! * [`XdpSource`]: AF_XDP sockets fed by ringcap's XDP program, one per receive queue (`--source xdp`).
//! * [`Source`]: either one behind one loop: `next_batch(timeout)` yields a [`Batch`], read once per sink
//!   (or `for_each_batch(timeout, |p: &Packet| ...)`). [`BatchSource`] is what the capture session drives;
//!   [`MemorySource`] feeds it packets held in memory.
//! * Fanout: [`Source::open_group`] opens N sockets in one PACKET_FANOUT group, one per thread;
//!   pin each thread with [`sys::pin_thread`](::sys::pin_thread).
//! * Filters: [`compile_filter`] (libpcap, tcpdump syntax) → classic BPF attached in the kernel.
//! * Counters: [`Counters`] (per batch, lock-free) and the kernel's [`KernelStats`].
//!
//! ```no_run
//! use std::time::Duration;
//! let mut cfg = capture::SourceConfig::new("eth0");
//! cfg.filter = Some(capture::compile_filter("udp port 53", wire::LinkType::Ethernet, cfg.snaplen)?);
//! let mut src = capture::Source::open(&cfg)?;
//! let mut bytes = 0u64;
//! src.for_each_batch(Duration::from_millis(100), |p| bytes += p.data.len() as u64)?;
//! # Ok::<(), capture::CaptureError>(())
//! ```

mod batch;
mod copy;
mod counters;
mod error;
mod packet;
mod ring;
mod source;
mod sys;
mod tstamp;
mod xdp;

pub use ::xdp::{
    Bind as XdpBind, Mode as XdpMode, Prefilter as XdpPrefilter, Program as XdpProgram, XdpError,
    XskConfig,
};
pub use batch::{Batch, BatchPackets, BatchSource, Frame, MemorySource};
pub use bpf::{
    accept_all, compile_filter, drop_all, dump, run_filter, set_snaplen, DumpStyle, MAX_INSNS,
    MAX_SNAPLEN,
};
pub use copy::{CopyConfig, CopySource};
pub use counters::{CounterSnapshot, Counters, KernelStats};
pub use error::{CaptureError, FilterError};
pub use libc::sock_filter;
pub use packet::Packet;
pub use ring::{Block, Packets, RingConfig, RingSource};
pub use source::{Fanout, FanoutMode, Source, SourceConfig, SourceKind};
pub use sys::interface_link_type;
pub use tstamp::{supported_timestamp_types, TimestampType};
pub use xdp::{xdp_error, XdpSource};
