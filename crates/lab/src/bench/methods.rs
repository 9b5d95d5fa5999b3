//! Capture methods: the command a user would type for each tool, the line it prints once it captures,
//! how its output is counted, and how its final summary reports drops. The command lines, ready lines
//! and summary formats are the ones scripts/bench-capture.sh proved on this testbed.

use std::path::{Path, PathBuf};

use crate::plan::{pipe_method, Count, CustomMethod, Output, Plan, Setup};

/// Whose summary format a log holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummaryKind {
    /// ringcap: tcpdump's three lines plus "drops by stage: kernel K, storage S".
    Ringcap,
    /// tcpdump (also the producer of a pipeline, and plan-defined commands).
    Tcpdump,
    NetsniffNg,
    Dumpcap,
}

/// How to start one capturer.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    /// argv (run inside the Rx namespace).
    pub argv: Vec<String>,
    /// A line the tool prints once it captures; empty = only wait for its packet socket.
    pub ready: String,
    pub count: Count,
    pub summary: SummaryKind,
    /// Process to send SIGINT to when argv is a shell pipeline.
    pub stop_comm: Option<String>,
    /// Seconds to wait after the last packet before stopping: libpcap tools read a TPACKET_V3 block only
    /// when it is full or its timeout (1 s for tcpdump) expires, and lose what is unread at SIGINT.
    pub drain_s: f64,
}

impl Launch {
    /// Whether the capturer reads through a bound packet socket (the readiness check counts them); ringcap's
    /// xdp source reads AF_XDP sockets instead.
    pub fn opens_packet_socket(&self) -> bool {
        !self
            .argv
            .windows(2)
            .any(|w| w[0] == "--source" && w[1] == "xdp")
    }
}

/// What a tool said at exit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub captured: Option<u64>,
    pub drop_kernel: Option<u64>,
    pub drop_ring: Option<u64>,
    pub drop_storage: Option<u64>,
}

/// Everything a command line depends on.
pub struct Ctx<'a> {
    pub iface: &'a str,
    pub out: &'a Path,
    pub cpu: usize,
    pub ringcap: &'a Path,
}

/// Is the method installed? `Err` is the reason to skip it (reported, not fatal).
pub fn available(method: &str, plan: &Plan, ringcap: &Path) -> Result<(), String> {
    let need = |prog: &str, pkg: &str| {
        if crate::machine::which(prog).is_some() {
            Ok(())
        } else {
            Err(format!("{prog} is not installed (apt install {pkg})"))
        }
    };
    match method {
        "ringcap" | "ringcap-copy" | "ringcap-xdp" | "drop-all-xdp" => {
            if ringcap.exists() {
                Ok(())
            } else {
                Err(format!("{} does not exist", ringcap.display()))
            }
        }
        "tcpdump" => need("tcpdump", "tcpdump"),
        "netsniff-ng" => need("netsniff-ng", "netsniff-ng"),
        "dumpcap" => need("dumpcap", "wireshark-common"),
        "stenographer" => {
            need("stenotype", "stenographer")?;
            // Tried on this testbed (stenotype 1.0.1, kernel 6.18): it captures (its PKT0 files are
            // TPACKET_V3 blocks, countable from each block's num_pkts), but after SIGINT it logs
            // "stopping threads" and never exits (3 min, with --blockage_sec=1 too), so a run cannot end.
            Err("stenotype does not exit after SIGINT on this testbed (still running minutes later), so a run cannot end; not supported by this runner yet".into())
        }
        m if pipe_method(m).is_some() => need("tcpdump", "tcpdump").and(need("gzip", "gzip")),
        m => match plan.methods.get(m) {
            Some(c) => {
                let prog = first_program(&c.command);
                if prog == "{ringcap}" || crate::machine::which(&prog).is_some() {
                    Ok(())
                } else {
                    Err(format!(
                        "{prog} (from [methods.\"{m}\"] command) is not installed"
                    ))
                }
            }
            None => Err(format!("unknown method `{m}`")),
        },
    }
}

/// The first word of a shell command (the program it runs first).
fn first_program(command: &str) -> String {
    let w = command.split_whitespace().next().unwrap_or("");
    Path::new(w)
        .file_name()
        .map_or(w.to_string(), |f| f.to_string_lossy().into_owned())
}

/// Output file extension of a method.
pub fn extension(method: &str, plan: &Plan) -> String {
    match method {
        "dumpcap" => "pcapng".into(),
        m if pipe_method(m).is_some() => "pcap.gz".into(),
        m => plan
            .methods
            .get(m)
            .map_or_else(|| "pcap".into(), |c| c.ext.clone()),
    }
}

