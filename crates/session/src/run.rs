//! [`Session`]: one thread per source, every batch to every sink, one stop signal, one report.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use capture::{BatchSource, CounterSnapshot, Counters, KernelStats};

use crate::merge::{feed_lanes, merge_loop, MergeConfig};
use crate::sink::{InterfaceTotals, Lane, Sink, SinkReport, Totals};
use crate::stop::Stop;

/// How long one wait for packets may take: bounds the reaction time to a stop, `-c` and `--duration`.
const POLL: Duration = Duration::from_millis(100);
/// The longest a stopped capture keeps draining packets that had already arrived.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// How often the controlling thread checks the clock, the sinks and calls the monitor.
const CONTROL_PERIOD: Duration = Duration::from_millis(50);

/// How a session runs its threads.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Pin capture thread i to `cpus[i % len]` (none: no pinning).
    pub cpus: Vec<usize>,
    /// Stop after this many packets over all threads (`-c`), exactly.
    pub count: Option<u64>,
    /// Stop after this long (`--duration`).
    pub duration: Option<Duration>,
    /// After a stop, how long one wait for a partly filled block may take (the ring's block timeout plus a
    /// margin): the kernel hands such a block over only when its timeout expires.
    pub drain_wait: Duration,
    /// Several interfaces: the sources' packets go to the sinks through one merge thread, in stamp order
    /// (see [`crate::merge`]). None: every source thread drives its own lane of every sink.
    pub merge: Option<MergeConfig>,
}

/// Sources, each on its own thread, feeding the lanes of every sink.
pub struct Session {
    sources: Vec<Box<dyn BatchSource>>,
    counters: Vec<Arc<Counters>>,
    opts: Options,
    stop: Stop,
}

/// What a session did: the sources' totals, then one report per sink in the order they were given.
#[derive(Debug)]
pub struct Report {
    /// From the first thread's start to the last sink's finish.
    pub elapsed: Duration,
    /// Wall clock at start and end, ns since the Unix epoch.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The kernel's counters over every socket.
    pub kernel: KernelStats,
    /// The sources' counters summed (packets delivered, bytes, blocks, ...).
    pub source: CounterSnapshot,
    /// A merged capture of several interfaces: each one's counters, by interface number (empty with one).
    pub interfaces: Vec<InterfaceTotals>,
    /// One per sink, in the order of [`Session::run`]'s `sinks`.
    pub sinks: Vec<SinkReport>,
    /// Errors of sinks while finishing (e.g. the disk failed), in sink order.
    pub sink_errors: Vec<anyhow::Error>,
    /// The first capture thread that failed (the source broke, a CPU could not be pinned).
    pub thread_error: Option<anyhow::Error>,
    /// A merged capture: packets handed on older than one handed on before them (0: the output is in
    /// stamp order).
    pub out_of_order: u64,
}

impl Session {
    /// A session over opened sources (one thread each), stopped by `stop`.
    pub fn new(sources: Vec<Box<dyn BatchSource>>, opts: Options, stop: Stop) -> Session {
        let counters = sources.iter().map(|s| s.counters()).collect();
        Session {
            sources,
            counters,
            opts,
            stop,
        }
    }

    /// The sources' live counters, for a stats printer.
    pub fn counters(&self) -> Vec<Arc<Counters>> {
        self.counters.clone()
    }

    /// Runs until the stop flag, `-c`, `--duration`, a failed sink or a thread error; `monitor` is called
    /// about every 50 ms on the calling thread meanwhile (stats lines). Then finishes every sink, in order.
    pub fn run(
        self,
        mut sinks: Vec<Box<dyn Sink>>,
        mut monitor: impl FnMut(),
    ) -> anyhow::Result<Report> {
        let Session {
            sources,
            counters,
            opts,
            stop,
        } = self;
        let started = Instant::now();
        let start_ns = sys::now_ns();
        let taken = Arc::new(AtomicU64::new(0));
        // Every lane exists before any thread captures (a writer decides file headers by its producers).
        // Merged: the sinks get one lane each, driven by the merge thread; the sources feed it.
        let out_of_order = Arc::new(AtomicU64::new(0));
        let mut merge_thread = None;
        let mut lanes: Vec<Vec<Box<dyn Lane>>> = Vec::with_capacity(sources.len());
        if let Some(m) = &opts.merge {
            let sink_lanes = sinks
                .iter_mut()
                .map(|s| s.lane())
                .collect::<anyhow::Result<Vec<_>>>()?;
            let at_once = sink_lanes.iter().any(|l| l.stops_at_once());
            let (feeds, rx) = feed_lanes(m, at_once);
            lanes.extend(
                feeds
                    .into_iter()
                    .map(|f| vec![Box::new(f) as Box<dyn Lane>]),
            );
            let interface_of = m.interface_of.clone();
            let late = Arc::clone(&out_of_order);
            merge_thread = Some(
                std::thread::Builder::new()
                    .name("ringcap-merge".into())
                    .spawn(move || {
                        merge_loop(rx, &interface_of, sink_lanes, &late);
                        Ok(())
                    })
                    .map_err(|e| anyhow!("cannot start the merge thread: {e}"))?,
            );
        } else {
            for _ in &sources {
                lanes.push(
                    sinks
                        .iter_mut()
                        .map(|s| s.lane())
                        .collect::<anyhow::Result<Vec<_>>>()?,
                );
            }
        }
        let mut handles = Vec::with_capacity(sources.len());
        for (i, (src, lanes)) in sources.into_iter().zip(lanes).enumerate() {
            let cpu = (!opts.cpus.is_empty()).then(|| opts.cpus[i % opts.cpus.len()]);
            let ctx = ThreadCtx {
                stop: stop.clone(),
                taken: Arc::clone(&taken),
                limit: opts.count,
                drain_wait: opts.drain_wait,
            };
            let h = std::thread::Builder::new()
                .name(format!("ringcap-cap{i}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        sys::pin_thread(cpu)
                            .map_err(|e| anyhow!("cannot pin capture thread to CPU {cpu}: {e}"))?;
                    }
                    capture_loop(src, lanes, ctx)
                })
                .map_err(|e| anyhow!("cannot start a capture thread: {e}"))?;
            handles.push(h);
        }
        // Joined last: it ends once every capture thread has finished its lane.
        handles.extend(merge_thread);

