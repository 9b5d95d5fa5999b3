//! The capture file or file series: each capture thread encodes into its own buffers (a
//! [`store::Producer`]); the store's writer thread writes them. Flushing, rotation (`-C`, `-G`, SIGHUP)
//! and retention are the store's business: the lane only ticks it.
//!
//! With [`WriterSink::cutoff`] each lane first asks its own [`Cutoff`] whether a packet is within the
//! first SIZE bytes of its connection; cut packets are not handed to the store (nor counted as drops).
//!
//! With [`WriterSink::decap`] each lane writes, in place of a tunnelled packet, the Ethernet frame
//! its tunnel carries, the tunnel named in the packet block's comment ([`crate::decap`]); the
//! cutoff still decides on the packet as it came.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use capture::Batch;
use store::{CaptureWriter, IfStats, Producer, WriterCounters};
use wire::LinkType;

use crate::cutoff::{Cutoff, CutoffConfig, CutoffStats};
use crate::decap::{Decap, DecapConfig, DecapStats};
use crate::sink::{Lane, Sink, SinkReport, Totals};

/// A [`CaptureWriter`] as a sink.
pub struct WriterSink {
    writer: CaptureWriter,
    counters: Arc<WriterCounters>,
    /// `--cutoff`: the configuration, the frames' link type, and the lanes' counters summed as they finish.
    cutoff: Option<(CutoffConfig, LinkType, Arc<Mutex<CutoffStats>>)>,
    /// A merged capture of several interfaces: packets written of each, by interface number.
    written: Option<Arc<[AtomicU64]>>,
    /// `--decap`: the tunnels stripped, and the lanes' counters summed as they finish.
    decap: Option<(DecapConfig, Arc<Mutex<DecapStats>>)>,
}

impl WriterSink {
    pub fn new(writer: CaptureWriter) -> WriterSink {
        let counters = writer.counters();
        WriterSink {
            writer,
            counters,
            cutoff: None,
            written: None,
            decap: None,
        }
    }

    /// `--decap`: every lane writes the Ethernet frame the outermost tunnel of a kind in `cfg`
    /// carries instead of the packet, with a comment naming the tunnel (pcapng; the frames must be
    /// Ethernet). Other packets are written as they came and counted.
    pub fn decap(mut self, cfg: DecapConfig) -> WriterSink {
        self.decap = Some((cfg, Arc::new(Mutex::new(DecapStats::default()))));
        self
    }

    /// A merged capture of `n` interfaces: each batch's packets go out with its interface id (pcapng) and
    /// are counted per interface ([`Self::written_per_interface`]); the file gets one statistics block each.
    pub fn interfaces(mut self, n: usize) -> WriterSink {
        self.written = Some((0..n).map(|_| AtomicU64::new(0)).collect());
        self
    }

    /// Packets written of each interface so far (a merged capture), for a stats printer.
    pub fn written_per_interface(&self) -> Option<Arc<[AtomicU64]>> {
        self.written.clone()
    }

    /// `--cutoff`: every lane keeps only the first `cfg.size` bytes of each connection of the frames
    /// (of `linktype`, the type the writer records) in a table of its own (see [`crate::cutoff`]). With
    /// several capture threads a connection's two directions meet on one thread only under
    /// PACKET_FANOUT_HASH (the kernel's symmetric flow hash); otherwise each thread counts its share.
    pub fn cutoff(mut self, cfg: CutoffConfig, linktype: LinkType) -> WriterSink {
        let stats = CutoffStats {
            size: cfg.size,
            ..CutoffStats::default()
        };
        self.cutoff = Some((cfg, linktype, Arc::new(Mutex::new(stats))));
        self
    }

    /// Start a new file on SIGHUP (file mode), as with logs; pending while no buffer is free.
    pub fn rotate_on_sighup(&self) -> std::io::Result<()> {
        let flag: Arc<AtomicBool> = self.writer.rotation_request();
        signal_hook::flag::register(signal_hook::consts::SIGHUP, flag).map(drop)
    }

    /// The writer's live counters (packets, storage drops, backlog, compression), for a stats printer.
    pub fn counters(&self) -> Arc<WriterCounters> {
        Arc::clone(&self.counters)
    }
}

struct WriterLane {
    producer: Producer,
    /// `--cutoff`: this thread's table, and where its counters go at the end.
    cutoff: Option<(Cutoff, Arc<Mutex<CutoffStats>>)>,
    written: Option<Arc<[AtomicU64]>>,
    /// `--decap`: this thread's decapsulation, and where its counters go at the end.
    decap: Option<(Decap, Arc<Mutex<DecapStats>>)>,
}