/// Quote for sh: one argument whatever it contains.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The command line for one capturer, or why this method cannot do this setup.
pub fn launch(method: &str, s: &Setup, c: &Ctx, plan: &Plan) -> Result<Launch, String> {
    let out = c.out.to_string_lossy().into_owned();
    let is_ringcap = matches!(method, "ringcap" | "ringcap-copy" | "ringcap-xdp");
    if s.load.is_some() && !is_ringcap {
        return Err(format!(
            "load is a ringcap capture option (--load); {method} has none"
        ));
    }
    let snap = (s.snaplen > 0).then(|| s.snaplen.to_string());
    let filter = s.filter.clone();
    let str_vec = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let l = match method {
        // The ceiling: seed 002's offered-rate oracle in the driver (counts from its summary).
        "drop-all-xdp" => {
            if snap.is_some() || filter.is_some() {
                return Err("drop-all-xdp counts every packet: no snaplen or filter".into());
            }
            Launch {
                argv: vec![
                    c.ringcap.to_string_lossy().into_owned(),
                    "capture".into(),
                    "-i".into(),
                    c.iface.into(),
                    "--source".into(),
                    "xdp".into(),
                    "--drop-all".into(),
                    "-q".into(),
                ],
                ready: "listening on".into(),
                count: Count::Stderr,
                summary: SummaryKind::Ringcap,
                stop_comm: None,
                drain_s: 0.3,
            }
        }
        "ringcap" | "ringcap-copy" | "ringcap-xdp" => {
            let mut a = vec![
                c.ringcap.to_string_lossy().into_owned(),
                "capture".into(),
                "-i".into(),
                c.iface.into(),
                "-w".into(),
                out,
                "--source".into(),
                match method {
                    "ringcap" => "ring",
                    "ringcap-copy" => "copy",
                    _ => "xdp",
                }
                .into(),
                "--cpus".into(),
                c.cpu.to_string(),
                "-q".into(),
                "-B".into(),
                s.buffer_kib.to_string(),
            ];
            if let Some(n) = &snap {
                a.extend(["-s".into(), n.clone()]);
            }
            if let Some(load) = &s.load {
                a.extend(["--load".into(), load.clone()]);
            }
            a.extend(filter);
            Launch {
                argv: a,
                ready: "listening on".into(),
                count: Count::File,
                summary: SummaryKind::Ringcap,
                stop_comm: None,
                // ringcap closes partly filled blocks after 20 ms (--block-timeout).
                drain_s: 0.3,
            }
        }
        "tcpdump" => {
            let mut a = str_vec(&[
                "tcpdump",
                "-B",
                &s.buffer_kib.to_string(),
                "-i",
                c.iface,
                "-w",
                &out,
            ]);
            if let Some(n) = &snap {
                a.extend(["-s".into(), n.clone()]);
            }
            a.extend(filter);
            Launch {
                argv: a,
                ready: "listening on".into(),
                count: Count::File,
                summary: SummaryKind::Tcpdump,
                stop_comm: None,
                drain_s: 1.5,
            }
        }
        "netsniff-ng" => {
            if snap.is_some() {
                return Err("netsniff-ng has no snapshot length option".into());
            }
            let ring = format!("{}KiB", s.buffer_kib);
            let mut a = str_vec(&[
                "netsniff-ng",
                "--ring-size",
                &ring,
                "-i",
                c.iface,
                "-o",
                &out,
                "-s",
            ]);
            a.extend(filter);
            Launch {
                argv: a,
                ready: "Running!".into(),
                count: Count::File,
                summary: SummaryKind::NetsniffNg,
                stop_comm: None,
                drain_s: 1.5,
            }
        }
        "dumpcap" => {
            // dumpcap's -B is in MiB.
            let mib = s.buffer_kib.div_ceil(1024).max(1).to_string();
            let mut a = str_vec(&["dumpcap", "-B", &mib, "-i", c.iface, "-w", &out]);
            if let Some(n) = &snap {
                a.extend(["-s".into(), n.clone()]);
            }
            if let Some(f) = filter {
                a.extend(["-f".into(), f]);
            }
            Launch {
                argv: a,
                ready: "Capturing on".into(),
                count: Count::File,
                summary: SummaryKind::Dumpcap,
                stop_comm: None,
                drain_s: 1.5,
            }
        }
        m if pipe_method(m).is_some() => {
            let level = pipe_method(m).unwrap_or(1);
            let mut td = format!("tcpdump -B {} -i {} -w -", s.buffer_kib, sh_quote(c.iface));
            if let Some(n) = &snap {
                td.push_str(&format!(" -s {n}"));
            }
            if let Some(f) = &filter {
                td.push(' ');
                td.push_str(&sh_quote(f));
            }
            Launch {
                argv: str_vec(&[
                    "sh",
                    "-c",
                    &format!("{td} | gzip -{level} > {}", sh_quote(&out)),
                ]),
                ready: "listening on".into(),
                count: Count::File,
                summary: SummaryKind::Tcpdump,
                stop_comm: Some("tcpdump".into()),
                drain_s: 1.5,
            }
        }
        m => {
            let Some(cm) = plan.methods.get(m) else {
                return Err(format!("unknown method `{m}`"));
            };
            custom(cm, s, c)
        }
    };
    Ok(l)
}

