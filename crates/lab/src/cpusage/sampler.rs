//! Sampling `/proc/stat` at an interval: the readout pairs that make samples, and the profiler thread.

use std::io;
use std::time::{Duration, Instant};

use super::proc_stat::{read_proc_stat, ProcStat};
use super::report::Report;
use super::usage::Sample;

/// Takes readouts of `/proc/stat` and turns consecutive pairs into samples.
pub struct Sampler {
    start: Instant,
    last: ProcStat,
}

impl Sampler {
    /// First readout now.
    pub fn start() -> io::Result<Sampler> {
        Ok(Sampler {
            start: Instant::now(),
            last: read_proc_stat()?,
        })
    }

    /// Read now and return the usage since the previous readout (None if no tick passed; the previous
    /// readout is then kept so the next sample covers the whole time).
    pub fn sample(&mut self) -> io::Result<Option<Sample>> {
        let now = read_proc_stat()?;
        let t = self.start.elapsed().as_secs_f64();
        let s = Sample::between(&self.last, &now, t);
        if s.is_some() {
            self.last = now;
        }
        Ok(s)
    }

    /// Sample every `interval` while `keep_going()` is true (checked every 50 ms, so a stop is quick),
    /// calling `on_sample` for each, then take a last sample of the partial interval. Deadlines are
    /// absolute, so the sampling does not drift.
    pub fn run(
        mut self,
        interval: Duration,
        mut keep_going: impl FnMut() -> bool,
        mut on_sample: impl FnMut(&Sample),
    ) -> io::Result<Vec<Sample>> {
        let mut samples = Vec::new();
        let mut next = Instant::now() + interval;
        loop {
            if !keep_going() {
                break;
            }
            let now = Instant::now();
            if now < next {
                std::thread::sleep((next - now).min(Duration::from_millis(50)));
                continue;
            }
            next += interval;
            if let Some(s) = self.sample()? {
                on_sample(&s);
                samples.push(s);
            }
        }
        if let Some(s) = self.sample()? {
            on_sample(&s);
            samples.push(s);
        }
        Ok(samples)
    }
}

/// cpusage in the background of a measurement cycle (§3.4: the profiler starts before the capturers and
/// stops after them): a thread samples until [`Profiler::stop`].
pub struct Profiler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<io::Result<Vec<Sample>>>,
    interval: Duration,
}

impl Profiler {
    /// Take the first readout now and sample every `interval` on a thread.
    pub fn start(interval: Duration) -> io::Result<Profiler> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let sampler = Sampler::start()?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("cpusage".into())
            .spawn(move || sampler.run(interval, || !flag.load(Ordering::Relaxed), |_| {}))?;
        Ok(Profiler {
            stop,
            thread,
            interval,
        })
    }

    /// Stop sampling (the last, partial interval is kept) and summarise as [`Report::new`].
    pub fn stop(self, limit: Option<f64>, trim: Option<f64>) -> io::Result<Report> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let samples = self
            .thread
            .join()
            .map_err(|_| io::Error::other("the cpusage thread panicked"))??;
        Ok(Report::new(
            self.interval.as_secs_f64(),
            samples,
            limit,
            trim,
        ))
    }
}
