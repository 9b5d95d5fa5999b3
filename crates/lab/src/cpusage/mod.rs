//! CPU profiling as the thesis's `cpusage` and `trimusage` (seed 000 §5, A.3, A.4): read the tick counters
//! of `/proc/stat` every interval (0.5 s), turn the differences into percentages of the interval per mode
//! (user, nice, system, idle, iowait, irq, softirq, steal), per CPU and for the whole machine, and
//! summarise them with min / max / avg.
//!
//! Idle-threshold snapping (A.3, `-l`): the average covers only the first stretch of samples in which the
//! machine's idle percentage is below the limit — it starts when idle drops under the limit and stops when
//! idle returns to or above it (the profiler runs long before and after the traffic). `trimusage` (A.4)
//! fixes the case where that first stretch was a short unrelated burst: it takes the *longest* stretch
//! under the limit instead. Min and max always cover all samples (as trimusage does). The stretches are
//! found on the machine total (the `cpu` line); the per-CPU summaries use the same samples.

mod proc_stat;
mod report;
mod sampler;
mod usage;

pub use proc_stat::{parse_proc_stat, read_proc_stat, ProcStat, Ticks, IDLE, MODES};
pub use report::{Report, Summary, Trim};
pub use sampler::{Profiler, Sampler};
pub use usage::{first_window_under, longest_window_under, stats, Sample, Stats, Usage, Window};

#[cfg(test)]
mod tests;