fn custom(cm: &CustomMethod, s: &Setup, c: &Ctx) -> Launch {
    let cmd = cm
        .command
        .replace("{ringcap}", &sh_quote(&c.ringcap.to_string_lossy()))
        .replace("{if}", &sh_quote(c.iface))
        .replace("{out}", &sh_quote(&c.out.to_string_lossy()))
        .replace("{cpu}", &c.cpu.to_string())
        .replace("{buffer_kib}", &s.buffer_kib.to_string())
        .replace(
            "{buffer_mib}",
            &s.buffer_kib.div_ceil(1024).max(1).to_string(),
        )
        .replace("{snaplen}", &s.snaplen.to_string())
        .replace(
            "{filter}",
            &s.filter.as_deref().map(sh_quote).unwrap_or_default(),
        );
    let pipeline = cmd.contains(['|', ';', '&']);
    // A plain command replaces the shell (exec), so signals reach the tool itself.
    let script = if pipeline {
        cmd.clone()
    } else {
        format!("exec {cmd}")
    };
    let prog = first_program(&cm.command);
    Launch {
        argv: vec!["sh".into(), "-c".into(), script],
        ready: cm.ready.clone(),
        count: cm.count,
        summary: SummaryKind::Tcpdump,
        stop_comm: pipeline.then_some(prog),
        drain_s: 1.5,
    }
}

/// Where a capturer writes: a file in the disk directory, or /dev/null.
pub fn output_path(s: &Setup, disk_dir: &Path, stem: &str, ext: &str) -> PathBuf {
    match s.output {
        Output::Disk => disk_dir.join(format!("{stem}.{ext}")),
        Output::Null => PathBuf::from("/dev/null"),
    }
}

/// First number of the last line containing `pat` (tools print progress lines before the summary).
fn number_before(text: &str, pat: &str) -> Option<u64> {
    text.lines()
        .rev()
        .find(|l| l.contains(pat))
        .and_then(|l| l.split_whitespace().find_map(|w| w.parse().ok()))
}

