//! The tick counters of `/proc/stat`, per CPU and for the machine, read and parsed.

use std::io;

/// The modes of `/proc/stat` in kernel order. `guest` and `guest_nice` follow in the file but are already
/// counted in user and nice, so they are not added again.
pub const MODES: [&str; 8] = [
    "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
];
/// Index of idle in [`MODES`].
pub const IDLE: usize = 3;

/// Tick counters of one CPU (or the machine total) since boot, in [`MODES`] order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ticks(pub [u64; 8]);

impl Ticks {
    /// Sum of all modes.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// One readout of `/proc/stat`: the machine total and each online CPU by number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcStat {
    pub all: Ticks,
    pub cpus: Vec<(u32, Ticks)>,
}

/// Parse the text of `/proc/stat` (only the `cpu` and `cpuN` lines are used). Kernels before 2.6.11 have
/// fewer columns; missing ones count as 0.
pub fn parse_proc_stat(text: &str) -> io::Result<ProcStat> {
    let bad = |line: &str, why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/stat line `{line}`: {why}"),
        )
    };
    let mut all = None;
    let mut cpus = Vec::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let Some(label) = parts.next() else { continue };
        let Some(num) = label.strip_prefix("cpu") else {
            continue;
        };
        let mut ticks = [0u64; 8];
        let mut n = 0;
        for (slot, field) in ticks.iter_mut().zip(parts) {
            *slot = field
                .parse()
                .map_err(|_| bad(line, &format!("`{field}` is not a tick count")))?;
            n += 1;
        }
        if n < 4 {
            return Err(bad(line, "fewer than 4 counters (user nice system idle)"));
        }
        if num.is_empty() {
            all = Some(Ticks(ticks));
        } else {
            let cpu = num
                .parse()
                .map_err(|_| bad(line, "not a cpu number after `cpu`"))?;
            cpus.push((cpu, Ticks(ticks)));
        }
    }
    let all = all.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "/proc/stat has no `cpu` line (is /proc mounted?)",
        )
    })?;
    Ok(ProcStat { all, cpus })
}

/// Read and parse `/proc/stat` now.
pub fn read_proc_stat() -> io::Result<ProcStat> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat")?)
}
