//! Wireshark's extcap protocol: with `ringcap` linked into Wireshark's extcap folder (`make install` does it),
//! Wireshark and tshark list ringcap's live interfaces (ring capture, fanout threads, snap length, ring size)
//! and the time machine's store (a time range and a capture filter → the stored packets), and capture from
//! them. Wireshark calls the binary with `--extcap-*` flags; each call is mapped to `ringcap capture` or
//! `ringcap query` writing pcap to Wireshark's FIFO.
//! Protocol: https://www.wireshark.org/docs/wsdg_html_chunked/ChCaptureExtcap.html

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Parser;

use crate::Fatal;

/// Interface names Wireshark sees: `ringcap_<interface>` for live capture, `ringcap_store` for the store.
const PREFIX: &str = "ringcap_";
const STORE: &str = "ringcap_store";
/// Where the store is unless the configuration says otherwise.
const DEFAULT_STORE: &str = "/var/lib/ringcap";

/// Whether Wireshark is calling (its flags come first).
pub fn is_extcap_call(args: &[std::ffi::OsString]) -> bool {
    args.get(1)
        .and_then(|a| a.to_str())
        .is_some_and(|a| a.starts_with("--extcap-") || a == "--capture")
}

#[derive(Parser, Debug)]
#[command(
    name = "ringcap",
    about = "Wireshark extcap interface of ringcap (called by Wireshark)"
)]
struct ExtcapArgs {
    #[arg(long)]
    extcap_interfaces: bool,
    #[arg(long, value_name = "VERSION")]
    extcap_version: Option<String>,
    #[arg(long, value_name = "NAME")]
    extcap_interface: Option<String>,
    #[arg(long)]
    extcap_dlts: bool,
    #[arg(long)]
    extcap_config: bool,
    #[arg(long)]
    capture: bool,
    #[arg(long, value_name = "PATH")]
    fifo: Option<PathBuf>,
    #[arg(long, value_name = "EXPR")]
    extcap_capture_filter: Option<String>,
    /// Live: bytes kept per packet.
    #[arg(long, default_value_t = 262_144)]
    snaplen: u32,
    /// Live: ring size per thread in MiB.
    #[arg(long, default_value_t = 64)]
    buffer_mib: u32,
    /// Live: capture threads (PACKET_FANOUT).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Store: its directory.
    #[arg(long)]
    store: Option<PathBuf>,
    /// Store: packets at or after this time.
    #[arg(long)]
    after: Option<String>,
    /// Store: packets before this time.
    #[arg(long)]
    before: Option<String>,
}

pub fn run(args: Vec<std::ffi::OsString>) -> Result<(), Fatal> {
    let a = ExtcapArgs::try_parse_from(args).map_err(|e| Fatal::usage(anyhow!("{e}")))?;
    if a.extcap_interfaces {
        print!("{}", interfaces());
        return Ok(());
    }
    let name = a.extcap_interface.clone().ok_or_else(|| {
        Fatal::usage(anyhow!(
            "--extcap-interface NAME is needed (see --extcap-interfaces)"
        ))
    })?;
    let target = Target::parse(&name)?;
    if a.extcap_dlts {
        print!("{}", dlts(&target)?);
        return Ok(());
    }
    if a.extcap_config {
        print!("{}", config(&target));
        return Ok(());
    }
    if a.capture {
        return capture(&a, &target);
    }
    Err(Fatal::usage(anyhow!(
        "nothing to do: Wireshark calls ringcap with --extcap-interfaces, --extcap-dlts, --extcap-config or --capture"
    )))
}

enum Target {
    Live(String),
    Store,
}

impl Target {
    fn parse(name: &str) -> Result<Target, Fatal> {
        if name == STORE {
            return Ok(Target::Store);
        }
        name.strip_prefix(PREFIX)
            .map(|i| Target::Live(i.to_string()))
            .ok_or_else(|| Fatal::usage(anyhow!("{name:?} is not a ringcap extcap interface")))
    }
}

/// Every interface ringcap can capture here, then the store.
fn interfaces() -> String {
    let mut out = format!(
        "extcap {{version={}}}{{help=https://github.com/ringcap/ringcap}}\n",
        env!("CARGO_PKG_VERSION")
    );
    for name in sys::interface_names() {
        if capture::interface_link_type(&name).is_ok() {
            out += &format!(
                "interface {{value={PREFIX}{name}}}{{display=ringcap ring capture: {name}}}\n"
            );
        }
    }
    out +=
        &format!("interface {{value={STORE}}}{{display=ringcap time machine (stored packets)}}\n");
    out
}

