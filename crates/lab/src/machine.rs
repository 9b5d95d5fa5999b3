//! What a measurement ran on: CPU, cores, kernel, memory, the NIC drivers, and the version of every
//! capture tool, so a report says which machine and which software its numbers belong to.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

/// The machine a bench ran on. Fields that could not be read are empty (or 0), never an error: a report
/// without the kernel version is still a report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    /// `model name` of /proc/cpuinfo, e.g. "AMD EPYC 7B13".
    pub cpu_model: String,
    /// Logical CPUs online.
    pub cores: usize,
    /// `uname -r`.
    pub kernel: String,
    /// PRETTY_NAME of /etc/os-release.
    pub os: String,
    /// MemTotal of /proc/meminfo, in KiB.
    pub memory_kib: u64,
    /// The interfaces the bench used (see [`Machine::with_nic`]).
    #[serde(default)]
    pub nics: Vec<Nic>,
}

/// A network interface and its driver.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Nic {
    pub name: String,
    /// The network namespace it lives in; None for the host's.
    pub netns: Option<String>,
    /// Kernel driver (e.g. "veth", "virtio_net", "ixgbe"); None if it could not be found.
    pub driver: Option<String>,
    /// Driver version as ethtool reports it.
    pub driver_version: Option<String>,
    pub mtu: Option<u32>,
}

impl Machine {
    /// Read the machine's CPU, cores, kernel, OS and memory (no interfaces yet).
    pub fn probe() -> Machine {
        let cpuinfo = read("/proc/cpuinfo");
        let meminfo = read("/proc/meminfo");
        let os_release = read("/etc/os-release");
        Machine {
            hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
            cpu_model: cpu_model(&cpuinfo),
            cores: online_cpus(),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            os: os_pretty_name(&os_release),
            memory_kib: mem_total_kib(&meminfo),
            nics: Vec::new(),
        }
    }

    /// Add an interface (in a network namespace, or the host's when `netns` is None).
    pub fn with_nic(mut self, netns: Option<&str>, name: &str) -> Machine {
        self.nics.push(Nic::probe(netns, name));
        self
    }

    /// One line for a report: "AMD EPYC, 2 CPUs, 23.5 GiB, Linux 6.18.44 (Debian GNU/Linux 12)".
    pub fn one_line(&self) -> String {
        format!(
            "{}, {} CPUs, {:.1} GiB, Linux {} ({})",
            if self.cpu_model.is_empty() {
                "unknown CPU"
            } else {
                &self.cpu_model
            },
            self.cores,
            self.memory_kib as f64 / (1024.0 * 1024.0),
            self.kernel,
            self.os
        )
    }
}

impl Nic {
    /// Driver, driver version and MTU of an interface. The driver comes from the sysfs link
    /// /sys/class/net/IF/device/driver (real NICs) or else from `ethtool -i` (virtual ones such as veth have
    /// no device link); inside a namespace both are read through `ip netns exec`, which mounts that
    /// namespace's sysfs.
    pub fn probe(netns: Option<&str>, name: &str) -> Nic {
        let mut nic = Nic {
            name: name.to_string(),
            netns: netns.map(str::to_string),
            ..Nic::default()
        };
        let sys = format!("/sys/class/net/{name}");
        match netns {
            None => {
                nic.driver = std::fs::read_link(format!("{sys}/device/driver"))
                    .ok()
                    .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
                nic.mtu = read(&format!("{sys}/mtu")).trim().parse().ok();
            }
            Some(ns) => {
                let out = output("ip", &["netns", "exec", ns, "cat", &format!("{sys}/mtu")]);
                nic.mtu = out.and_then(|s| s.trim().parse().ok());
            }
        }
        let ethtool = match netns {
            None => output("ethtool", &["-i", name]),
            Some(ns) => output("ip", &["netns", "exec", ns, "ethtool", "-i", name]),
        };
        if let Some(text) = ethtool {
            let field = |key: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
            };
            if nic.driver.is_none() {
                nic.driver = field("driver:");
            }
            nic.driver_version = field("version:");
        }
        nic
    }
}

