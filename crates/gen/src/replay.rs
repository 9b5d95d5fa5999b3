//! Replaying a capture file (pcap or pcapng, plain or compressed) at its recorded timing, faster or slower
//! (`speed`), as fast as possible (`topspeed`), several times (`loops`): tcpreplay's job.
//!
//! Packet i leaves at start + (ts_i − ts_0) / speed (absolute deadlines, like generated traffic). Loop l
//! starts one mean gap after loop l−1 ended: at l × (span + span / (n − 1)) in recorded time. Frames are sent
//! as captured (caplen bytes); frames of other link types than Ethernet, shorter than an Ethernet header or
//! longer than the MTU allows are skipped and counted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, OnceLock};

use store::CaptureReader;
use wire::LinkType;

use crate::error::GenError;
use crate::job::{common_start, Counters};
use crate::options::{ReplayOptions, LIVE_REPLAY};
use crate::pace::{self, RateBasis};
use crate::report::{Departures, GenReport, ReplayStats, RunSpec, ThreadReport};
use crate::threads::{open_tx, run_threads, setup_thread, Control, Opened, TxSizes};
use crate::tx::{lookup_interface, MmsgTx, SendErrors, Tx};
use sys::Interface;

/// Replays `opts.file` on `opts.interface` (opened on the calling thread: call it inside the right netns).
pub fn replay(opts: &ReplayOptions, ctl: &Control) -> Result<GenReport, GenError> {
    opts.validate()?;
    let ifc = lookup_interface(&opts.interface)?;
    // The kernel accepts frames up to MTU + 14, + 4 more if they carry a VLAN tag.
    let max_frame = ifc.mtu as usize + 14 + 4;
    // Open once up front so a missing or unreadable file fails before any socket exists.
    let first = CaptureReader::open(&opts.file).map_err(GenError::Replay)?;
    let sizes = TxSizes {
        sndbuf: opts.sndbuf,
        ring_frames: opts.ring_frames,
        batch: opts.batch,
        max_frame,
        live_repeat: 1,
    };
    let sock = open_tx(0, opts.backend, &ifc, &sizes)?;
    let mut stats = ReplayStats::default();
    let stats_ref = std::sync::Mutex::new(&mut stats);
    let reader = std::sync::Mutex::new(Some(first));
    let work = |_t: usize,
                sock: Opened,
                abort: &AtomicBool,
                c: &Counters,
                barrier: &Barrier,
                start: &OnceLock<u64>| {
        let first = reader.lock().unwrap().take();
        let r = setup_thread(opts.cpu);
        let t0 = common_start(barrier, start);
        r?;
        let mut st = ReplayStats::default();
        let out = match sock {
            Opened::Mmsg(fd) => {
                let mut tx = MmsgTx::new(fd, opts.batch, max_frame);
                play(&mut tx, opts, &ifc, first, t0, abort, c, &mut st)
            }
            Opened::Ring(mut tx) => play(&mut tx, opts, &ifc, first, t0, abort, c, &mut st),
            Opened::Xdp(mut tx) => play(&mut *tx, opts, &ifc, first, t0, abort, c, &mut st),
            Opened::Live(_) => Err(GenError::Options(LIVE_REPLAY.into())),
        };
        **stats_ref.lock().unwrap() = st;
        let mut rep = out?;
        rep.cpu = opts.cpu;
        Ok(rep)
    };
    let total = None;
    let (threads, stopped) = run_threads(vec![sock], ctl, total, None, work)?;
    let mut report = GenReport::from_threads(
        0,
        RunSpec::Replay(Box::new(opts.clone())),
        opts.interface.clone(),
        RateBasis::Frame,
        threads,
        stopped,
    );
    report.replay = Some(stats);
    Ok(report)
}

/// Frames kept in memory for loops after the first (tcpreplay's `--preload-pcap`): later loops then read
/// no file, so a loop starts on time instead of after a reopen and buffer refill.
#[derive(Default)]
struct Cache {
    data: Vec<u8>,
    /// (timestamp ns, start in `data`, length).
    recs: Vec<(u64, usize, usize)>,
}

/// Files whose frames take more than this are read again for every loop instead of being kept in memory.
pub const PRELOAD_MAX_BYTES: usize = 256 << 20;

/// Sends frames at their deadlines, batching the ones that are due together.
struct Player<'a, T: Tx> {
    tx: &'a mut T,
    opts: &'a ReplayOptions,
    t0: u64,
    stop: &'a AtomicBool,
    counters: &'a Counters,
    errors: SendErrors,
    dep: Departures,
    packets: u64,
    bytes: u64,
    l1: u64,
    batch: (u64, u64),
    batch_start: u64,
}

impl<T: Tx> Player<'_, T> {
    /// Sends the committed frames; false if a stop cut the batch short.
    fn flush(&mut self) -> Result<bool, GenError> {
        let k = self.tx.pending();
        if k == 0 {
            return Ok(true);
        }
        let n = self.tx.flush(&mut self.errors, self.stop)?;
        self.dep.batch(self.batch_start, sys::monotonic_ns(), n);
        self.packets += n as u64;
        // A batch cut short by a stop is counted whole in bytes (it only happens on the way out).
        self.bytes += self.batch.0;
        self.l1 += self.batch.1;
        self.batch = (0, 0);
        self.counters.packets.store(self.packets, Ordering::Relaxed);
        self.counters.bytes.store(self.bytes, Ordering::Relaxed);
        Ok(n == k)
    }

    /// Sends `frame` at recorded time `rel_ns` (since the first frame, loops included); false on stop.
    #[inline]
    fn emit(&mut self, rel_ns: u64, frame: &[u8]) -> Result<bool, GenError> {
        if !self.opts.topspeed {
            let deadline = self.t0 + (rel_ns as f64 / self.opts.speed) as u64;
            if deadline > sys::monotonic_ns() {
                // Not due yet: send what is due, then wait for this one.
                if !self.flush()? || !pace::wait_until(deadline, self.stop) {
                    return Ok(false);
                }
            }
        }
        if self.stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        if self.tx.pending() == 0 {
            self.batch_start = sys::monotonic_ns();
        }
        let Some(slot) = self.tx.slot(&mut self.errors, self.stop)? else {
            return Ok(false);
        };
        slot[..frame.len()].copy_from_slice(frame);
        self.tx.commit(frame.len());
        self.batch.0 += frame.len() as u64;
        self.batch.1 += RateBasis::L1.bytes(frame.len());
        if self.tx.pending() == self.tx.capacity() {
            return self.flush();
        }
        Ok(true)
    }
}