        while handles.iter().any(|h| !h.is_finished()) {
            std::thread::sleep(CONTROL_PERIOD);
            if opts.duration.is_some_and(|d| started.elapsed() >= d)
                || sinks.iter().any(|s| s.failed())
            {
                stop.request_stop();
            }
            monitor();
        }
        let mut thread_error = None;
        for h in handles {
            let e = match h.join() {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e,
                Err(_) => anyhow!("a capture thread panicked"),
            };
            thread_error.get_or_insert(e);
        }

        // Every source is dropped with its thread: the kernel counters are final.
        let mut kernel = KernelStats::default();
        let mut source = CounterSnapshot::default();
        for c in &counters {
            kernel.add(&c.kernel_stats());
            source.add(&c.snapshot());
        }
        let mut interfaces = Vec::new();
        if let Some(m) = &opts.merge {
            for (c, &i) in counters.iter().zip(&m.interface_of) {
                let i = i as usize;
                if interfaces.len() <= i {
                    interfaces.resize(i + 1, InterfaceTotals::default());
                }
                interfaces[i].kernel.add(&c.kernel_stats());
                interfaces[i].delivered += c.snapshot().packets;
            }
        }
        let totals = Totals {
            kernel,
            delivered: source.packets,
            start_ns,
            end_ns: sys::now_ns(),
            interfaces,
        };
        let mut reports = Vec::with_capacity(sinks.len());
        let mut sink_errors = Vec::new();
        for s in sinks {
            let (report, err) = s.finish(&totals);
            reports.push(report);
            sink_errors.extend(err);
        }
        Ok(Report {
            elapsed: started.elapsed(),
            start_ns,
            end_ns: totals.end_ns,
            kernel,
            source,
            interfaces: totals.interfaces,
            sinks: reports,
            sink_errors,
            thread_error,
            out_of_order: out_of_order.load(Relaxed),
        })
    }
}

/// The sources' kernel drops summed (ring full, AF_XDP ring and fill counters), read by the store
/// at each file boundary for the files' coverage records: the capture loop and the file rotation
/// meet only there, once per file, never per packet. After the sources are closed it reads their
/// final counts, the summary's.
pub fn drop_meter(counters: Vec<Arc<Counters>>) -> store::DropMeter {
    Arc::new(move || store::Drops {
        kernel: counters.iter().map(|c| c.kernel_stats().drops).sum(),
        ..store::Drops::default()
    })
}

struct ThreadCtx {
    stop: Stop,
    /// Packets taken by all threads so far (only with a limit): reserved a batch at a time.
    taken: Arc<AtomicU64>,
    limit: Option<u64>,
    drain_wait: Duration,
}

/// One capture thread: batches from its source to every lane until stopped, then the lanes finish, also
/// when the source failed (what was captured is still handed on).
fn capture_loop(
    mut src: Box<dyn BatchSource>,
    mut lanes: Vec<Box<dyn Lane>>,
    ctx: ThreadCtx,
) -> anyhow::Result<()> {
    let result = feed(src.as_mut(), &mut lanes, &ctx);
    for lane in lanes {
        lane.finish();
    }
    result
}

fn feed(
    src: &mut dyn BatchSource,
    lanes: &mut [Box<dyn Lane>],
    ctx: &ThreadCtx,
) -> anyhow::Result<()> {
    let at_once = lanes.iter().any(|l| l.stops_at_once());
    // After a stop keep reading what the kernel already delivered, until a wait of one block timeout brings
    // nothing or DRAIN_LIMIT has passed: SIGINT must not lose packets that had arrived. (tcpdump leaves
    // them in its buffer, uncounted.)
    let mut drain_until: Option<Instant> = None;
    loop {
        if ctx.limit.is_some_and(|l| ctx.taken.load(Relaxed) >= l) {
            ctx.stop.request_stop();
            return Ok(());
        }
        if drain_until.is_none() && ctx.stop.stopping() {
            if at_once {
                return Ok(());
            }
            drain_until = Some(Instant::now() + DRAIN_LIMIT);
        }
        if drain_until.is_some_and(|t| Instant::now() >= t) {
            return Ok(());
        }
        let wait = if drain_until.is_some() {
            ctx.drain_wait
        } else {
            POLL
        };
        let n = match src.next_batch(wait)? {
            Some(mut batch) => {
                let n = batch.len();
                if let Some(limit) = ctx.limit {
                    // One reservation per batch, not per packet: exact over threads all the same.
                    let before = ctx.taken.fetch_add(n as u64, Relaxed);
                    batch.limit(limit.saturating_sub(before).min(n as u64) as usize);
                }
                for lane in lanes.iter_mut() {
                    lane.batch(&batch);
                }
                n
            }
            None => 0,
        };
        let now = Instant::now();
        for lane in lanes.iter_mut() {
            lane.tick(now);
        }
        if n == 0 && drain_until.is_some() {
            return Ok(());
        }
    }
}