/// Versions of the capture tools and helpers that are installed, by name: ringcap, tcpdump, libpcap,
/// netsniff-ng, trafgen, dumpcap, tshark, stenotype, zstd, gzip. A tool that is not installed is absent;
/// one that runs but prints no version number is "installed (version unknown)".
pub fn tool_versions() -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    v.insert("ringcap".to_string(), ringcap_version());
    // (name in the map, program, argument, line that holds the version starts with)
    let probes: [(&str, &str, &str, &str); 9] = [
        ("tcpdump", "tcpdump", "--version", "tcpdump version"),
        ("libpcap", "tcpdump", "--version", "libpcap version"),
        ("netsniff-ng", "netsniff-ng", "-v", "netsniff-ng"),
        ("trafgen", "trafgen", "-v", "trafgen"),
        ("dumpcap", "dumpcap", "-v", "Dumpcap"),
        ("tshark", "tshark", "-v", "TShark"),
        ("stenotype", "stenotype", "--version", ""),
        ("zstd", "zstd", "-V", "*** Zstandard"),
        ("gzip", "gzip", "--version", "gzip"),
    ];
    for (name, program, arg, prefix) in probes {
        if which(program).is_none() {
            continue;
        }
        // Tools print their version to stdout or stderr (and some exit 1 after printing it).
        let text = combined_output(program, &[arg]).unwrap_or_default();
        let line = text.lines().find(|l| l.trim_start().starts_with(prefix));
        let version = line.and_then(version_in);
        v.insert(
            name.to_string(),
            version.unwrap_or_else(|| "installed (version unknown)".to_string()),
        );
    }
    v
}

/// This build's version, with the git commit of the source tree when it is still there.
fn ringcap_version() -> String {
    let version = env!("CARGO_PKG_VERSION");
    let src = Path::new(env!("CARGO_MANIFEST_DIR"));
    match output(
        "git",
        &[
            "-C",
            &src.to_string_lossy(),
            "describe",
            "--always",
            "--dirty",
        ],
    ) {
        Some(commit) if !commit.trim().is_empty() => format!("{version} (git {})", commit.trim()),
        _ => version.to_string(),
    }
}

/// The first word of a line that looks like a version number ("4.99.3", "v1.5.4," → "1.5.4").
pub fn version_in(line: &str) -> Option<String> {
    line.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .map(|w| w.strip_prefix('v').unwrap_or(w))
        .find(|w| {
            let mut parts = w.split('.');
            let first = parts.next().unwrap_or("");
            !first.is_empty()
                && first.chars().all(|c| c.is_ascii_digit())
                && w.contains('.')
                && w.chars().all(|c| {
                    c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '+' || c == '~'
                })
        })
        .map(str::to_string)
}

/// Full path of a program on PATH.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// stdout of a command that succeeded.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// stdout then stderr of a command, whatever its exit status.
fn combined_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    Some(format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "model name").then(|| v.trim().to_string())
        })
        .unwrap_or_default()
}

fn os_pretty_name(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .unwrap_or_default()
}

