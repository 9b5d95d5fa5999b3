//! Throwaway testbeds: two network namespaces joined by a veth pair.
//!
//! Every testbed gets unique names (`rc<pid>x<n>`), is removed when dropped (also while a test panics), and
//! sweeps away namespaces left behind by processes that no longer exist, so a crashed run never breaks the next.
//! IPv6 is turned off in both namespaces so only the traffic a test generates flows.

use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub mod kernel;

/// Which end of the veth pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The sending namespace (the generator's side).
    Tx,
    /// The receiving namespace (the capturer's side).
    Rx,
}

/// Knobs for a testbed.
#[derive(Clone, Debug, Default)]
pub struct TestbedOptions {
    /// Steer the receive side's packet processing (RPS) to this CPU ("dual" mode).
    pub rps_cpu: Option<usize>,
    /// MTU of both veth ends.
    pub mtu: Option<u32>,
    /// Transmit and receive queues of each veth end (default: the kernel's, one each).
    pub queues: Option<u32>,
}

/// A pair of namespaces with a veth between them.
#[derive(Debug)]
pub struct Testbed {
    pub tx_ns: String,
    pub rx_ns: String,
    pub tx_if: String,
    pub rx_if: String,
    pub tx_mac: [u8; 6],
    pub rx_mac: [u8; 6],
}

const PREFIX: &str = "rc";
static NEXT_ID: AtomicU32 = AtomicU32::new(0);

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output().map_err(|e| {
        io::Error::new(e.kind(), format!("cannot run `ip` ({e}): install iproute2"))
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn netns_exec(ns: &str, args: &[&str]) -> io::Result<()> {
    let mut full = vec!["netns", "exec", ns];
    full.extend_from_slice(args);
    ip(&full)
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Remove namespaces left by earlier runs whose process is gone (names are `rc<pid>x<n>t|r`).
fn sweep_stale() {
    let Ok(entries) = fs::read_dir("/run/netns") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('x').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !pid_alive(pid) {
            let _ = ip(&["netns", "del", &name]);
        }
    }
}

fn read_mac(ns: &str, ifname: &str) -> io::Result<[u8; 6]> {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "cat",
            &format!("/sys/class/net/{ifname}/address"),
        ])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_mac(text.trim())
        .ok_or_else(|| io::Error::other(format!("cannot read MAC of {ifname} in {ns}: {text:?}")))
}

/// Parse `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in mac.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

impl Testbed {
    /// Create two fresh namespaces joined by a veth pair, links up, IPv6 off,
    /// 10.77.0.1/24 on the Tx end and 10.77.0.2/24 on the Rx end.
    pub fn new(opts: TestbedOptions) -> io::Result<Testbed> {
        sweep_stale();
        let id = format!(
            "{PREFIX}{}x{}",
            std::process::id(),
            NEXT_ID.fetch_add(1, Ordering::Relaxed)
        );
        // Interface names are limited to 15 bytes; namespaces keep them apart, so short fixed names suffice.
        let tb = Testbed {
            tx_ns: format!("{id}t"),
            rx_ns: format!("{id}r"),
            tx_if: "veth-tx".into(),
            rx_if: "veth-rx".into(),
            tx_mac: [0; 6],
            rx_mac: [0; 6],
        };
        // From here on Drop cleans up whatever was created.
        ip(&["netns", "add", &tb.tx_ns])?;
        ip(&["netns", "add", &tb.rx_ns])?;
        let tmp_if = format!("{id}a");
        let tmp_peer = format!("{id}b");
        let q = opts.queues.unwrap_or(1).max(1).to_string();
        ip(&[
            "link",
            "add",
            &tmp_if,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &tmp_peer,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])?;
        ip(&["link", "set", &tmp_if, "netns", &tb.tx_ns])?;
        ip(&["link", "set", &tmp_peer, "netns", &tb.rx_ns])?;
        netns_exec(
            &tb.tx_ns,
            &["ip", "link", "set", &tmp_if, "name", &tb.tx_if],
        )?;
        netns_exec(
            &tb.rx_ns,
            &["ip", "link", "set", &tmp_peer, "name", &tb.rx_if],
        )?;
        for (ns, ifname, addr) in [
            (&tb.tx_ns, &tb.tx_if, "10.77.0.1/24"),
            (&tb.rx_ns, &tb.rx_if, "10.77.0.2/24"),
        ] {
            for key in ["all", "default", "lo"] {
                netns_exec(
                    ns,
                    &[
                        "sysctl",
                        "-qw",
                        &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
                    ],
                )?;
            }
            netns_exec(
                ns,
                &[
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{ifname}.disable_ipv6=1"),
                ],
            )?;
            if let Some(mtu) = opts.mtu {
                netns_exec(ns, &["ip", "link", "set", ifname, "mtu", &mtu.to_string()])?;
            }
            netns_exec(ns, &["ip", "addr", "add", addr, "dev", ifname])?;
            netns_exec(ns, &["ip", "link", "set", ifname, "up"])?;
            netns_exec(ns, &["ip", "link", "set", "lo", "up"])?;
        }
        if let Some(cpu) = opts.rps_cpu {
            let mask = format!("{:x}", 1u64 << cpu);
            netns_exec(
                &tb.rx_ns,
                &[
                    "sh",
                    "-c",
                    &format!(
                        "echo {mask} > /sys/class/net/{}/queues/rx-0/rps_cpus",
                        tb.rx_if
                    ),
                ],
            )?;
        }
        let mut tb = tb;
        tb.tx_mac = read_mac(&tb.tx_ns, &tb.tx_if)?;
        tb.rx_mac = read_mac(&tb.rx_ns, &tb.rx_if)?;
        Ok(tb)
    }

