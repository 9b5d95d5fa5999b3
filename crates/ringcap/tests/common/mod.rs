//! Shared by the binary's end-to-end tests: run the real `ringcap` inside a testbed namespace and send
//! real frames from the other one.
#![allow(dead_code)]

pub mod auth_harness;
pub mod collector;
pub mod disk;
pub mod stores;
pub mod tunnels;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use testbed::{Side, Testbed, TestbedOptions};

pub const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub const SRC_MAC: [u8; 6] = [0, 0, 0, 0, 0, 0x01];

pub fn ringcap() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ringcap"))
}

pub fn testbed() -> Testbed {
    Testbed::new(TestbedOptions::default()).expect("testbed (needs root)")
}

/// `ringcap ARGS` inside the Rx namespace.
pub fn ringcap_rx(tb: &Testbed, args: &[&str]) -> Command {
    let mut c = tb.command(Side::Rx, ringcap().to_str().unwrap());
    c.args(args);
    c
}

/// A UDP/IPv4 frame to a non-local MAC whose payload carries `seq`, `len` bytes long (≥ 60).
pub fn frame(seq: u32, src_port: u16, dst_port: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(60)];
    let ip_len = (f.len() - 14) as u16;
    f[0..6].copy_from_slice(&DST_MAC);
    f[6..12].copy_from_slice(&SRC_MAC);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[6] = 0x40;
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 77, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 77, 0, 2]);
    let mut sum: u32 = ip
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f[34..36].copy_from_slice(&src_port.to_be_bytes());
    f[36..38].copy_from_slice(&dst_port.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f[42..46].copy_from_slice(&seq.to_be_bytes());
    f
}

/// Frames `first..first + n` (each carrying its number), distinct and varied: source ports cycle over 7
/// values, destination ports over 11, lengths from 60 to 60 + `len_spread` - 1.
pub fn varied_frames(first: u32, n: u32, len_spread: u32) -> Vec<Vec<u8>> {
    (first..first + n)
        .map(|i| {
            frame(
                i,
                1000 + (i % 7) as u16,
                2000 + (i % 11) as u16,
                60 + (i % len_spread) as usize,
            )
        })
        .collect()
}

/// A UDP/IPv6 frame (no extension header) to `dst_port`, to the same non-local MAC as [`frame`].
pub fn ipv6_frame(seq: u32, dst_port: u16) -> Vec<u8> {
    let mut f = frame(seq, 1000, dst_port, 70);
    let udp: Vec<u8> = f[34..42].to_vec();
    let mut v6 = f[..12].to_vec();
    v6.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 16, 17, 64]);
    v6.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    v6.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    v6.extend_from_slice(&udp[..4]);
    v6.extend_from_slice(&[0, 16, 0, 0]);
    v6.extend_from_slice(&seq.to_be_bytes());
    v6.extend_from_slice(&[0; 4]);
    f = v6;
    f
}

