//! The link type follows the interface, as in libpcap: loopback frames are Ethernet, a tun device's are raw
//! IP. ringcap and tcpdump capture the same datagrams side by side; their files must read back the same
//! (header link type and every decoded byte), and the filter must select on the right offsets. A hardware
//! type ringcap cannot capture is refused by name.

mod common;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use testbed::{Side, Testbed};

const PORT: u16 = 9999;
const COUNT: usize = 10;

fn ip(tb: &Testbed, args: &str) {
    let st = tb
        .command(Side::Rx, "ip")
        .args(args.split_whitespace())
        .status()
        .unwrap();
    assert!(st.success(), "ip {args}");
}

/// Creates the tun device `name` in the Rx namespace and returns the fd that keeps it (and its carrier) up.
fn tun(tb: &Testbed, name: &str, arphrd: Option<u16>) -> OwnedFd {
    const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
    const TUNSETLINK: libc::c_ulong = 0x4004_54cd;
    let name = name.to_string();
    tb.run_in(Side::Rx, move || {
        // SAFETY: open/ioctl with a valid path and a zeroed ifreq whose name fits.
        unsafe {
            let fd = libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            assert!(fd >= 0, "/dev/net/tun: {}", std::io::Error::last_os_error());
            let fd = OwnedFd::from_raw_fd(fd);
            let mut req: libc::ifreq = std::mem::zeroed();
            for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
                *d = s as libc::c_char;
            }
            req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
            let r = libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req);
            assert!(r == 0, "TUNSETIFF: {}", std::io::Error::last_os_error());
            if let Some(t) = arphrd {
                let r = libc::ioctl(fd.as_raw_fd(), TUNSETLINK, t as libc::c_ulong);
                assert!(r == 0, "TUNSETLINK: {}", std::io::Error::last_os_error());
            }
            fd
        }
    })
}

/// tcpdump on `iface` in the Rx namespace, writing `out`; returns once it says it is listening.
fn spawn_tcpdump(tb: &Testbed, iface: &str, out: &Path, filter: &str) -> Child {
    let mut c = tb
        .command(Side::Rx, "tcpdump")
        .args([
            "-i",
            iface,
            "-n",
            "-B",
            "65536",
            "-c",
            &COUNT.to_string(),
            "-w",
        ])
        .arg(out)
        .arg(filter)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tcpdump");
    let stderr = c.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("listening on") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("tcpdump did not start listening in 20 s");
    c
}

/// Sends `COUNT` datagrams to `dst:PORT` from inside the Rx namespace, plus one to another port that the
/// filter must leave out.
fn send_udp(tb: &Testbed, dst: &'static str) {
    tb.run_in(Side::Rx, move || {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        for i in 0..COUNT {
            s.send_to(format!("payload {i}").as_bytes(), (dst, PORT + 1))
                .unwrap();
            s.send_to(format!("payload {i}").as_bytes(), (dst, PORT))
                .unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
    });
}

fn wait_exit(child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "{what} did not see {COUNT} packets in 20 s (a filter testing the wrong offsets?)"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// tcpdump's reading of `file`: the header line and every packet in hex, without timestamps (the two
/// captures stamp each packet separately).
fn tcpdump_read(file: &Path) -> (String, String) {
    let out = Command::new("tcpdump")
        .args(["-nn", "-t", "-x", "-r"])
        .arg(file)
        .output()
        .expect("tcpdump -r");
    assert!(
        out.status.success(),
        "tcpdump -r {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stderr).into_owned(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// ringcap and tcpdump capture the same `COUNT` datagrams on `iface`; both files must say `link_type` and
/// decode to the same text.
fn same_as_tcpdump(tb: &Testbed, iface: &str, dst: &'static str, link_type: &str) {
    let dir = temp_dir(&format!("linktype-{iface}"));
    let ours = dir.join("ringcap.pcap");
    let theirs = dir.join("tcpdump.pcap");
    let filter = format!("udp dst port {PORT}");
    let mut rc = spawn_capture(
        tb,
        &[
            "capture",
            "-i",
            iface,
            "-c",
            &COUNT.to_string(),
            "-w",
            ours.to_str().unwrap(),
            &filter,
        ],
    );
    let mut td = spawn_tcpdump(tb, iface, &theirs, &filter);
    send_udp(tb, dst);
    wait_exit(&mut td, "tcpdump");
    wait_exit(&mut rc, "ringcap");
    let out = finish(&mut rc);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ringcap: {stderr}");
    assert!(
        stderr.contains(&format!("link-type {link_type}")),
        "{stderr}"
    );

    let (our_head, our_pkts) = tcpdump_read(&ours);
    let (their_head, their_pkts) = tcpdump_read(&theirs);
    assert!(
        their_head.contains(&format!("link-type {link_type}")),
        "tcpdump's file: {their_head}"
    );
    assert_eq!(our_head, their_head.replace("tcpdump.pcap", "ringcap.pcap"));
    assert_eq!(
        our_pkts.matches(&format!(".{PORT}:")).count(),
        COUNT,
        "{our_pkts}"
    );
    assert_eq!(our_pkts, their_pkts);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn loopback_is_ethernet_as_in_libpcap() {
    if !testbed::have("tcpdump", "apt install tcpdump") {
        return;
    }
    let tb = testbed();
    ip(&tb, "link set lo up");
    same_as_tcpdump(&tb, "lo", "127.0.0.1", "EN10MB");
}

#[test]
fn tun_is_raw_ip_as_in_libpcap() {
    if !testbed::have("tcpdump", "apt install tcpdump") {
        return;
    }
    let tb = testbed();
    let _keep = tun(&tb, "rctun0", None);
    ip(&tb, "addr add 10.88.0.1/24 dev rctun0");
    ip(&tb, "link set rctun0 up");
    same_as_tcpdump(&tb, "rctun0", "10.88.0.2", "RAW");
}

#[test]
fn an_interface_type_without_a_raw_link_type_is_refused_by_name() {
    let tb = testbed();
    let _keep = tun(&tb, "rcppp0", Some(libc::ARPHRD_PPP));
    ip(&tb, "link set rcppp0 up");
    let out = ringcap_rx(&tb, &["capture", "-i", "rcppp0", "-c", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("rcppp0") && stderr.contains("PPP"),
        "{stderr}"
    );
    assert!(stderr.contains("tcpdump -i rcppp0"), "{stderr}");
}