impl Sink for WriterSink {
    fn lane(&mut self) -> anyhow::Result<Box<dyn Lane>> {
        Ok(Box::new(WriterLane {
            producer: self.writer.producer(),
            cutoff: self
                .cutoff
                .as_ref()
                .map(|(cfg, lt, sum)| (Cutoff::new(*cfg, *lt), Arc::clone(sum))),
            written: self.written.clone(),
            decap: self
                .decap
                .as_ref()
                .map(|(cfg, sum)| (Decap::new(*cfg), Arc::clone(sum))),
        }))
    }

    fn failed(&self) -> bool {
        self.counters.snapshot().failed
    }

    fn finish(self: Box<Self>, t: &Totals) -> (SinkReport, Option<anyhow::Error>) {
        let block = |interface: usize, kernel: capture::KernelStats, delivered: u64| IfStats {
            interface: interface as u32,
            ifrecv: Some(kernel.packets),
            ifdrop: Some(kernel.drops),
            filter_accept: Some(kernel.packets),
            os_drop: Some(kernel.drops),
            usr_deliv: Some(delivered),
            start_ns: Some(t.start_ns),
            end_ns: Some(t.end_ns),
        };
        let if_stats = if t.interfaces.is_empty() {
            vec![block(0, t.kernel, t.delivered)]
        } else {
            t.interfaces
                .iter()
                .enumerate()
                .map(|(i, s)| block(i, s.kernel, s.delivered))
                .collect()
        };
        let levels = self.counters.level_histogram();
        let interfaces = self
            .written
            .as_ref()
            .map(|w| w.iter().map(|n| n.load(Relaxed)).collect())
            .unwrap_or_default();
        let (stats, err) = match self.writer.finish_interfaces(if_stats) {
            Ok(s) => (s, None),
            Err(e) => (self.counters.snapshot(), Some(anyhow::Error::new(e))),
        };
        let cutoff = self
            .cutoff
            .map(|(_, _, sum)| *sum.lock().unwrap_or_else(|e| e.into_inner()));
        let decap = self
            .decap
            .map(|(cfg, sum)| (cfg, *sum.lock().unwrap_or_else(|e| e.into_inner())));
        (
            SinkReport::Written {
                stats,
                levels,
                cutoff,
                interfaces,
                decap,
            },
            err,
        )
    }
}

impl WriterLane {
    /// One packet, through the cutoff and the decapsulation (either may be off); whether it was
    /// written.
    #[inline(always)]
    fn put(&mut self, p: &capture::Packet<'_>) -> bool {
        if let Some((cut, _)) = self.cutoff.as_mut() {
            // The wire length as written (a stripped tag goes back in), so the bytes cut are the
            // bytes a reader of the file misses.
            if !cut.keep(p.data, p.vlan, p.record_wire_len(), p.ts_ns) {
                return false;
            }
        }
        if let Some((decap, _)) = self.decap.as_mut() {
            if let Some((inner, wire_len)) = decap.strip(p.data, p.wire_len, p.vlan) {
                return self.producer.write_packet_opts(
                    p.ts_ns,
                    wire_len,
                    inner,
                    None,
                    decap.opts(),
                );
            }
        }
        self.producer
            .write_packet(p.ts_ns, p.wire_len, p.data, p.vlan)
    }
}

impl Lane for WriterLane {
    #[inline]
    fn batch(&mut self, batch: &Batch<'_>) {
        if let Some(written) = self.written.clone() {
            // A merged capture: one interface per batch, counted per batch.
            let id = batch.interface();
            self.producer.set_interface(id);
            let mut n = 0;
            for p in batch.packets() {
                n += u64::from(self.put(&p));
            }
            if let Some(c) = written.get(id as usize) {
                c.fetch_add(n, Relaxed);
            }
            return;
        }
        if self.cutoff.is_none() && self.decap.is_none() {
            // `for_each`, not `for`: the batch's source is matched once (see `BatchPackets::fold`).
            batch.packets().for_each(|p| {
                self.producer
                    .write_packet(p.ts_ns, p.wire_len, p.data, p.vlan);
            });
            return;
        }
        batch.packets().for_each(|p| {
            self.put(&p);
        });
    }

    fn tick(&mut self, now: Instant) {
        self.producer.tick(now, sys::now_ns());
    }

    fn finish(self: Box<Self>) {
        let WriterLane {
            producer,
            cutoff,
            decap,
            ..
        } = *self;
        producer.finish();
        if let Some((d, sum)) = decap {
            sum.lock()
                .unwrap_or_else(|e| e.into_inner())
                .add(&d.stats());
        }
        if let Some((cut, sum)) = cutoff {
            sum.lock()
                .unwrap_or_else(|e| e.into_inner())
                .add(&cut.stats());
        }
    }
}