/// The replay loop.
#[allow(clippy::too_many_arguments)]
fn play<T: Tx>(
    tx: &mut T,
    opts: &ReplayOptions,
    ifc: &Interface,
    mut reader: Option<CaptureReader>,
    t0: u64,
    stop: &AtomicBool,
    counters: &Counters,
    st: &mut ReplayStats,
) -> Result<ThreadReport, GenError> {
    let mtu = ifc.mtu as usize;
    let mut p = Player {
        tx,
        opts,
        t0,
        stop,
        counters,
        errors: SendErrors::default(),
        dep: Departures::default(),
        packets: 0,
        bytes: 0,
        l1: 0,
        batch: (0, 0),
        batch_start: 0,
    };
    let mut cache = (opts.loops != 1).then(Cache::default);
    let mut one_pass = ReplayStats::default(); // counts of the first loop, repeated by cached loops
    let mut loop_offset = 0u64; // recorded ns of the loops already played
    let mut l = 0u64;
    'loops: while opts.loops == 0 || l < opts.loops {
        let (ts0, last_ts, n_loop);
        if let (true, Some(c)) = (l > 0, &cache) {
            for &(ts, start, len) in &c.recs {
                if !p.emit(
                    ts.saturating_sub(c.recs[0].0) + loop_offset,
                    &c.data[start..start + len],
                )? {
                    break 'loops;
                }
            }
            st.read += one_pass.read;
            st.skipped_linktype += one_pass.skipped_linktype;
            st.skipped_short += one_pass.skipped_short;
            st.skipped_oversize += one_pass.skipped_oversize;
            st.truncated += one_pass.truncated;
            ts0 = c.recs.first().map(|r| r.0);
            last_ts = c.recs.last().map_or(0, |r| r.0).max(ts0.unwrap_or(0));
            n_loop = one_pass.read;
        } else {
            let mut r = match reader.take() {
                Some(r) => r,
                None => CaptureReader::open(&opts.file).map_err(GenError::Replay)?,
            };
            let mut pass = ReplayStats::default();
            let (mut first, mut last) = (None::<u64>, 0u64);
            while let Some(pkt) = r.next_packet() {
                let pkt = pkt.map_err(GenError::Replay)?;
                pass.read += 1;
                let data = pkt.data;
                if LinkType::from_pcap(pkt.linktype) != Some(LinkType::Ethernet) {
                    pass.skipped_linktype += 1;
                    continue;
                }
                if data.len() < 14 {
                    pass.skipped_short += 1;
                    continue;
                }
                // The kernel takes up to MTU + 14 bytes, 4 more behind a VLAN tag.
                let vlan = data[12..14] == [0x81, 0x00] || data[12..14] == [0x88, 0xa8];
                if data.len() > mtu + 14 + if vlan { 4 } else { 0 } {
                    pass.skipped_oversize += 1;
                    continue;
                }
                if pkt.wire_len as usize > data.len() {
                    pass.truncated += 1;
                }
                let base = *first.get_or_insert(pkt.ts_ns);
                last = last.max(pkt.ts_ns);
                if let Some(c) = &mut cache {
                    if c.data.len() + data.len() <= PRELOAD_MAX_BYTES {
                        c.recs.push((pkt.ts_ns, c.data.len(), data.len()));
                        c.data.extend_from_slice(data);
                    } else {
                        cache = None; // too large: read the file again for every loop
                    }
                }
                if !p.emit(pkt.ts_ns.saturating_sub(base) + loop_offset, data)? {
                    break 'loops;
                }
            }
            if l == 0 {
                st.file_issues = r.issues_total();
                one_pass = pass;
            }
            st.read += pass.read;
            st.skipped_linktype += pass.skipped_linktype;
            st.skipped_short += pass.skipped_short;
            st.skipped_oversize += pass.skipped_oversize;
            st.truncated += pass.truncated;
            (ts0, last_ts, n_loop) = (first, last, pass.read);
        }
        if !p.flush()? {
            break;
        }
        l += 1;
        st.loops_done = l;
        let Some(ts0) = ts0 else {
            return Err(GenError::Options(format!(
                "{} holds no Ethernet frames that fit the MTU: nothing to replay",
                opts.file.display()
            )));
        };
        // The next loop starts one mean gap after this one's last frame.
        let span = last_ts - ts0;
        loop_offset += span + span / (n_loop.max(2) - 1);
    }
    p.flush()?;
    p.tx.finish(&mut p.errors)?;
    Ok(ThreadReport {
        packets: p.packets,
        bytes: p.bytes,
        l1_bytes: p.l1,
        duration_s: p
            .dep
            .first_ns
            .map_or(0.0, |f| (p.dep.last_ns - f) as f64 / 1e9),
        gap: (&p.dep.gaps).into(),
        errors: p.errors,
        first_ns: p.dep.first_ns,
        last_ns: p.dep.last_ns,
        welford: p.dep.gaps,
        ..Default::default()
    })
}