/// A classic pcap file of `frames` (Ethernet, microsecond stamps 0), written without ringcap's code.
pub fn write_pcap(path: &std::path::Path, frames: &[Vec<u8>]) {
    let mut b = Vec::new();
    for v in [0xa1b2c3d4u32, 0x0004_0002, 0, 0, 262144, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    // The version is two u16 (2, 4), written above as one little-endian u32 0x00040002.
    for (i, f) in frames.iter().enumerate() {
        for v in [i as u32, 0, f.len() as u32, f.len() as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

/// Send frames from the Tx side with a plain packet socket, waiting out a full queue.
pub fn send(tb: &Testbed, frames: &[Vec<u8>]) {
    send_on(tb, &tb.tx_if, frames)
}

/// [`send`] through another interface of the Tx namespace.
pub fn send_on(tb: &Testbed, ifname: &str, frames: &[Vec<u8>]) {
    let ifname = ifname.to_string();
    tb.run_in(Side::Tx, move || {
        // SAFETY: plain socket calls with valid arguments.
        unsafe {
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let fd = OwnedFd::from_raw_fd(fd);
            let name = std::ffi::CString::new(ifname).unwrap();
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
            addr.sll_halen = 6;
            for f in frames {
                loop {
                    let r = libc::sendto(
                        fd.as_raw_fd(),
                        f.as_ptr().cast(),
                        f.len(),
                        0,
                        (&addr as *const libc::sockaddr_ll).cast(),
                        std::mem::size_of::<libc::sockaddr_ll>() as u32,
                    );
                    if r >= 0 {
                        break;
                    }
                    let e = std::io::Error::last_os_error();
                    match e.raw_os_error() {
                        Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {
                            std::thread::sleep(Duration::from_micros(50))
                        }
                        _ => panic!("sendto: {e}"),
                    }
                }
            }
        }
    });
}

/// Start a capture and wait until it says it is listening (its socket exists before that line).
pub fn spawn_capture(tb: &Testbed, args: &[&str]) -> Child {
    spawn_listening(ringcap_rx(tb, args))
}

/// Start `cmd` (a ringcap capture, however launched) and wait until it says it is listening.
pub fn spawn_listening(mut cmd: Command) -> Child {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ringcap");
    // Read stderr until the "listening" line, then keep draining it in the background.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        let mut said = false;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            all.push_str(&line);
            all.push('\n');
            if !said && line.contains("listening on") {
                said = true;
                let _ = tx.send(None);
            }
        }
        let _ = tx.send(Some(all));
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(None) => {}
        Ok(Some(all)) => panic!("ringcap ended before listening: {all}"),
        Err(_) => panic!("ringcap did not start listening in 20 s"),
    }
    STDERR.with(|s| *s.borrow_mut() = Some(rx));
    child
}

/// A running child whose stderr is gathered in the background, and the line that announced it was ready.
pub struct Announced {
    pub child: Child,
    pub line: String,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

/// Starts `cmd` (stdout and stderr piped) and waits up to 20 s for a stderr line containing `marker`
/// (e.g. a collector's "listening on" line, which names its addresses).
pub fn spawn_announced(mut cmd: Command, marker: &str) -> Announced {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ringcap");
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let pipe = child.stderr.take().unwrap();
    let all = std::sync::Arc::clone(&stderr);
    let marker = marker.to_string();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            if line.contains(&marker) {
                let _ = tx.send(line.clone());
            }
            let mut a = all.lock().unwrap();
            a.push_str(&line);
            a.push('\n');
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("not ready in 20 s: {}", stderr.lock().unwrap()));
    Announced {
        child,
        line,
        stderr,
    }
}

thread_local! {
    static STDERR: std::cell::RefCell<Option<std::sync::mpsc::Receiver<Option<String>>>> = const { std::cell::RefCell::new(None) };
}

/// Send SIGINT/SIGTERM and collect status, stdout and stderr.
pub fn stop(mut child: Child, sig: i32) -> Output {
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, sig) };
    finish(&mut child)
}

/// Sends `sig` to `child` and waits for it to exit (failing the test after 30 s, naming it `what`).
pub fn signal_and_wait(child: &mut Child, sig: i32, what: &str) -> std::process::ExitStatus {
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, sig) };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "{what} did not exit in 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait for the child (at most 30 s) and collect what it printed.
pub fn finish(child: &mut Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ringcap did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    collect(child, status)
}

