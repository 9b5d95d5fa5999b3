//! `gen --backend xdp-live`: frames sent from inside the kernel by BPF_PROG_TEST_RUN in live-frames mode
//! (see `xdp::LiveSender`), the way xdp-tools' `xdp-trafficgen` sends.
//!
//! **One frame per call.** A run call repeats one template frame `repeat` times, so frames vary per call,
//! not per packet: each call sends the next frame the [`FrameBuilder`] writes (its size drawn from the size
//! model, its addresses, ports, checksums and payload as the other backends would write them), `live_repeat`
//! copies of it at top speed. The size distribution and the flows are those of the other backends over many
//! calls, in runs of identical frames.
//!
//! **Exact count.** The kernel does not report frames the device refused (`ndo_xdp_xmit` returning fewer than
//! it was given, e.g. a full veth peer ring): they are freed and counted in the interface's `tx_dropped`.
//! After every call the sender reads that counter and sends again as many frames as it grew (a ledger shared
//! by the threads claims each drop once), so the receiver gets exactly the count asked, as long as nothing else
//! drops on that interface meanwhile. Drivers that do not count XDP transmit drops in `tx_dropped` cannot be
//! made exact this way.
//!
//! **Cost per call.** A call with `repeat` > 1 swaps the program into the kernel's XDP dispatcher and out again
//! (`bpf_prog_change_xdp`), which cost about 20 ms per call on the 6.18 test machine whatever the repeat (a
//! call with repeat 1 took 0.07-0.13 ms): hence the large default `live_repeat` (2^20, ~10 % overhead at
//! 5 Mpps).
//!
//! **Pacing is approached, not followed per frame.** A paced run sends, once a call's first frame is due,
//! every frame due by then plus 1 ms (at most `live_repeat`) back to back at kernel speed. The mean rate
//! holds (deadlines are absolute), but as a call of more than one frame costs ~20 ms, departures come in
//! bursts of about 20 ms of traffic once the rate exceeds ~50 calls/s; below that a call carries one frame.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex, OnceLock};

use sys::{Interface, TxCounters};
use xdp::LiveSender;

use crate::error::GenError;
use crate::frames::FrameBuilder;
use crate::job::{common_start, Counters, Job, SizeSource};
use crate::pace::{self, Departure, RateBasis};
use crate::report::{Departures, ThreadReport};
use crate::tx::SendErrors;

/// Frames a paced call may carry: those due within this window from when it starts.
const PACED_WINDOW_NS: u64 = 1_000_000;

/// The interface's transmit drops not yet sent again, shared by the threads of a run.
pub(crate) struct DropLedger {
    interface: String,
    /// The counters when the run began.
    base: TxCounters,
    /// Drops claimed since, and whether the interface was seen to transmit at all.
    state: Mutex<(u64, bool)>,
}

impl DropLedger {
    pub(crate) fn new(ifc: &Interface) -> Result<DropLedger, GenError> {
        Ok(DropLedger {
            interface: ifc.name.clone(),
            base: read_counters(&ifc.name)?,
            state: Mutex::new((0, false)),
        })
    }

