//! The harness of tests/records_auth.rs (kept apart so that file holds the tests): a `ringcap collect`
//! listening on TCP, probes (`ringcap capture --records`) on the testbed, raw sockets in the Rx namespace
//! for the attackers, and TLS certificates made by the openssl CLI.

use records::auth;
use records::batch::{self, HEADER_LEN};
use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use testbed::{Side, Testbed};

use super::collector;
use super::*;

/// Frames each probe test sends (and so the records each must store).
pub const N: u32 = 3000;

pub fn write_private(path: &Path, bytes: &[u8]) -> PathBuf {
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    path.to_path_buf()
}

/// A running `ringcap collect` listening on tcp://127.0.0.1:0 only, and the collector id it announced.
pub struct TcpCollector {
    collect: collector::Collector,
    pub tcp: SocketAddr,
    pub id: String,
}

/// Starts `cmd collect --listen tcp://127.0.0.1:0 -o OUT --json --stats-interval 0 ARGS` and reads the
/// address and collector id from its "listening on" line.
pub fn collector(mut cmd: Command, out: &Path, args: &[&str]) -> TcpCollector {
    cmd.args([
        "collect",
        "--listen",
        "tcp://127.0.0.1:0",
        "--json",
        "--stats-interval",
        "0",
        "-o",
    ])
    .arg(out)
    .args(args);
    let Announced {
        child,
        line,
        stderr,
    } = spawn_announced(cmd, "listening on");
    // "ringcap collect: listening on tcp://127.0.0.1:P (output DIR, collector id ID[, mutual TLS])"
    let tcp = line
        .split([' ', ','])
        .find_map(|w| w.strip_prefix("tcp://"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    let id = line
        .split_once("collector id ")
        .map(|(_, r)| r.split([',', ')']).next().unwrap().to_string())
        .unwrap_or_else(|| panic!("{line}"));
    TcpCollector {
        collect: collector::Collector {
            child,
            tcp: Some(tcp),
            udp: None,
            stderr,
        },
        tcp,
        id,
    }
}

impl TcpCollector {
    /// SIGINT, wait, the JSON summary and stderr (checks exit 0).
    pub fn stop_json(self) -> (serde_json::Value, String) {
        collector::stop_json(self.collect)
    }
}

pub fn rejected(v: &serde_json::Value, reason: &str) -> u64 {
    v["rejected"][reason].as_u64().unwrap_or(0)
}

/// The testbed with loopback up in the Rx namespace (collectors and attackers live there, with the probe).
pub fn rx_testbed() -> Testbed {
    let tb = testbed();
    let lo = tb
        .command(Side::Rx, "ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(lo.success());
    tb
}

pub fn rx_ringcap(tb: &Testbed) -> Command {
    tb.command(Side::Rx, ringcap().to_str().unwrap())
}

/// A running probe and all it printed on stderr (kept per child: several probes run at once).
pub struct Probe {
    child: Child,
    stderr: Arc<Mutex<String>>,
    done: std::sync::mpsc::Receiver<()>,
}

/// `ringcap capture -i RX --records DESTS -q --json EXTRA... udp` on the testbed, once it is listening.
pub fn probe(tb: &Testbed, dests: &str, extra: &[&str]) -> Probe {
    let mut child = rx_ringcap(tb)
        .args([
            "capture",
            "-i",
            &tb.rx_if,
            "--records",
            dests,
            "-q",
            "--json",
        ])
        .args(extra)
        .arg("udp")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ringcap capture");
    let stderr = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done) = std::sync::mpsc::channel();
    let pipe = child.stderr.take().unwrap();
    let all = Arc::clone(&stderr);
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if line.contains("listening on") {
                let _ = tx.send(());
            }
            let mut a = all.lock().unwrap();
            a.push_str(&line);
            a.push('\n');
        }
        let _ = done_tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("probe not listening in 20 s: {}", stderr.lock().unwrap()));
    Probe {
        child,
        stderr,
        done,
    }
}

/// Stops a probe (SIGINT) and returns its JSON summary's `records` object, `captured` and stderr.
pub fn stop_probe(mut p: Probe) -> (serde_json::Value, u64, String) {
    let status = signal_and_wait(&mut p.child, libc::SIGINT, "probe");
    let _ = p.done.recv_timeout(Duration::from_secs(5));
    let err = p.stderr.lock().unwrap().clone();
    assert!(status.success(), "probe: {err}");
    let v: serde_json::Value = err
        .lines()
        .rfind(|l| l.starts_with('{') && l.contains("\"records\""))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON summary: {err}"));
    let captured = v["captured"].as_u64().unwrap_or_else(|| panic!("{v}"));
    (v["records"].clone(), captured, err)
}

