//! Raw disk write speed (seed 000 §6.3.5, Fig 6.13; the thesis used bonnie++'s sequential block write):
//! write a file of the plan's `[disk] write_mib` into its `disk_dir` in blocks of each size, fdatasync it
//! (so the time is the disk's, not the page cache's), and time it. The writer's CPU time over the elapsed
//! time is bonnie++'s %CPU; the machine's busy share (neither idle nor waiting for I/O) is kept next to it,
//! as writeback also runs in kernel threads. Written to `disk.json` before the plan's runs.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::cpusage::{read_proc_stat, Usage};

/// One timed write of the file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiskSample {
    pub block_kib: u64,
    pub rerun: u32,
    /// Bytes written (the file's size).
    pub bytes: u64,
    /// From the first write to the end of fdatasync.
    pub seconds: f64,
    /// Write speed in MB/s (10^6 bytes, as the thesis's 13.56 Mbytes/s demand).
    pub mb_per_s: f64,
    /// The writing thread's user + system time over the elapsed time, % of one CPU.
    pub writer_cpu_pct: f64,
    /// The machine's CPUs neither idle nor in iowait, % of all CPUs.
    pub machine_busy_pct: f64,
}

/// CPU time (user + system) of the calling thread, in seconds.
fn thread_cpu_s() -> f64 {
    // SAFETY: getrusage fills the zeroed struct; RUSAGE_THREAD is Linux's per-thread usage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Write `bytes` to a new file in `dir` in blocks of `block_kib` KiB, fdatasync, time it, delete the file.
pub fn measure(dir: &Path, block_kib: u64, bytes: u64, rerun: u32) -> io::Result<DiskSample> {
    fs::create_dir_all(dir)?;
    let path = dir.join(format!("disk-write-{}.tmp", std::process::id()));
    // Pseudo-random contents: a filesystem that compresses or dedups zeros would report a fake speed.
    let block_len = (block_kib * 1024) as usize;
    let mut block = vec![0u8; block_len];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ block_kib;
    for chunk in block.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)?;
    let result = (|| {
        let stat0 = read_proc_stat()?;
        let cpu0 = thread_cpu_s();
        let t0 = Instant::now();
        let mut left = bytes;
        while left > 0 {
            let n = left.min(block_len as u64) as usize;
            file.write_all(&block[..n])?;
            left -= n as u64;
        }
        file.sync_data()?;
        let seconds = t0.elapsed().as_secs_f64();
        let cpu = thread_cpu_s() - cpu0;
        let stat1 = read_proc_stat()?;
        let busy = Usage::between(&stat0.all, &stat1.all).map_or(0.0, |u| {
            (u.busy() - u.get("iowait").unwrap_or(0.0)).max(0.0)
        });
        Ok(DiskSample {
            block_kib,
            rerun,
            bytes,
            seconds,
            mb_per_s: bytes as f64 / seconds / 1e6,
            writer_cpu_pct: 100.0 * cpu / seconds,
            machine_busy_pct: busy,
        })
    })();
    drop(file);
    let _ = fs::remove_file(&path);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes this process has sent to storage, by the kernel's I/O accounting (/proc/self/io).
    fn storage_write_bytes() -> u64 {
        std::fs::read_to_string("/proc/self/io")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("write_bytes: ")?.trim().parse().ok())
            .unwrap()
    }

    /// The kernel counts at least the file's bytes as written to storage (not only to the page cache),
    /// and the file is gone afterwards.
    #[test]
    fn measure_writes_the_file_to_storage() {
        let dir = std::path::Path::new("/var/tmp/ringcap-lab-disk-test");
        let before = storage_write_bytes();
        let s = measure(dir, 64, 8 << 20, 0).unwrap();
        let written = storage_write_bytes() - before;
        assert!(written >= 8 << 20, "kernel counted {written} bytes");
        assert_eq!((s.bytes, s.block_kib), (8 << 20, 64));
        assert!(s.seconds > 0.0 && s.mb_per_s.is_finite());
        assert!((0.0..=100.0).contains(&s.machine_busy_pct));
        assert_eq!(
            std::fs::read_dir(dir).unwrap().count(),
            0,
            "file left behind"
        );
        let _ = std::fs::remove_dir(dir);
    }
}
