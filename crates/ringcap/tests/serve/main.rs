//! `ringcap serve` end to end, with real clients: a store written by a testbed capture is queried
//! with curl over HTTPS with client certificates made by the openssl CLI, and the pcap that comes
//! back must hold exactly the packets `tcpdump -r` finds in the same files with the same
//! expression (compared byte for byte, as tcpdump -xx decodes both). Clients without a
//! certificate or with one from another CA are refused in the handshake; bad expressions get
//! 400 with libpcap's words; plain HTTP works on loopback only; a busy server says 503.

mod answers;
#[path = "../common/mod.rs"]
mod common;
mod hostile;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::stores::*;
use common::*;
use testbed::{Side, Testbed};

/// A certificate authority, or a certificate and key it signed, as PEM files in one directory.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        Pki {
            dir: dir.to_path_buf(),
        }
    }

    fn pem(&self, name: &str) -> String {
        self.dir.join(format!("{name}.pem")).display().to_string()
    }

    fn key(&self, name: &str) -> String {
        self.dir.join(format!("{name}.key")).display().to_string()
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A self-signed CA: NAME.pem and NAME.key.
    fn ca(&self, name: &str) {
        let subject = format!("/CN=ringcap test CA {name}");
        self.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &self.key(name),
            "-out",
            &self.pem(name),
            "-days",
            "2",
            "-subj",
            &subject,
        ]);
    }

    /// A certificate for `name` signed by `ca`: for the server (IP 127.0.0.1) or a client.
    fn cert(&self, name: &str, ca: &str, server: bool) {
        let csr = self.dir.join(format!("{name}.csr")).display().to_string();
        let ext = self.dir.join(format!("{name}.ext"));
        let usage = if server {
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
        } else {
            "extendedKeyUsage=clientAuth\n"
        };
        std::fs::write(&ext, format!("basicConstraints=CA:FALSE\n{usage}")).unwrap();
        let subject = format!("/CN={name}");
        self.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &self.key(name),
            "-out",
            &csr,
            "-subj",
            &subject,
        ]);
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &self.pem(ca),
            "-CAkey",
            &self.key(ca),
            "-CAcreateserial",
            "-out",
            &self.pem(name),
            "-days",
            "2",
            "-extfile",
            ext.to_str().unwrap(),
        ]);
        chmod(Path::new(&self.key(name)), 0o600);
    }
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The running server, killed if a check fails before it is stopped, so a failed run leaves no
/// server behind.
struct Server(Option<std::process::Child>);

impl Server {
    fn stop(mut self, sig: i32) -> Output {
        stop(self.0.take().expect("running"), sig)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What curl did: its exit status, the HTTP status it saw (0: none) and its error text.
struct Curl {
    output: Output,
    http: u32,
}

impl Curl {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
}

/// `curl -sS ARGS -w %{http_code}` inside the Rx namespace (where the server listens).
fn curl(tb: &Testbed, args: &[&str]) -> Curl {
    let output = tb
        .command(Side::Rx, "curl")
        .args(["-sS", "--max-time", "60", "-w", "%{http_code}"])
        .args(args)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&output.stdout);
    let http = text.trim().parse().unwrap_or(0);
    Curl { output, http }
}

/// The packets of a pcap file as tcpdump decodes them.
fn decoded(pcap: &Path) -> Vec<(u64, String)> {
    decode(&sh(&format!(
        "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null",
        pcap.display()
    )))
}

fn stamp(ns: u64) -> String {
    format!("@{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The expressions compared with tcpdump: index-narrowed, a VLAN, one the index cannot narrow,
/// and a host within a time window (stenographer's `after`/`before` terms).
fn expressions(files: &[PathBuf]) -> Vec<(String, Vec<(u64, String)>)> {
    let all = expected(files, "", 0, u64::MAX);
    assert!(all.len() > 1000, "only {} packets in the store", all.len());
    let (t0, t1) = (all[all.len() / 3].0, all[2 * all.len() / 3].0);
    let mut v: Vec<(String, Vec<(u64, String)>)> = [
        "host 10.0.0.7 and port 1003",
        "vlan 100 and host 10.0.0.9",
        "udp[8] & 1 = 1",
    ]
    .iter()
    .map(|e| (e.to_string(), expected(files, e, 0, u64::MAX)))
    .collect();
    v.push((
        format!(
            "host 10.0.0.5 and after {} and before {}",
            stamp(t0),
            stamp(t1)
        ),
        expected(files, "host 10.0.0.5", t0, t1),
    ));
    v
}

/// What tcpdump itself says of a bad expression (its message, without "tcpdump: ").
fn tcpdump_error(expr: &str) -> String {
    let out = Command::new("tcpdump")
        .args(["-d", expr])
        .output()
        .expect("tcpdump");
    assert!(!out.status.success(), "tcpdump accepted {expr}");
    let text = String::from_utf8_lossy(&out.stderr);
    text.lines()
        .last()
        .unwrap_or("")
        .trim_start_matches("tcpdump: ")
        .to_string()
}

/// Connects to `addr` in the Rx namespace, sends `bytes`, then waits for the server to end the
/// connection: what it answered, and when.
fn silent_peer(tb: &Testbed, addr: &str, bytes: &[u8]) -> (String, Duration) {
    use std::io::{Read, Write};
    let (addr, bytes) = (addr.to_string(), bytes.to_vec());
    tb.run_in(Side::Rx, move || {
        let started = Instant::now();
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(&bytes).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        (
            String::from_utf8_lossy(&out).into_owned(),
            started.elapsed(),
        )
    })
}

fn read_text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}