    /// Drops that happened since the last claim (by any thread); the caller sends that many again.
    fn claim(&self) -> Result<u64, GenError> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = read_counters(&self.interface)?;
        let dropped = u64::from(now.dropped.wrapping_sub(self.base.dropped));
        let new = dropped.saturating_sub(st.0);
        st.0 = st.0.max(dropped);
        Ok(new)
    }

    /// After the first call: a device that neither sent nor counted a drop refused the frames silently,
    /// which is what veth does when its peer has no NAPI (neither an XDP program nor GRO). Checked once.
    fn check_transmits(&self) -> Result<(), GenError> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.1 {
            return Ok(());
        }
        // veth counts a frame when the peer's NAPI took it, normally before the call returned.
        let deadline = sys::monotonic_ns() + 200_000_000;
        loop {
            let now = read_counters(&self.interface)?;
            if now.packets != self.base.packets || now.dropped != self.base.dropped {
                st.1 = true;
                return Ok(());
            }
            if sys::monotonic_ns() > deadline {
                return Err(GenError::Options(format!(
                    "--backend xdp-live: {} took none of the frames (its tx_packets and tx_dropped did not move): \
                     a veth sends XDP frames only when its peer runs NAPI, so attach an XDP program to the peer \
                     (e.g. `ringcap capture --source xdp` there) or turn GRO on (`ethtool -K PEER gro on`); \
                     other drivers need native XDP transmit (ndo_xdp_xmit)",
                    self.interface
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

fn read_counters(name: &str) -> Result<TxCounters, GenError> {
    sys::interface_tx_counters(name).map_err(|source| GenError::Io {
        context: format!("--backend xdp-live: cannot read the transmit counters of {name}"),
        source,
    })
}

/// One thread's sender.
pub struct LiveTx {
    sender: LiveSender,
    repeat: u32,
}

impl LiveTx {
    /// `ringcap_tx` loaded for sending on `ifc` from thread `thread` (as if from receive queue thread mod the
    /// queues), `batch` frames per kernel batch, at most `repeat` frames per call.
    pub fn new(
        ifc: &Interface,
        thread: usize,
        batch: usize,
        repeat: u32,
    ) -> Result<LiveTx, GenError> {
        let queue = thread as u32 % xdp::rx_queues(&ifc.name);
        let sender = LiveSender::new(&ifc.name, ifc.index as u32, queue, batch as u32)
            .map_err(|e| xdp_err(&ifc.name, e))?;
        Ok(LiveTx {
            sender,
            repeat: repeat.max(1),
        })
    }

    /// Sends `frame` `n` times, then again as many as the interface dropped meanwhile.
    fn send(
        &self,
        frame: &[u8],
        n: u64,
        ledger: &DropLedger,
        errors: &mut SendErrors,
    ) -> Result<(), GenError> {
        let mut left = n;
        loop {
            while left > 0 {
                let k = left.min(u64::from(u32::MAX)) as u32;
                self.sender
                    .send(frame, k)
                    .map_err(|e| GenError::Xdp(format!("--backend xdp-live: {e}")))?;
                left -= u64::from(k);
                ledger.check_transmits()?;
            }
            let dropped = ledger.claim()?;
            if dropped == 0 {
                return Ok(());
            }
            errors.enobufs += dropped;
            left = dropped;
        }
    }
}

fn xdp_err(ifc: &str, e: xdp::XdpError) -> GenError {
    GenError::Xdp(format!("--backend xdp-live on {ifc}: {e}"))
}

/// Blocks every signal on the calling thread, so that a signal meant for the process (Ctrl-C) is handled by
/// another thread and never interrupts a run call (the kernel would end it with EINTR without saying how
/// many frames it sent).
fn block_signals() {
    // SAFETY: a full set, applied to this thread only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// The sending loop of one thread.
#[allow(clippy::too_many_arguments)]
pub(crate) fn generate_live<S: SizeSource>(
    tx: &LiveTx,
    ledger: &DropLedger,
    builder: &mut FrameBuilder,
    sizes: &mut S,
    job: &Job,
    stop: &AtomicBool,
    counters: &Counters,
    barrier: &Barrier,
    start: &OnceLock<u64>,
) -> Result<ThreadReport, GenError> {
    block_signals();
    let mut frame = vec![0u8; builder.max_frame_len()];
    builder.prepare_slot(&mut frame);
    let mut errors = SendErrors::default();
    let mut dep = Departures::default();
    let (mut packets, mut bytes, mut l1) = (0u64, 0u64, 0u64);
    let mut last_len = 0;

    let t0 = common_start(barrier, start);
    let mut pacer = job.pacer(t0);
    let end = job.duration_s.map(|d| t0 + (d * 1e9) as u64);
    let past_end = |t: u64| end.is_some_and(|e| t >= e);
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let remaining = job.count.map_or(u64::MAX, |c| c - packets);
        if remaining == 0 {
            break;
        }
        let horizon = match pace::next_departure(&pacer, end, stop) {
            Departure::Stop => break,
            Departure::Again => continue,
            Departure::Go { now, paced } => paced.then_some(now + PACED_WINDOW_NS),
        };
        let ip_len = builder.clamp(sizes.next_size());
        let len = builder.write(ip_len, &mut frame);
        last_len = len;
        // Top speed: `repeat` frames; paced: those due by the horizon (late ones included: deadlines stay
        // absolute, so a late sender catches up).
        let max_n = u64::from(tx.repeat).min(remaining);
        let mut n = 0u64;
        while n < max_n {
            pacer.advance(len);
            n += 1;
            match (horizon, pacer.next_deadline()) {
                (Some(h), Some(d)) if d > h || past_end(d) => break,
                _ => {}
            }
        }
        let s = sys::monotonic_ns();
        tx.send(&frame[..len], n, ledger, &mut errors)?;
        let e = sys::monotonic_ns();
        dep.batch(s, e, n as usize);
        packets += n;
        bytes += n * len as u64;
        l1 += n * RateBasis::L1.bytes(len);
        counters.packets.store(packets, Ordering::Relaxed);
        counters.bytes.store(bytes, Ordering::Relaxed);
    }
    // Drops of other threads' last calls that no one claimed yet.
    if last_len > 0 {
        tx.send(&frame[..last_len], 0, ledger, &mut errors)?;
    }
    Ok(ThreadReport {
        packets,
        bytes,
        l1_bytes: l1,
        duration_s: dep.first_ns.map_or(0.0, |f| (dep.last_ns - f) as f64 / 1e9),
        gap: (&dep.gaps).into(),
        errors,
        clamped_small: builder.clamped_small,
        clamped_large: builder.clamped_large,
        first_ns: dep.first_ns,
        last_ns: dep.last_ns,
        welford: dep.gaps,
        ..Default::default()
    })
}