fn dlts(target: &Target) -> Result<String, Fatal> {
    let lt = match target {
        Target::Live(i) => capture::interface_link_type(i).map_err(|e| Fatal::usage(anyhow!(e)))?,
        // A store holds what its captures wrote: Ethernet unless captured on a raw-IP interface.
        Target::Store => wire::LinkType::Ethernet,
    };
    Ok(format!(
        "dlt {{number={}}}{{name={}}}{{display={}}}\n",
        lt.pcap(),
        lt.name(),
        lt.name()
    ))
}

fn config(target: &Target) -> String {
    match target {
        Target::Live(_) => [
            "arg {number=0}{call=--snaplen}{display=Snap length}{type=integer}{range=1,262144}{default=262144}{tooltip=Bytes kept of each packet}",
            "arg {number=1}{call=--buffer-mib}{display=Ring size per thread (MiB)}{type=integer}{range=1,4096}{default=64}{tooltip=The memory-mapped ring the kernel fills}",
            "arg {number=2}{call=--threads}{display=Capture threads}{type=integer}{range=1,64}{default=1}{tooltip=Threads sharing the traffic by flow (PACKET_FANOUT)}",
        ]
        .join("\n") + "\n",
        Target::Store => format!(
            "arg {{number=0}}{{call=--store}}{{display=Store directory}}{{type=string}}{{required=true}}{{default={DEFAULT_STORE}}}{{tooltip=Where ringcap capture writes its files}}\n\
             arg {{number=1}}{{call=--after}}{{display=After}}{{type=string}}{{tooltip=RFC 3339 time, @unix seconds or e.g. 10m ago}}\n\
             arg {{number=2}}{{call=--before}}{{display=Before}}{{type=string}}{{tooltip=RFC 3339 time, @unix seconds or e.g. 5m ago}}\n"
        ),
    }
}

/// Runs the capture or the query the call asks for, writing pcap to Wireshark's FIFO.
fn capture(a: &ExtcapArgs, target: &Target) -> Result<(), Fatal> {
    let fifo = a
        .fifo
        .as_ref()
        .ok_or_else(|| Fatal::usage(anyhow!("--capture needs --fifo PATH")))?
        .to_string_lossy()
        .into_owned();
    let filter = a.extcap_capture_filter.clone().unwrap_or_default();
    let mut argv: Vec<String> = vec!["ringcap".into()];
    match target {
        Target::Live(iface) => {
            argv.extend(
                [
                    "capture",
                    "-i",
                    iface,
                    "-w",
                    &fifo,
                    "-F",
                    "pcap-ns",
                    "-q",
                    "-s",
                    &a.snaplen.to_string(),
                    "-B",
                    &(u64::from(a.buffer_mib) * 1024).to_string(),
                    "--threads",
                    &a.threads.to_string(),
                ]
                .map(String::from),
            );
            if !filter.trim().is_empty() {
                argv.push(filter);
            }
        }
        Target::Store => {
            let store = a.store.clone().unwrap_or_else(|| DEFAULT_STORE.into());
            argv.extend(["query".into(), store.to_string_lossy().into_owned()]);
            if !filter.trim().is_empty() {
                argv.push(filter);
            }
            argv.extend([
                "-w".into(),
                fifo,
                "-F".into(),
                "pcap-ns".into(),
                "-q".into(),
            ]);
            for (flag, v) in [("--after", &a.after), ("--before", &a.before)] {
                if let Some(v) = v.as_ref().filter(|v| !v.trim().is_empty()) {
                    argv.extend([flag.to_string(), v.clone()]);
                }
            }
        }
    }
    let cli = crate::cli::Cli::try_parse_from(&argv).map_err(|e| Fatal::usage(anyhow!("{e}")))?;
    // Wireshark reports anything an extcap writes on stderr as an error: the listening line and the
    // summary stay unsaid, the error that ends the run (printed by main) is said.
    let said = silence_stderr();
    let result = match cli.command {
        crate::cli::Command::Capture(c) => crate::capture_cmd::run(*c),
        crate::cli::Command::Query(q) => crate::query_cmd::run(q),
        _ => unreachable!("the argv above names capture or query"),
    };
    if let Some(fd) = said {
        // SAFETY: fd is the saved stderr, a descriptor we own.
        unsafe {
            libc::dup2(fd, 2);
            libc::close(fd);
        }
    }
    result
}

/// Points stderr at /dev/null; returns the saved stderr to put back (None if that failed: then it stays).
fn silence_stderr() -> Option<libc::c_int> {
    // SAFETY: dup/open/dup2/close on descriptors we own; a failure leaves stderr as it was.
    unsafe {
        let saved = libc::dup(2);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if saved < 0 || null < 0 {
            return None;
        }
        libc::fcntl(saved, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::dup2(null, 2);
        libc::close(null);
        Some(saved)
    }
}
