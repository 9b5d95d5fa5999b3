//! The processes of a run: capturers started in their own process group, pinned to a CPU, stopped
//! politely (SIGINT, then SIGTERM, then SIGKILL) and reaped with `wait4`, whose rusage is the CPU the
//! process and every child it waited for used (what /usr/bin/time prints; scripts/bench/rusage.py).

use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    /// Exit code, or minus the signal that killed it.
    pub code: i32,
    /// utime + stime of the process and its waited-for children, ns.
    pub cpu_ns: u64,
    /// The signal that finally stopped it (SIGINT when it stopped politely); 0 if it exited on its own.
    pub stopped_by: i32,
}

/// A started process we own: killed and reaped on drop if still running.
pub struct Proc {
    pub pid: i32,
    /// Name (comm) of the descendant to send SIGINT to, for shell pipelines (`tcpdump` in
    /// `sh -c 'tcpdump -w - | gzip'`): stopping the producer lets the rest of the pipeline finish cleanly.
    pub stop_comm: Option<String>,
    exit: Option<Exit>,
}

/// Start `cmd` with stdout and stderr going to `log`, in its own process group (a Ctrl-C at the terminal
/// reaches only the runner, which stops its children itself), pinned to `cpu`.
pub fn spawn(
    mut cmd: Command,
    cpu: Option<usize>,
    log: &Path,
    stop_comm: Option<String>,
) -> io::Result<Proc> {
    let out = fs::File::create(log)?;
    let err = out.try_clone()?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .process_group(0);
    if let Some(cpu) = cpu {
        // SAFETY: sys::pin_thread allocates nothing and calls only sched_setaffinity (async-signal-safe).
        unsafe {
            cmd.pre_exec(move || sys::pin_thread(cpu));
        }
    }
    let child = cmd.spawn()?;
    // We reap it with wait4 ourselves (for the rusage); dropping std's Child neither waits nor kills.
    Ok(Proc {
        pid: child.id() as i32,
        stop_comm,
        exit: None,
    })
}

impl Proc {
    /// Reap the process if it has exited (non-blocking).
    pub fn poll(&mut self) -> Option<Exit> {
        if self.exit.is_none() {
            let mut status = 0;
            // SAFETY: zeroed rusage is valid; wait4 on our own child.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            let r = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut ru) };
            if r == self.pid {
                let code = if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    -libc::WTERMSIG(status)
                };
                let ns =
                    |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
                self.exit = Some(Exit {
                    code,
                    cpu_ns: ns(ru.ru_utime) + ns(ru.ru_stime),
                    stopped_by: 0,
                });
            } else if r < 0 {
                // Not our child any more (cannot happen unless reaped elsewhere): treat as gone.
                self.exit = Some(Exit {
                    code: -1,
                    cpu_ns: 0,
                    stopped_by: 0,
                });
            }
        }
        self.exit
    }

    /// Still running?
    pub fn alive(&mut self) -> bool {
        self.poll().is_none()
    }

    /// Wait until it exits or `timeout` passes.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<Exit> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(e) = self.poll() {
                return Some(e);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGINT (to the pipeline's producer if there is one), then SIGTERM, then SIGKILL to the whole group,
    /// `grace` apart; returns how it ended.
    pub fn stop(&mut self, grace: Duration) -> Exit {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
            if let Some(e) = self.poll() {
                return e;
            }
            let targets = match (&self.stop_comm, sig) {
                (Some(comm), libc::SIGINT) => {
                    let d = descendants_named(self.pid as u32, comm);
                    if d.is_empty() {
                        vec![self.pid]
                    } else {
                        d.into_iter().map(|p| p as i32).collect()
                    }
                }
                (None, libc::SIGINT) => vec![self.pid],
                // The group: children of a pipeline too.
                _ => vec![-self.pid],
            };
            for t in targets {
                // SAFETY: plain kill on a pid/group we started.
                unsafe { libc::kill(t, sig) };
            }
            if let Some(mut e) = self.wait_timeout(grace) {
                e.stopped_by = sig;
                self.exit = Some(e);
                return e;
            }
        }
        // SIGKILL cannot be ignored; the process is gone or a zombie we will reap now.
        self.wait_timeout(Duration::from_secs(5)).unwrap_or(Exit {
            code: -libc::SIGKILL,
            cpu_ns: 0,
            stopped_by: libc::SIGKILL,
        })
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.poll().is_none() {
            // SAFETY: kill the group we created, then reap.
            unsafe { libc::kill(-self.pid, libc::SIGKILL) };
            let _ = self.wait_timeout(Duration::from_secs(5));
        }
    }
}

/// Pids of `pid`'s live children (all threads).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(s) = fs::read_to_string(t.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

/// Descendants of `pid` whose comm is `name`.
fn descendants_named(pid: u32, name: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = children(pid);
    while let Some(p) = todo.pop() {
        if fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == name) {
            out.push(p);
        }
        todo.extend(children(p));
    }
    out
}

/// CPU time (ns) used so far by `pid`, its threads and its live descendants, from
/// /proc/PID/task/TID/schedstat (exact ns; /proc/PID/stat counts 10 ms ticks, too coarse to see a
/// capturer go quiet).
pub fn tree_cpu_ns(pid: u32) -> u64 {
    let mut total = 0;
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(s) = fs::read_to_string(t.path().join("schedstat")) {
                total += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    for c in children(pid) {
        total += tree_cpu_ns(c);
    }
    total
}

/// Running packet sockets in the network namespace of `pid` (/proc/PID/net/packet shows that
/// namespace's sockets; in a throwaway Rx namespace they are all our capturers').
pub fn packet_sockets(pid: u32) -> usize {
    fs::read_to_string(format!("/proc/{pid}/net/packet"))
        .map(|s| {
            s.lines()
                .skip(1)
                // Columns: sk RefCnt Type Proto Iface R Rmem User Inode; R = 1 when running.
                .filter(|l| l.split_whitespace().nth(5) == Some("1"))
                .count()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rusage_counts_the_children_of_a_pipeline_and_int_reaches_the_producer() {
        let dir = std::env::temp_dir().join(format!("ringcap-proc-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        // The producer burns CPU until SIGINT; its exit lets `cat` see EOF and the shell finish.
        let mut c = Command::new("sh");
        c.args([
            "-c",
            "python3 -c 'import signal,sys\nsignal.signal(signal.SIGINT, lambda *a: sys.exit(0))\nwhile True: pass' | cat",
        ]);
        let mut p = spawn(c, Some(0), &log, Some("python3".into())).unwrap();
        std::thread::sleep(Duration::from_millis(700));
        assert!(p.alive());
        assert!(tree_cpu_ns(p.pid as u32) > 200_000_000);
        let e = p.stop(Duration::from_secs(5));
        fs::remove_dir_all(&dir).unwrap();
        // Stopped by the first signal, exit 0, and the busy child's CPU is in the shell's rusage.
        assert_eq!((e.code, e.stopped_by), (0, libc::SIGINT));
        assert!(e.cpu_ns > 200_000_000, "{e:?}");
    }
}
