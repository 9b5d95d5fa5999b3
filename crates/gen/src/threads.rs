//! The thread set-up shared by generated and replayed runs: sockets opened on the calling thread, pinning,
//! one thread per socket with a common start, progress and stop handling on the calling thread.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::Duration;

use crate::error::GenError;
use crate::job::Counters;
use crate::live_tx::LiveTx;
use crate::report::{Progress, ThreadReport};
use crate::tx::{self, Backend, RingTx};
use crate::xdp_tx::XdpTx;
use sys::Interface;

/// Caller hooks: a stop flag (e.g. set by Ctrl-C) and a progress callback.
pub struct Control<'a> {
    /// Raised by the caller to end the run early.
    pub stop: Option<&'a AtomicBool>,
    /// Called on the calling thread about every `progress_every`.
    pub progress: Option<&'a (dyn Fn(&Progress) + Sync)>,
    /// Interval of progress calls.
    pub progress_every: Duration,
}

impl Default for Control<'_> {
    fn default() -> Self {
        Control {
            stop: None,
            progress: None,
            progress_every: Duration::from_millis(200),
        }
    }
}

/// A socket opened on the calling thread (so it lives in the caller's network namespace).
pub(crate) enum Opened {
    Mmsg(OwnedFd),
    Ring(RingTx),
    Xdp(Box<XdpTx>),
    Live(Box<LiveTx>),
}

/// How the senders of a run are sized (the options each backend reads).
#[derive(Clone, Copy)]
pub(crate) struct TxSizes {
    pub sndbuf: Option<usize>,
    pub ring_frames: usize,
    pub batch: usize,
    pub max_frame: usize,
    pub live_repeat: u32,
}

/// Opens the socket of thread `thread` (an AF_XDP socket binds to transmit queue `thread`).
pub(crate) fn open_tx(
    thread: usize,
    backend: Backend,
    ifc: &Interface,
    sizes: &TxSizes,
) -> Result<Opened, GenError> {
    let TxSizes {
        sndbuf,
        ring_frames,
        batch,
        max_frame,
        live_repeat,
    } = *sizes;
    if backend == Backend::XdpLive {
        return Ok(Opened::Live(Box::new(LiveTx::new(
            ifc,
            thread,
            batch,
            live_repeat,
        )?)));
    }
    if backend == Backend::Xdp {
        return Ok(Opened::Xdp(Box::new(XdpTx::new(
            ifc,
            thread as u32,
            batch,
            max_frame,
        )?)));
    }
    let fd = tx::open_socket(sndbuf)?;
    Ok(match backend {
        Backend::Sendmmsg => {
            tx::bind_socket(&fd, ifc)?;
            Opened::Mmsg(fd)
        }
        Backend::TxRing => Opened::Ring(RingTx::new(fd, ifc, ring_frames, batch, max_frame)?),
        Backend::Xdp | Backend::XdpLive => unreachable!("opened above"),
    })
}

/// Pins the calling thread to `cpu` and makes its sleeps precise (1 ns timer slack instead of 50 µs).
pub(crate) fn setup_thread(cpu: Option<usize>) -> Result<(), GenError> {
    // SAFETY: prctl with an integer argument; failure only costs sleep precision.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    if let Some(cpu) = cpu {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(GenError::Options(format!("no CPU {cpu}")));
        }
        sys::pin_thread(cpu).map_err(|source| GenError::Io {
            context: format!("cannot pin to CPU {cpu}: is it online?"),
            source,
        })?;
    }
    Ok(())
}

/// Runs `work` on one thread per socket with progress and stop handling on the calling thread; returns the
/// per-thread results in order, or the first error.
pub(crate) fn run_threads<W>(
    sockets: Vec<Opened>,
    ctl: &Control,
    total_packets: Option<u64>,
    total_s: Option<f64>,
    work: W,
) -> Result<(Vec<ThreadReport>, bool), GenError>
where
    W: Fn(
            usize,
            Opened,
            &AtomicBool,
            &Counters,
            &Barrier,
            &OnceLock<u64>,
        ) -> Result<ThreadReport, GenError>
        + Sync,
{
    let n = sockets.len();
    let abort = AtomicBool::new(false);
    let counters: Vec<Counters> = (0..n).map(|_| Counters::default()).collect();
    let barrier = Barrier::new(n);
    let start = OnceLock::new();
    let t0 = sys::monotonic_ns();
    let mut user_stopped = false;
    let results: Vec<Result<ThreadReport, GenError>> = std::thread::scope(|s| {
        let handles: Vec<_> = sockets
            .into_iter()
            .enumerate()
            .map(|(t, sock)| {
                let (abort, c, barrier, start, work) =
                    (&abort, &counters[t], &barrier, &start, &work);
                s.spawn(move || {
                    let r = work(t, sock, abort, c, barrier, start);
                    if r.is_err() {
                        abort.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let tick = ctl
            .progress_every
            .clamp(Duration::from_millis(10), Duration::from_millis(50));
        let mut last_progress = sys::monotonic_ns();
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(tick);
            if ctl.stop.is_some_and(|f| f.load(Ordering::Relaxed)) {
                user_stopped = true;
                abort.store(true, Ordering::Relaxed);
            }
            if let Some(p) = ctl.progress {
                let now = sys::monotonic_ns();
                if now - last_progress >= ctl.progress_every.as_nanos() as u64 {
                    last_progress = now;
                    p(&snapshot(&counters, t0, total_packets, total_s));
                }
            }
        }
        let r = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        if let Some(p) = ctl.progress {
            p(&snapshot(&counters, t0, total_packets, total_s));
        }
        r
    });
    let mut reports = Vec::with_capacity(n);
    for r in results {
        reports.push(r?);
    }
    Ok((reports, user_stopped))
}

fn snapshot(
    counters: &[Counters],
    t0: u64,
    total_packets: Option<u64>,
    total_s: Option<f64>,
) -> Progress {
    Progress {
        packets: counters
            .iter()
            .map(|c| c.packets.load(Ordering::Relaxed))
            .sum(),
        bytes: counters
            .iter()
            .map(|c| c.bytes.load(Ordering::Relaxed))
            .sum(),
        elapsed_s: (sys::monotonic_ns() - t0) as f64 / 1e9,
        total_packets,
        total_s,
    }
}