/// Send `sig`, wait for the child (at most 30 s) and collect what it printed plus the CPU time (user +
/// system, all threads) the kernel accounted to it, from wait4's rusage.
pub fn stop_with_cpu(mut child: Child, sig: i32) -> (Output, Duration) {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as i32;
    // SAFETY: kill and wait4 on our own child's pid, with valid out-pointers.
    let (status, ru) = unsafe {
        libc::kill(pid, sig);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut status = 0;
        let mut ru: libc::rusage = std::mem::zeroed();
        loop {
            let r = libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru);
            assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
            if r == pid {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("ringcap did not exit within 30 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (status, ru)
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let cpu = tv(ru.ru_utime) + tv(ru.ru_stime);
    (
        collect(&mut child, std::process::ExitStatus::from_raw(status)),
        cpu,
    )
}

/// The exit status plus everything the child wrote on stdout and stderr (stderr is drained by
/// [`spawn_capture`]'s thread).
fn collect(child: &mut Child, status: std::process::ExitStatus) -> Output {
    let mut stdout = Vec::new();
    if let Some(mut o) = child.stdout.take() {
        use std::io::Read;
        let _ = o.read_to_end(&mut stdout);
    }
    let stderr = STDERR
        .with(|s| s.borrow_mut().take())
        .and_then(|rx| loop {
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(Some(all)) => break Some(all),
                Ok(None) => continue,
                Err(_) => break None,
            }
        })
        .unwrap_or_default();
    Output {
        status,
        stdout,
        stderr: stderr.into_bytes(),
    }
}

/// Number of packets in a capture file according to capinfos (Wireshark's tool).
pub fn capinfos_count(path: &std::path::Path) -> u64 {
    let out = Command::new("capinfos")
        .args(["-M", "-c"])
        .arg(path)
        .output()
        .expect("capinfos (install tshark)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "capinfos failed on {}: {}{}",
        path.display(),
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| l.strip_prefix("Number of packets:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no packet count in capinfos output: {text}"))
}

/// tshark's decode of a capture file: per packet, the value of each field (first occurrence; "" when the
/// packet has none).
pub fn tshark_fields(path: &std::path::Path, fields: &[&str]) -> Vec<Vec<String>> {
    let mut c = Command::new("tshark");
    c.arg("-r").arg(path).args([
        "-n",
        "-T",
        "fields",
        "-E",
        "separator=\t",
        "-E",
        "occurrence=f",
    ]);
    for f in fields {
        c.args(["-e", f]);
    }
    let out = c.output().expect("tshark (make deps installs it)");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// Every packet of a file as (wire_len, bytes), read with ringcap's own reader.
pub fn read_all(path: &std::path::Path) -> Vec<(u32, Vec<u8>)> {
    let mut r = store::open_capture(path).expect("open capture");
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("read");
        v.push((p.wire_len, p.data.to_vec()));
    }
    v
}

pub fn stderr_text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory on the real disk (O_DIRECT works there; tmpfs refuses it).
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = PathBuf::from(format!(
        "/var/tmp/ringcap-test-{}-{tag}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `ringcap capture -i <rx end> -w FILE -q EXTRA...` (a filter expression goes last in EXTRA), listening.
pub fn capture_to_file(tb: &Testbed, file: &std::path::Path, extra: &[&str]) -> Child {
    let mut args = vec![
        "capture",
        "-i",
        &tb.rx_if,
        "-w",
        file.to_str().unwrap(),
        "-q",
    ];
    args.extend_from_slice(extra);
    spawn_capture(tb, &args)
}

#[allow(unused_imports)] // not every test binary skips
pub use testbed::skip;

/// Whether an external program is installed; skips (fails under CI) when not.
pub fn have(tool: &str) -> bool {
    testbed::have(
        tool,
        "`make deps` installs tcpdump and tshark; python3 comes with Debian",
    )
}

/// Number of packets `tcpdump -r` reads from a capture file (one line each with -q).
pub fn tcpdump_count(path: &std::path::Path) -> usize {
    let out = Command::new("tcpdump")
        .args(["-nn", "-q", "-r"])
        .arg(path)
        .output()
        .expect("tcpdump (make deps installs it)");
    assert!(
        out.status.success(),
        "tcpdump -r {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// Runs a Python snippet and returns its stdout without the trailing newline; DuckDB and pyarrow come from
/// requirements-test.txt (`make deps`).
pub fn python(code: &str) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(code)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python failed (install the test requirements: pip install -r requirements-test.txt): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// Rows of every Parquet file in `dir`, counted by DuckDB.
pub fn duckdb_rows(dir: &std::path::Path) -> u64 {
    python(&format!(
        "import duckdb; print(duckdb.sql(\"SELECT count(*) FROM read_parquet('{}/*.parquet')\").fetchall()[0][0])",
        dir.display()
    ))
    .parse()
    .unwrap()
}

/// Traffic for `udp and dst port 9000` on `--source xdp`: matching UDP/IPv4 of varied sizes, UDP/IPv4 to other
/// ports and from port 9000, frames that are not IP at all (the XDP prefilter leaves those to the stack), and
/// UDP/IPv6 to `ipv6_dst_port` (which the prefilter never judges), interleaved.
pub fn prefilter_traffic(ipv6_dst_port: u16) -> Vec<Vec<u8>> {
    (0..4000u32)
        .map(|i| match i % 8 {
            0 | 1 => frame(i, 1000 + (i % 50) as u16, 9000, 60 + (i as usize % 200)),
            2..=4 => frame(i, 1000, 9001 + (i % 3) as u16, 60),
            5 => frame(i, 9000, 9005, 80),
            6 => {
                let mut f = frame(i, 1, 2, 60);
                f[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental EtherType
                f
            }
            _ => ipv6_frame(i, ipv6_dst_port),
        })
        .collect()
}