/// N distinct UDP frames, sent from the Tx side.
pub fn send_frames(tb: &Testbed) {
    let frames: Vec<Vec<u8>> = varied_frames(0, N, 300);
    send(tb, &frames);
    std::thread::sleep(Duration::from_millis(700));
}

/// A thread inside the Rx namespace serving a listener on 127.0.0.1 with `serve` per connection (one at a
/// time) until `stop`.
pub fn rx_server(
    tb: &Testbed,
    stop: Arc<AtomicBool>,
    serve: impl Fn(TcpStream) + Send + 'static,
) -> (SocketAddr, JoinHandle<()>) {
    let ns = tb.ns(Side::Rx).to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        testbed::enter_netns(&ns).expect("enter rx netns");
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        tx.send(l.local_addr().unwrap()).unwrap();
        while !stop.load(Relaxed) {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
                    serve(s);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (rx.recv().unwrap(), h)
}

/// Runs `f` on a thread inside the Rx namespace.
pub fn in_rx<T: Send + 'static>(
    tb: &Testbed,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    let ns = tb.ns(Side::Rx).to_string();
    std::thread::spawn(move || {
        testbed::enter_netns(&ns).expect("enter rx netns");
        f()
    })
}

/// The collector's reply to a hello, read off `s`: fixed part, id, tag.
pub fn read_server_reply(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut fixed = [0u8; auth::SERVER_FIXED_LEN];
    s.read_exact(&mut fixed)?;
    let mut rest = vec![0u8; fixed[5] as usize + batch::TAG_LEN];
    s.read_exact(&mut rest)?;
    let mut all = fixed.to_vec();
    all.extend_from_slice(&rest);
    Ok(all)
}

/// Reads one whole batch off `s` (None at EOF or on garbage).
pub fn read_batch(s: &mut impl Read) -> Option<Vec<u8>> {
    let mut b = vec![0u8; HEADER_LEN];
    s.read_exact(&mut b).ok()?;
    let n = batch::batch_len(&b).ok()?;
    b.resize(n, 0);
    s.read_exact(&mut b[HEADER_LEN..]).ok()?;
    Some(b)
}

/// True when the peer closes `s` (EOF or reset) within `within`, reading and discarding what it sends.
pub fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let end = Instant::now() + within;
    let mut buf = [0u8; 256];
    while Instant::now() < end {
        s.set_read_timeout(Some((end - Instant::now()).max(Duration::from_millis(10))))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => {}
        }
    }
    false
}

/// A TCP connection from `src` (any 127/8 address is local on Linux) to `dst`.
pub fn connect_from(src: Ipv4Addr, dst: SocketAddr) -> std::io::Result<TcpStream> {
    let SocketAddr::V4(dst) = dst else {
        panic!("IPv4 only")
    };
    let sa = |a: SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a fresh socket, bound and connected with valid sockaddr_in values; the fd is owned by the
    // TcpStream from then on (closed on error paths).
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let s = TcpStream::from_raw_fd(fd);
        let src = sa(SocketAddrV4::new(src, 0));
        if libc::bind(fd, (&src as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let d = sa(dst);
        if libc::connect(fd, (&d as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(s)
    }
}

/// `openssl ARGS` in `dir`, which must succeed.
pub fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl (make deps installs it)");
    assert!(o.status.success(), "openssl {args:?}: {}", stderr_text(&o));
}

/// A CA, and certificates it signs: the collector's (for IP 127.0.0.1) and a probe's client certificate.
pub fn make_certs(dir: &Path) {
    make_pki(
        dir,
        &[
            (
                "collector",
                "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
            ),
            (
                "probe",
                "subjectAltName=DNS:probe1\nextendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
            ),
        ],
    );
}

/// A CA (`ca.pem`, `ca.key`) and, for each (name, openssl extensions), `name.pem` and `name.key`
/// (0600) it signs, in `dir`.
pub fn make_pki(dir: &Path, leaves: &[(&str, &str)]) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let ca = [
        &["req", "-x509"][..],
        &ec,
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=ringcap test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    ]
    .concat();
    openssl(dir, &ca);
    for &(name, ext) in leaves {
        let (key, csr, pem, extf) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        std::fs::write(dir.join(&extf), ext).unwrap();
        openssl(
            dir,
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    &key,
                    "-out",
                    &csr,
                    "-subj",
                    &format!("/CN={name}"),
                ],
            ]
            .concat(),
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &extf,
            ],
        );
        std::fs::set_permissions(
            dir.join(&key),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
    }
}
