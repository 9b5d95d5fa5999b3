//! A CPU budget for the capturers (issue 14): a fresh cgroup per run with a CFS bandwidth quota, on cgroup v2
//! (`cpu.max`) or v1 (`cpu.cfs_quota_us` / `cpu.cfs_period_us`), whichever has the cpu controller here. The
//! capturer enters the cgroup itself between fork and exec, so it never captures a packet unlimited; its
//! children inherit the cgroup. `cpu.stat` (throttled periods and time) is read back before the cgroup is
//! removed: it shows that the quota bit.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Parent of the per-run cgroups, under the cpu controller's root.
const PARENT: &str = "ringcap-lab";

/// Which cgroup interface has the cpu controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// The cpu controller's mount point and interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuController {
    pub version: Version,
    pub root: PathBuf,
}

/// Find the cpu controller in /proc/self/mountinfo: a cgroup2 mount whose `cgroup.controllers` lists `cpu`
/// (preferred), else a v1 `cgroup` mount with the `cpu` option.
pub fn cpu_controller() -> io::Result<CpuController> {
    let info = fs::read_to_string("/proc/self/mountinfo")?;
    let mut v1 = None;
    for line in info.lines() {
        // Fields: ... mount-point(5th) ... " - " fstype source super-options.
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mount) = pre.split_whitespace().nth(4) else {
            continue;
        };
        let mut post = post.split_whitespace();
        let fstype = post.next().unwrap_or("");
        let opts = post.nth(1).unwrap_or("");
        let root = PathBuf::from(mount);
        if fstype == "cgroup2" {
            let controllers =
                fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "cpu") {
                return Ok(CpuController {
                    version: Version::V2,
                    root,
                });
            }
        } else if fstype == "cgroup" && opts.split(',').any(|o| o == "cpu") && v1.is_none() {
            v1 = Some(CpuController {
                version: Version::V1,
                root,
            });
        }
    }
    v1.ok_or_else(|| {
        io::Error::other(
            "no cgroup cpu controller is mounted (neither cgroup2 with `cpu` in cgroup.controllers nor a \
             cgroup v1 `cpu` hierarchy): mount one to use cpu_limit",
        )
    })
}

/// CFS period and quota (µs) for `percent` of one CPU. A 10 ms period (not the kernel's 100 ms) keeps the
/// throttled pauses short, closer to a slower CPU than to a CPU that stops for 90 ms; below 10 % the
/// kernel's 1 ms minimum quota needs the 100 ms period.
pub fn period_quota_us(percent: u32) -> (u64, u64) {
    let period = if percent >= 10 { 10_000 } else { 100_000 };
    (period, period * percent as u64 / 100)
}

/// Throttling counters from `cpu.stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuStat {
    /// Enforcement periods in which the group had runnable tasks.
    pub nr_periods: u64,
    /// Periods in which it ran out of quota.
    pub nr_throttled: u64,
    /// Total time its tasks waited throttled, seconds.
    pub throttled_s: f64,
}

/// Parse `cpu.stat` of either version (v1: `throttled_time` in ns; v2: `throttled_usec`).
pub fn parse_cpu_stat(text: &str) -> CpuStat {
    let mut s = CpuStat::default();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let (Some(k), Some(Ok(v))) = (w.next(), w.next().map(str::parse::<u64>)) else {
            continue;
        };
        match k {
            "nr_periods" => s.nr_periods = v,
            "nr_throttled" => s.nr_throttled = v,
            "throttled_time" => s.throttled_s = v as f64 / 1e9,
            "throttled_usec" => s.throttled_s = v as f64 / 1e6,
            _ => {}
        }
    }
    s
}

/// A cgroup with a CPU quota; removed on drop (after its processes have gone).
pub struct CpuLimit {
    pub dir: PathBuf,
    pub percent: u32,
    /// `DIR/cgroup.procs`, ready for the child to write between fork and exec (no allocation there).
    procs: CString,
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    fs::write(path, value).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot write {value:?} to {}: {e}", path.display()),
        )
    })
}

