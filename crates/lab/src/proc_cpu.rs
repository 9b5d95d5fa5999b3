//! CPU time of processes from `/proc/PID/stat` (utime + stime, and the same for waited-for children).

use std::fs;
use std::io;

/// CPU time a process has used, in clock ticks and nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcCpu {
    /// utime + stime of the process itself.
    pub self_ticks: u64,
    /// cutime + cstime: children that were waited for.
    pub children_ticks: u64,
}

impl ProcCpu {
    /// Total CPU time in nanoseconds (process + children).
    pub fn total_ns(&self) -> u64 {
        (self.self_ticks + self.children_ticks) * 1_000_000_000 / clock_ticks_per_sec()
    }
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Parse the contents of `/proc/PID/stat`. The command name may contain spaces and parentheses,
/// so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcCpu> {
    let rest = &text[text.rfind(')')? + 1..];
    // After ")": field 3 (state) is index 0, so field N is index N - 3.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some(ProcCpu {
        self_ticks: get(14)? + get(15)?,
        children_ticks: get(16)? + get(17)?,
    })
}

/// CPU time of a process.
pub fn read(pid: u32) -> io::Result<ProcCpu> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(&text).ok_or_else(|| io::Error::other(format!("unexpected /proc/{pid}/stat format")))
}

/// CPU time of a process plus all its live descendants (a pipeline such as `sh -c 'tcpdump | zstd'`).
pub fn read_tree(pid: u32) -> io::Result<ProcCpu> {
    let mut total = read(pid)?;
    for child in children(pid) {
        if let Ok(c) = read_tree(child) {
            total.self_ticks += c.self_ticks;
            total.children_ticks += c.children_ticks;
        }
    }
    Ok(total)
}

fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let path = t.path().join("children");
        if let Ok(s) = fs::read_to_string(path) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fields_14_to_17_after_a_name_with_spaces() {
        // Fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
        let line = "1234 (a (b) c) S 1 1 1 0 -1 4194560 10 0 0 0 70 30 5 6 20 0 1 0";
        let c = parse_stat(line).unwrap();
        assert_eq!(c.self_ticks, 100);
        assert_eq!(c.children_ticks, 11);
    }

    #[test]
    fn own_cpu_time_grows_with_work() {
        let before = read(std::process::id()).unwrap();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 150 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let after = read(std::process::id()).unwrap();
        assert!(after.self_ticks > before.self_ticks);
    }
}
