//! Where a run happens: the throwaway testbed (two namespaces joined by a veth pair, made per placement), or a
//! named interface whose traffic comes from a generator started by a command template (a plan's
//! `[interface]`: a NIC cabled to another host, a tap, or a namespace). In both the offered load is read from
//! the capture interface's counters; the generator's own report is the cross-check.

use std::fs;
use std::io;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::plan::{InterfaceSpec, Placement, Rate};
use testbed::{Side, Testbed, TestbedOptions};

/// A run's capture interface and traffic source.
pub enum Bed {
    Testbed(Testbed),
    Interface(InterfaceSpec),
}

/// The capture interface's receive counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets that reached the interface: received by the stack plus those the NIC dropped for want of
    /// host buffers (`rx_missed_errors`, which if_link.h defines as such packets). The capturer never had
    /// a chance at those, but they were offered. Driver-specific counters (`ethtool -S`) are not added:
    /// drivers fold them into the generic ones differently; [`Bed::driver_stats`] keeps them per run.
    pub packets: u64,
    pub bytes: u64,
}

/// What the generator said it sent (`ringcap gen --json`); None when its output has no such report.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sent {
    pub packets: Option<u64>,
    pub duration_s: f64,
    /// Burst runs: the wall-clock time (ns) the generator was started on.
    pub start_ns: Option<u64>,
}

impl Bed {
    /// The testbed for a placement (RPS steering set up for it), or the plan's named interface.
    pub fn new(spec: Option<&InterfaceSpec>, placement: Placement) -> io::Result<Bed> {
        match spec {
            Some(s) => {
                if !Path::new(&format!("/sys/class/net/{}", s.capture)).exists()
                    && s.netns.is_none()
                {
                    return Err(io::Error::other(format!(
                        "[interface] capture = \"{}\": no such interface (ip link shows the names)",
                        s.capture
                    )));
                }
                Ok(Bed::Interface(s.clone()))
            }
            None => Testbed::new(TestbedOptions {
                rps_cpu: placement.rps_cpu(),
                ..TestbedOptions::default()
            })
            .map(Bed::Testbed),
        }
    }

    /// Whether a run with this placement can use this bed as it is (a testbed is made per placement).
    pub fn fits(&self, placement: Placement, made_for: Placement) -> bool {
        matches!(self, Bed::Interface(_)) || placement == made_for
    }

    /// The interface the capturers listen on.
    pub fn capture_if(&self) -> &str {
        match self {
            Bed::Testbed(tb) => &tb.rx_if,
            Bed::Interface(s) => &s.capture,
        }
    }

    /// The namespace of the capture interface (None: the host's).
    pub fn capture_ns(&self) -> Option<&str> {
        match self {
            Bed::Testbed(tb) => Some(&tb.rx_ns),
            Bed::Interface(s) => s.netns.as_deref(),
        }
    }

    /// A command that runs `argv` where the capture interface is.
    pub fn capture_command(&self, argv: &[String]) -> Command {
        match self.capture_ns() {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).args(argv);
                c
            }
            None => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
        }
    }

    /// The machine's description with the interfaces the runs use.
    pub fn describe(&self, m: crate::machine::Machine) -> crate::machine::Machine {
        match self {
            Bed::Testbed(tb) => m
                .with_nic(Some(&tb.tx_ns), &tb.tx_if)
                .with_nic(Some(&tb.rx_ns), &tb.rx_if),
            Bed::Interface(s) => m.with_nic(s.netns.as_deref(), &s.capture),
        }
    }

    /// The capture interface's counters now.
    pub fn counters(&self) -> io::Result<Counters> {
        let base = format!("/sys/class/net/{}/statistics", self.capture_if());
        let names = ["rx_packets", "rx_bytes", "rx_missed_errors"];
        let mut cat = self.capture_command(&["cat".to_string()]);
        cat.args(names.iter().map(|n| format!("{base}/{n}")));
        let out = cat.output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Vec<u64> = text
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        if v.len() != names.len() {
            return Err(io::Error::other(format!(
                "cannot read {base}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(Counters {
            packets: v[0] + v[2],
            bytes: v[1],
        })
    }

    /// The driver's own counters (`ethtool -S`, name → value); empty where the driver has none or ethtool
    /// is missing.
    pub fn driver_stats(&self) -> Vec<(String, u64)> {
        let mut c = self.capture_command(&["ethtool".to_string(), "-S".to_string()]);
        c.arg(self.capture_if());
        match c.output() {
            Ok(out) => parse_ethtool_stats(&String::from_utf8_lossy(&out.stdout)),
            Err(_) => Vec::new(),
        }
    }

    /// The command that sends `packets` at the run's rate: `ringcap gen` in the testbed's sending namespace,
    /// or the plan's template run by `sh -c`. `extra`: more `ringcap gen` flags (a burst schedule), the
    /// template's {extra}.
    pub fn generator(
        &self,
        ringcap: &Path,
        packets: u64,
        rate: Rate,
        dist: &str,
        gen_cpu: usize,
        extra: &[String],
    ) -> Command {
        match self {
            Bed::Testbed(tb) => {
                let mut c = tb.command(Side::Tx, &ringcap.to_string_lossy());
                c.args(["gen", "-i", &tb.tx_if, "-n", &packets.to_string()])
                    .args(["--dist", dist, "--cpu", &gen_cpu.to_string()])
                    .args(rate_args(rate))
                    .args(extra)
                    .args(["--json", "-q"]);
                c
            }
            Bed::Interface(s) => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(
                    expand(&s.generator, ringcap, packets, rate, dist, gen_cpu)
                        // Quoted: a burst's phases hold `;`, which sh would take as a command separator.
                        .replace(
                            "{extra}",
                            &extra
                                .iter()
                                .map(|a| super::methods::sh_quote(a))
                                .collect::<Vec<_>>()
                                .join(" "),
                        ),
                );
                c
            }
        }
    }
}