    /// Name of the namespace of one side.
    pub fn ns(&self, side: Side) -> &str {
        match side {
            Side::Tx => &self.tx_ns,
            Side::Rx => &self.rx_ns,
        }
    }

    /// Name of the veth end of one side.
    pub fn iface(&self, side: Side) -> &str {
        match side {
            Side::Tx => &self.tx_if,
            Side::Rx => &self.rx_if,
        }
    }

    /// Run `f` on a fresh thread that has entered the side's namespace; sockets it creates stay in that namespace.
    pub fn run_in<T: Send>(&self, side: Side, f: impl FnOnce() -> T + Send) -> T {
        let ns = self.ns(side).to_string();
        std::thread::scope(|s| {
            s.spawn(move || {
                enter_netns(&ns).unwrap_or_else(|e| panic!("cannot enter netns {ns}: {e}"));
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// `ip netns exec <ns> program`: add arguments and spawn.
    pub fn command(&self, side: Side, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.ns(side), program]);
        c
    }

    fn counter(&self, side: Side, name: &str) -> u64 {
        let path = format!("/sys/class/net/{}/statistics/{name}", self.iface(side));
        let out = self
            .command(side, "cat")
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| {
                panic!(
                    "cannot parse {path}: {:?}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
    }

    /// Packets the receiving veth end has seen (the offered load).
    pub fn rx_packets(&self) -> u64 {
        self.counter(Side::Rx, "rx_packets")
    }

    /// Packets the sending veth end has sent.
    pub fn tx_packets(&self) -> u64 {
        self.counter(Side::Tx, "tx_packets")
    }
}

/// A Linux `vxlan` device in both namespaces on top of the veth (see [`Testbed::add_vxlan`]): traffic sent to
/// one of the peer's inner addresses leaves the veth encapsulated (outer 10.77.0.1 <-> 10.77.0.2, UDP `port`).
///
/// The kernels this runs on have CONFIG_VXLAN built in but no GENEVE, GRE, ERSPAN, IP-in-IP or MPLS
/// devices (`ip link add type geneve` says "Unknown device type"): those tunnels are made by
/// scripts/tunnels.py instead.
#[derive(Clone, Debug)]
pub struct VxlanOptions {
    /// Device name in both namespaces (≤ 15 bytes), e.g. "vx42".
    pub name: String,
    pub vni: u32,
    /// UDP destination port (4789 is IANA's; Linux's own default without `dstport` is 8472).
    pub port: u16,
    /// Inner IPv4 addresses with prefix ("10.200.0.1/24") on the Tx side's device.
    pub tx_addrs: Vec<String>,
    /// Inner IPv4 addresses with prefix on the Rx side's device.
    pub rx_addrs: Vec<String>,
    /// Inner IPv6 addresses with prefix (Tx, Rx), e.g. ("fd00:200::1/64", "fd00:200::2/64"): IPv6 is turned on
    /// for this device only (no link-local address, no DAD, no router solicitations).
    pub ipv6: Option<(String, String)>,
}

impl Testbed {
    /// Adds a vxlan device as `o` says in both namespaces, up, with permanent neighbour entries for every
    /// inner and outer peer address, so no ARP or neighbour discovery joins the traffic a test makes.
    pub fn add_vxlan(&self, o: &VxlanOptions) -> io::Result<()> {
        let (vni, port) = (o.vni.to_string(), o.port.to_string());
        let sides = [
            (
                Side::Tx,
                "10.77.0.1",
                "10.77.0.2",
                &o.tx_addrs,
                o.ipv6.as_ref().map(|v| &v.0),
            ),
            (
                Side::Rx,
                "10.77.0.2",
                "10.77.0.1",
                &o.rx_addrs,
                o.ipv6.as_ref().map(|v| &v.1),
            ),
        ];
        for (side, local, remote, addrs, v6) in &sides {
            let (ns, veth) = (self.ns(*side), self.iface(*side));
            let add = [
                "ip", "link", "add", &o.name, "type", "vxlan", "id", &vni, "local", local,
                "remote", remote, "dstport", &port, "dev", veth,
            ];
            netns_exec(ns, &add)?;
            for a in addrs.iter() {
                netns_exec(ns, &["ip", "addr", "add", a, "dev", &o.name])?;
            }
            if let Some(a) = v6 {
                netns_exec(
                    ns,
                    &["ip", "link", "set", "dev", &o.name, "addrgenmode", "none"],
                )?;
                for (k, v) in [
                    ("disable_ipv6", "0"),
                    ("accept_ra", "0"),
                    ("router_solicitations", "0"),
                ] {
                    netns_exec(
                        ns,
                        &[
                            "sysctl",
                            "-qw",
                            &format!("net.ipv6.conf.{}.{k}={v}", o.name),
                        ],
                    )?;
                }
                netns_exec(ns, &["ip", "-6", "addr", "add", a, "dev", &o.name, "nodad"])?;
            }
            netns_exec(ns, &["ip", "link", "set", &o.name, "up"])?;
        }
        let tx_vx = read_mac(&self.tx_ns, &o.name)?;
        let rx_vx = read_mac(&self.rx_ns, &o.name)?;
        let hex = |m: [u8; 6]| m.map(|b| format!("{b:02x}")).join(":");
        let peers = [
            (
                Side::Tx,
                hex(rx_vx),
                hex(self.rx_mac),
                "10.77.0.2",
                &o.rx_addrs,
                o.ipv6.as_ref().map(|v| &v.1),
            ),
            (
                Side::Rx,
                hex(tx_vx),
                hex(self.tx_mac),
                "10.77.0.1",
                &o.tx_addrs,
                o.ipv6.as_ref().map(|v| &v.0),
            ),
        ];
        for (side, vx_mac, veth_mac, outer, addrs, v6) in &peers {
            let ns = self.ns(*side);
            let neigh = |addr: &str, mac: &str, dev: &str| {
                let a = addr.split('/').next().unwrap_or(addr);
                netns_exec(
                    ns,
                    &[
                        "ip",
                        "neigh",
                        "replace",
                        a,
                        "lladdr",
                        mac,
                        "dev",
                        dev,
                        "nud",
                        "permanent",
                    ],
                )
            };
            neigh(outer, veth_mac, self.iface(*side))?;
            for a in addrs.iter().chain(v6.iter().copied()) {
                neigh(a, vx_mac, &o.name)?;
            }
        }
        Ok(())
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // Deleting a namespace destroys the veth end inside it, and with it the peer.
        let _ = ip(&["netns", "del", &self.tx_ns]);
        let _ = ip(&["netns", "del", &self.rx_ns]);
    }
}

/// A tmpfs of a given size mounted for a test (a small disk that fills up), unmounted (lazily) on drop.
#[derive(Debug)]
pub struct Tmpfs {
    pub path: std::path::PathBuf,
}

impl Tmpfs {
    /// Creates `dir` if needed and mounts a tmpfs of `size` (`mount -o size=`, e.g. "256k") on it.
    pub fn mount(dir: &Path, size: &str) -> io::Result<Tmpfs> {
        fs::create_dir_all(dir)?;
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "mount -t tmpfs on {} failed (needs root): {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(Tmpfs {
            path: dir.to_path_buf(),
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Move the calling thread into the named network namespace.
pub fn enter_netns(ns: &str) -> io::Result<()> {
    let f = fs::File::open(format!("/run/netns/{ns}"))?;
    // SAFETY: setns on a valid fd; affects only the calling thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Number of CPUs online.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// A small ext4 file system in an image file under /var/tmp, mounted by loop device on a fresh
/// directory for one test (needs root, `mkfs.ext4` and `mount`); unmounted (which frees the loop
/// device) and removed on drop, also when the test panics.
#[derive(Debug)]
pub struct LoopExt4 {
    /// Where it is mounted.
    pub dir: PathBuf,
    image: PathBuf,
}

impl LoopExt4 {
    /// Makes and mounts an ext4 of `mib` MiB with `mkfs_args` added (e.g. `["-m", "5"]`).
    pub fn new(tag: &str, mib: u64, mkfs_args: &[&str]) -> io::Result<LoopExt4> {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let stem = format!("/var/tmp/ringcap-ext4-{}-{n}-{tag}", std::process::id());
        let fs = LoopExt4 {
            dir: PathBuf::from(&stem),
            image: PathBuf::from(format!("{stem}.img")),
        };
        fs::create_dir_all(&fs.dir)?;
        fs::File::create(&fs.image)?.set_len(mib << 20)?;
        let run = |cmd: &mut Command, what: &str| -> io::Result<()> {
            let out = cmd.output().map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot run {what} ({e}): install e2fsprogs and util-linux"),
                )
            })?;
            if out.status.success() {
                return Ok(());
            }
            Err(io::Error::other(format!(
                "{what} failed (needs root and loop devices): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        };
        run(
            Command::new("mkfs.ext4")
                .args(["-q", "-F"])
                .args(mkfs_args)
                .arg(&fs.image),
            "mkfs.ext4",
        )?;
        run(
            Command::new("mount")
                .args(["-o", "loop"])
                .arg(&fs.image)
                .arg(&fs.dir),
            "mount -o loop",
        )?;
        Ok(fs)
    }
}

impl Drop for LoopExt4 {
    fn drop(&mut self) {
        // Lazy: a file still open in a dying test must not keep the mount (and loop device) alive.
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        let _ = fs::remove_dir(&self.dir);
        let _ = fs::remove_file(&self.image);
    }
}

/// Whether an external program is installed; when not, [`skip`]s with `hint` (how to install it).
pub fn have(tool: &str, hint: &str) -> bool {
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip(&format!("`{tool}` is not installed ({hint})"));
    }
    ok
}

/// A check that cannot run here: skipped with a line on stderr, but a failure under CI (`CI=true`), where
/// `make test` installs everything and a silent skip would hide a missing set-up step.
pub fn skip(why: &str) {
    if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0") {
        panic!("cannot run this check under CI: {why}");
    }
    eprintln!("SKIP: {why}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_mac_accepts_only_six_octets() {
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Some([2, 0, 0, 0, 0, 10]));
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00:00:01"), None);
        assert_eq!(parse_mac("zz:00:00:00:00:00"), None);
    }

    #[test]
    fn testbed_comes_up_and_goes_away() {
        let names;
        {
            let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
            names = (tb.tx_ns.clone(), tb.rx_ns.clone());
            assert!(Path::new(&format!("/run/netns/{}", tb.tx_ns)).exists());
            assert_ne!(tb.tx_mac, tb.rx_mac);
            // IPv6 is off, so the only traffic is ours: counters stay still with nothing sent.
            let before = tb.rx_packets();
            std::thread::sleep(std::time::Duration::from_millis(300));
            assert_eq!(tb.rx_packets(), before);
            // A thread inside the Rx namespace sees the Rx interface.
            // (sysfs keeps showing the old namespace after setns, so ask the kernel by name.)
            let rx = tb.run_in(Side::Rx, || sys::Interface::lookup("veth-rx"));
            assert!(rx.expect("veth-rx in the Rx namespace").up);
            let tx = tb.run_in(Side::Tx, || sys::Interface::lookup("veth-rx"));
            assert_eq!(tx.unwrap_err().kind(), std::io::ErrorKind::NotFound);
        }
        assert!(!Path::new(&format!("/run/netns/{}", names.0)).exists());
        assert!(!Path::new(&format!("/run/netns/{}", names.1)).exists());
    }

    #[test]
    fn stale_namespaces_of_dead_processes_are_swept() {
        // pid 0x7fffffff never exists: a namespace named after it is stale.
        let stale = format!("{PREFIX}2147483646x0t");
        let _ = ip(&["netns", "add", &stale]);
        let _tb = Testbed::new(TestbedOptions::default()).expect("testbed");
        assert!(!Path::new(&format!("/run/netns/{stale}")).exists());
    }
}