impl CpuLimit {
    /// Make `<root>/ringcap-lab/<name>` with a quota of `percent` of one CPU.
    pub fn create(name: &str, percent: u32) -> io::Result<CpuLimit> {
        if percent == 0 {
            return Err(io::Error::other("a CPU limit of 0 % cannot run anything"));
        }
        let ctl = cpu_controller()?;
        let parent = ctl.root.join(PARENT);
        fs::create_dir_all(&parent).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create {} ({e}): needs root", parent.display()),
            )
        })?;
        if ctl.version == Version::V2 {
            // Children of a v2 group get the cpu files only when the parent delegates the controller.
            for dir in [&ctl.root, &parent] {
                let have =
                    fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
                if !have.split_whitespace().any(|c| c == "cpu") {
                    write(&dir.join("cgroup.subtree_control"), "+cpu")?;
                }
            }
        }
        let dir = parent.join(name);
        let _ = fs::remove_dir(&dir);
        fs::create_dir(&dir).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))
        })?;
        let limit = CpuLimit {
            procs: CString::new(dir.join("cgroup.procs").as_os_str().as_encoded_bytes())
                .map_err(|_| io::Error::other("cgroup path contains a NUL byte"))?,
            dir,
            percent,
        };
        let (period, quota) = period_quota_us(percent);
        match ctl.version {
            Version::V2 => write(&limit.dir.join("cpu.max"), &format!("{quota} {period}"))?,
            Version::V1 => {
                // Period first: a quota above the old period's limits could be refused otherwise.
                write(&limit.dir.join("cpu.cfs_period_us"), &period.to_string())?;
                write(&limit.dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
            }
        }
        Ok(limit)
    }

    /// Make `cmd`'s process join this cgroup before it execs (writing "0" to cgroup.procs moves the writer).
    pub fn enter_on_exec(&self, cmd: &mut Command) {
        let path = self.procs.clone();
        // SAFETY: open/write/close are async-signal-safe and nothing is allocated in the child.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
                let err = io::Error::last_os_error();
                libc::close(fd);
                if ok {
                    Ok(())
                } else {
                    Err(err)
                }
            });
        }
    }

    /// The throttling counters so far.
    pub fn stat(&self) -> io::Result<CpuStat> {
        Ok(parse_cpu_stat(&fs::read_to_string(
            self.dir.join("cpu.stat"),
        )?))
    }
}

impl Drop for CpuLimit {
    fn drop(&mut self) {
        // rmdir fails while a process is still in the group (a zombie being reaped): retry briefly.
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The shared parent goes when no other run (or concurrent bench) uses it.
        if let Some(parent) = self.dir.parent() {
            let _ = fs::remove_dir(parent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::process;

    #[test]
    fn cpu_stat_of_both_versions() {
        let v1 = "nr_periods 12\nnr_throttled 7\nthrottled_time 450000000\nnr_bursts 0\n";
        assert_eq!(
            parse_cpu_stat(v1),
            CpuStat {
                nr_periods: 12,
                nr_throttled: 7,
                throttled_s: 0.45
            }
        );
        let v2 = "usage_usec 9\nuser_usec 5\nsystem_usec 4\nnr_periods 3\nnr_throttled 2\nthrottled_usec 1500\n";
        assert_eq!(
            parse_cpu_stat(v2),
            CpuStat {
                nr_periods: 3,
                nr_throttled: 2,
                throttled_s: 0.0015
            }
        );
        assert_eq!(period_quota_us(25), (10_000, 2_500));
        assert_eq!(period_quota_us(5), (100_000, 5_000));
    }

    /// A process spinning for 2 s of wall time in a 10 % group gets about 0.2 s of CPU (its own rusage from
    /// wait4), and the kernel's files show the quota that was set and the periods it was throttled in.
    #[test]
    fn busy_child_gets_its_quota() {
        if unsafe { libc::geteuid() } != 0 {
            testbed::skip("cgroups need root");
            return;
        }
        let limit = match CpuLimit::create(&format!("test-{}", std::process::id()), 10) {
            Ok(l) => l,
            Err(e) => {
                testbed::skip(&format!("no cgroup with a cpu controller: {e}"));
                return;
            }
        };
        let ctl = cpu_controller().unwrap();
        let quota = match ctl.version {
            Version::V2 => fs::read_to_string(limit.dir.join("cpu.max")).unwrap(),
            Version::V1 => format!(
                "{} {}",
                fs::read_to_string(limit.dir.join("cpu.cfs_quota_us"))
                    .unwrap()
                    .trim(),
                fs::read_to_string(limit.dir.join("cpu.cfs_period_us"))
                    .unwrap()
                    .trim()
            ),
        };
        assert_eq!(quota.trim(), "1000 10000");

        let dir = std::env::temp_dir().join(format!("ringcap-cg-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "while :; do :; done"]);
        limit.enter_on_exec(&mut cmd);
        let mut p = process::spawn(cmd, Some(0), &dir.join("log"), None).unwrap();
        let wall = Duration::from_secs(2);
        std::thread::sleep(wall);
        let in_group = fs::read_to_string(limit.dir.join("cgroup.procs")).unwrap();
        let exit = p.stop(Duration::from_millis(500));
        let stat = fs::read_to_string(limit.dir.join("cpu.stat")).unwrap();
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(
            in_group.trim(),
            p.pid.to_string(),
            "the child joined before exec"
        );
        // Its own CPU time (rusage from wait4): 10 % of 2 s (+ the start-up and the stop's grace).
        let cpu_s = exit.cpu_ns as f64 / 1e9;
        assert!(
            (0.14..0.3).contains(&cpu_s),
            "{cpu_s} s of CPU in 2 s at 10 %"
        );
        let s = parse_cpu_stat(&stat);
        // 2 s of 10 ms periods, busy in every one of them: ~200 periods, (nearly) all throttled.
        assert!(
            s.nr_periods >= 100 && s.nr_throttled as f64 >= 0.5 * s.nr_periods as f64,
            "{stat}"
        );
        // Busy for 2 s, allowed 0.2 s: it waited throttled most of the time.
        assert!(s.throttled_s > 1.0, "{stat}");
    }
}