/// `ringcap gen`'s rate flags for a rate level (none at "max").
pub fn rate_args(rate: Rate) -> Vec<String> {
    match rate {
        Rate::Max => Vec::new(),
        Rate::Mbps(v) => vec!["--mbps".into(), v.to_string()],
        Rate::Pps(v) => vec!["--pps".into(), v.to_string()],
        Rate::GapNs(v) => vec!["--gap".into(), v.to_string()],
    }
}

/// The generator template with its fields filled in: {ringcap} {packets} {rate} (gen's rate flags, empty
/// at "max") {dist} {cpu}.
pub fn expand(
    template: &str,
    ringcap: &Path,
    packets: u64,
    rate: Rate,
    dist: &str,
    gen_cpu: usize,
) -> String {
    template
        .replace("{ringcap}", &ringcap.to_string_lossy())
        .replace("{packets}", &packets.to_string())
        .replace("{rate}", &rate_args(rate).join(" "))
        .replace("{dist}", dist)
        .replace("{cpu}", &gen_cpu.to_string())
}

fn parse_ethtool_stats(ethtool_s: &str) -> Vec<(String, u64)> {
    ethtool_s
        .lines()
        .filter_map(|l| l.trim().split_once(':'))
        .filter_map(|(k, v)| Some((k.trim().to_string(), v.trim().parse::<u64>().ok()?)))
        .collect()
}

/// The driver counters that changed between two readings, one "name +delta" line each.
pub fn stats_delta(before: &[(String, u64)], after: &[(String, u64)]) -> String {
    let mut out = String::new();
    for (k, v) in after {
        let old = before.iter().find(|(n, _)| n == k).map_or(0, |(_, o)| *o);
        if *v != old {
            out.push_str(&format!("{k} +{}\n", v.wrapping_sub(old)));
        }
    }
    out
}

/// The generator's report in its output: `ringcap gen --json`'s line (stderr warnings may come first).
/// Without one (another generator), the packets are unknown and the duration is the command's wall time.
pub fn read_sent(log: &Path, started: Instant) -> Sent {
    let text = fs::read_to_string(log).unwrap_or_default();
    let report = text
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    match report {
        Some(v) if v["packets"].is_u64() => Sent {
            packets: v["packets"].as_u64(),
            duration_s: v["duration_s"].as_f64().unwrap_or(0.0),
            start_ns: None,
        },
        _ => Sent {
            packets: None,
            duration_s: started.elapsed().as_secs_f64(),
            start_ns: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_fields_are_filled() {
        let t =
            "ssh gen1 {ringcap} gen -i eth2 -n {packets} {rate} --dist {dist} --cpu {cpu} --json";
        let s = expand(
            t,
            Path::new("/usr/bin/ringcap"),
            1000,
            Rate::Pps(5e4),
            "fixed:46",
            1,
        );
        assert_eq!(
            s,
            "ssh gen1 /usr/bin/ringcap gen -i eth2 -n 1000 --pps 50000 --dist fixed:46 --cpu 1 --json"
        );
        let s = expand("x {rate} y", Path::new("r"), 1, Rate::Max, "d", 0);
        assert_eq!(s, "x  y");
    }

    #[test]
    fn driver_counters_that_changed_are_listed() {
        // `ethtool -S` as an i40e port prints it, before and after a run.
        let a = parse_ethtool_stats(
            "NIC statistics:\n     rx_packets: 100\n     port.rx_dropped: 7\n     tx_packets: 3\n",
        );
        let b = parse_ethtool_stats(
            "NIC statistics:\n     rx_packets: 150\n     port.rx_dropped: 9\n     tx_packets: 3\n",
        );
        assert_eq!(stats_delta(&a, &b), "rx_packets +50\nport.rx_dropped +2\n");
        assert!(parse_ethtool_stats("no stats available\n").is_empty());
    }
}