fn mem_total_kib(meminfo: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPUs online, from /sys/devices/system/cpu/online ("0-1,4") or else the scheduler's view.
fn online_cpus() -> usize {
    let text = read("/sys/devices/system/cpu/online");
    let count: usize = text
        .trim()
        .split(',')
        .filter(|r| !r.is_empty())
        .map(|r| match r.split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => usize::from(r.parse::<usize>().is_ok()),
        })
        .sum();
    if count > 0 {
        count
    } else {
        std::thread::available_parallelism().map_or(0, |n| n.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testbed::{Side, Testbed, TestbedOptions};

    #[test]
    fn probe_reads_this_machine() {
        let m = Machine::probe();
        // Compare with what the kernel says through other doors than the ones probe() uses.
        assert_eq!(m.cores, std::thread::available_parallelism().unwrap().get());
        let uname = output("uname", &["-r"]).unwrap();
        assert_eq!(m.kernel, uname.trim());
        let lscpu_model = output(
            "sh",
            &["-c", "grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2"],
        )
        .unwrap();
        assert_eq!(m.cpu_model, lscpu_model.trim());
        let free_kib = output("sh", &["-c", "free -k | awk '/^Mem:/ {print $2}'"]).unwrap();
        assert_eq!(m.memory_kib, free_kib.trim().parse::<u64>().unwrap());
        assert!(!m.os.is_empty() && !m.hostname.is_empty());
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Machine>(&json).unwrap(), m);
        assert!(m.one_line().contains(&format!("{} CPUs", m.cores)));
    }

    #[test]
    fn veth_in_a_namespace_says_veth() {
        let tb = Testbed::new(TestbedOptions {
            mtu: Some(1400),
            ..TestbedOptions::default()
        })
        .expect("testbed (needs root)");
        let m = Machine::probe().with_nic(Some(tb.ns(Side::Rx)), tb.iface(Side::Rx));
        let nic = &m.nics[0];
        assert_eq!(nic.name, tb.iface(Side::Rx));
        assert_eq!(nic.netns.as_deref(), Some(tb.ns(Side::Rx)));
        assert_eq!(nic.mtu, Some(1400));
        if which("ethtool").is_some() {
            assert_eq!(nic.driver.as_deref(), Some("veth"));
        }
    }

    #[test]
    fn host_nic_driver_matches_sysfs_or_none_for_loopback() {
        let lo = Nic::probe(None, "lo");
        assert_eq!(lo.driver, None, "loopback has no driver");
        assert_eq!(lo.mtu, Some(65536));
        // Every host interface with a device link: the driver is that link's last part.
        for entry in std::fs::read_dir("/sys/class/net").unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if let Ok(link) = std::fs::read_link(format!("/sys/class/net/{name}/device/driver")) {
                let want = link.file_name().unwrap().to_string_lossy().into_owned();
                assert_eq!(Nic::probe(None, &name).driver, Some(want));
            }
        }
        let missing = Nic::probe(None, "no-such-if0");
        assert_eq!((missing.driver, missing.mtu), (None, None));
    }

    #[test]
    fn tool_versions_match_the_tools() {
        let v = tool_versions();
        assert!(v["ringcap"].starts_with(env!("CARGO_PKG_VERSION")));
        // Each installed tool's version appears in its own output; tools not installed are absent.
        for (name, program, arg) in [
            ("tcpdump", "tcpdump", "--version"),
            ("gzip", "gzip", "--version"),
            ("zstd", "zstd", "-V"),
            ("netsniff-ng", "netsniff-ng", "-v"),
            ("dumpcap", "dumpcap", "-v"),
            ("stenotype", "stenotype", "--version"),
        ] {
            match which(program) {
                None => assert!(!v.contains_key(name), "{name} is not installed"),
                // stenotype 1.0.1 prints no version number at all: the marker says so, and only then.
                Some(_) if v[name] == "installed (version unknown)" => {
                    let out = combined_output(program, &[arg]).unwrap_or_default();
                    assert_eq!(out.lines().find_map(version_in), None, "{name}: {out}");
                }
                Some(_) => {
                    let version = &v[name];
                    assert!(
                        version.chars().next().unwrap().is_ascii_digit(),
                        "{name}: {version}"
                    );
                    assert!(combined_output(program, &[arg])
                        .unwrap()
                        .contains(version.as_str()));
                }
            }
        }
        if which("tcpdump").is_some() {
            assert!(v["libpcap"].starts_with("1."), "libpcap {}", v["libpcap"]);
        }
    }

    #[test]
    fn version_words() {
        assert_eq!(
            version_in("tcpdump version 4.99.3").as_deref(),
            Some("4.99.3")
        );
        assert_eq!(
            version_in("*** Zstandard CLI (64-bit) v1.5.4, by Yann Collet ***").as_deref(),
            Some("1.5.4")
        );
        assert_eq!(
            version_in("Dumpcap (Wireshark) 4.0.17 (Git v4.0.17 packaged as 4.0.17-0+deb12u3).")
                .as_deref(),
            Some("4.0.17")
        );
        assert_eq!(
            version_in("netsniff-ng 0.6.8 (Flutternozzle), Git id: (none)").as_deref(),
            Some("0.6.8")
        );
        assert_eq!(version_in("64-bit build"), None);
    }
}