/// Parse a tool's final summary out of its log (stdout and stderr together).
pub fn parse_summary(kind: SummaryKind, log: &str) -> Summary {
    // netsniff-ng and dumpcap redraw a counter with \r.
    let text = log.replace('\r', "\n");
    match kind {
        SummaryKind::Tcpdump | SummaryKind::Ringcap => {
            let mut s = Summary {
                captured: number_before(&text, "packets captured"),
                drop_kernel: number_before(&text, "packets dropped by kernel"),
                ..Summary::default()
            };
            if kind == SummaryKind::Ringcap {
                // "ringcap: ...; drops by stage: kernel K, storage S"
                if let Some(line) = text.lines().rev().find(|l| l.contains("drops by stage:")) {
                    let stages = line.split("drops by stage:").nth(1).unwrap_or("");
                    for part in stages.split(',') {
                        let mut w = part.split_whitespace();
                        let (Some(name), Some(n)) =
                            (w.next(), w.next().and_then(|n| n.parse().ok()))
                        else {
                            continue;
                        };
                        match name {
                            "kernel" => s.drop_kernel = Some(n),
                            "storage" => s.drop_storage = Some(n),
                            _ => {}
                        }
                    }
                }
            }
            s
        }
        SummaryKind::NetsniffNg => {
            // "N  packets incoming (U unread on exit)", "N  packets passed filter",
            // "N  packets failed filter (out of space)": passed minus unread reached the file.
            let incoming = text.lines().rev().find(|l| l.contains("packets incoming"));
            let unread = incoming.and_then(|l| {
                l.split('(')
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse::<u64>().ok())
            });
            let passed = number_before(&text, "packets passed filter");
            Summary {
                captured: passed.map(|p| p.saturating_sub(unread.unwrap_or(0))),
                drop_kernel: None,
                drop_ring: number_before(&text, "packets failed filter"),
                drop_storage: None,
            }
        }
        SummaryKind::Dumpcap => {
            // "Packets captured: N" and
            // "Packets received/dropped on interface 'IF': R/D (pcap:a/dumpcap:b/flushed:c/ps_ifdrop:d) (x%)"
            let captured = text
                .lines()
                .rev()
                .find(|l| l.contains("Packets captured:"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|n| n.trim().parse().ok());
            let mut s = Summary {
                captured,
                ..Summary::default()
            };
            if let Some(line) = text
                .lines()
                .rev()
                .find(|l| l.contains("received/dropped on interface"))
            {
                let field = |name: &str| -> Option<u64> {
                    let i = line.find(&format!("{name}:"))?;
                    line[i + name.len() + 1..]
                        .split(|ch: char| !ch.is_ascii_digit())
                        .next()?
                        .parse()
                        .ok()
                };
                // pcap: the kernel (ring full); ps_ifdrop: the interface; dumpcap: its own buffer.
                s.drop_kernel = match (field("pcap"), field("ps_ifdrop")) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
                };
                s.drop_storage = field("dumpcap");
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_as_the_tools_print_them() {
        let ringcap = "ringcap: listening on veth-rx\n1000 packets captured\n1000 packets received by filter\n3 packets dropped by kernel\nringcap: 60 kB in 1.0 s (1 kpps, 480 kb/s); drops by stage: kernel 3, storage 7\n";
        assert_eq!(
            parse_summary(SummaryKind::Ringcap, ringcap),
            Summary {
                captured: Some(1000),
                drop_kernel: Some(3),
                drop_ring: None,
                drop_storage: Some(7)
            }
        );
        let td = "tcpdump: listening on veth-rx, link-type EN10MB (Ethernet), snapshot length 262144 bytes\n200000 packets captured\n200000 packets received by filter\n12 packets dropped by kernel\n";
        let s = parse_summary(SummaryKind::Tcpdump, td);
        assert_eq!((s.captured, s.drop_kernel), (Some(200000), Some(12)));
        let ns = "Running! Hang up with ^C!\n\r    12 packets\r\n\r\n        199990  packets incoming (5 unread on exit)\n        199990  packets passed filter\n             4  packets failed filter (out of space)\n";
        let s = parse_summary(SummaryKind::NetsniffNg, ns);
        assert_eq!((s.captured, s.drop_ring), (Some(199985), Some(4)));
        let dc = "Capturing on 'veth-rx'\rPackets: 100 \rPackets: 199000 \nPackets captured: 199000\nPackets received/dropped on interface 'veth-rx': 199010/10 (pcap:8/dumpcap:1/flushed:0/ps_ifdrop:2) (99.9%)\n";
        let s = parse_summary(SummaryKind::Dumpcap, dc);
        assert_eq!(
            (s.captured, s.drop_kernel, s.drop_storage),
            (Some(199000), Some(10), Some(1))
        );
        assert_eq!(
            parse_summary(SummaryKind::Dumpcap, "garbage"),
            Summary::default()
        );
    }

    #[test]
    fn command_lines() {
        let plan = Plan::parse(
            "[methods.mine]\ncommand = \"tcpdump -i {if} -w {out} {filter}\"\n[methods.piped]\ncommand = \"tcpdump -i {if} -w - | lz4 > {out}\"\next = \"pcap.lz4\"\n",
            Path::new("."),
        )
        .unwrap();
        let s = Setup {
            filter: Some("udp and port 9".into()),
            buffer_kib: 4096,
            ..Setup::default()
        };
        let c = Ctx {
            iface: "veth-rx",
            out: Path::new("/var/tmp/x y.pcap"),
            cpu: 1,
            ringcap: Path::new("/bin/ringcap"),
        };
        let l = launch("dumpcap", &s, &c, &plan).unwrap();
        assert_eq!(
            l.argv.join(" "),
            "dumpcap -B 4 -i veth-rx -w /var/tmp/x y.pcap -f udp and port 9"
        );
        let l = launch("tcpdump|gzip -3", &s, &c, &plan).unwrap();
        assert_eq!(
            l.argv[2],
            "tcpdump -B 4096 -i veth-rx -w - 'udp and port 9' | gzip -3 > '/var/tmp/x y.pcap'"
        );
        assert_eq!(l.stop_comm.as_deref(), Some("tcpdump"));
        let l = launch("mine", &s, &c, &plan).unwrap();
        assert_eq!(
            l.argv[2],
            "exec tcpdump -i veth-rx -w '/var/tmp/x y.pcap' 'udp and port 9'"
        );
        assert_eq!(l.stop_comm, None);
        let l = launch("piped", &s, &c, &plan).unwrap();
        assert_eq!(l.stop_comm.as_deref(), Some("tcpdump"));
        let loaded = Setup {
            load: Some("zstd:3".into()),
            ..Setup::default()
        };
        assert!(launch("tcpdump", &loaded, &c, &plan)
            .unwrap_err()
            .contains("--load"));
        let l = launch("ringcap-copy", &loaded, &c, &plan).unwrap();
        assert!(l
            .argv
            .join(" ")
            .ends_with("--source copy --cpus 1 -q -B 65536 --load zstd:3"));
        assert_eq!(extension("piped", &plan), "pcap.lz4");
        assert_eq!(extension("tcpdump|gzip -1", &plan), "pcap.gz");
    }
}
