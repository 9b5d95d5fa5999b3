//! `ringcap serve` checks each query in a child process before compiling it itself: libpcap's
//! optimiser can take minutes and gigabytes on a 16 KiB expression (`port 1 or … or port 1345`:
//! 720 MB, minutes), and a deeply nested one overflows a parser's stack; neither can be stopped
//! inside a thread. The child (`ringcap __check-filter`, this binary again through
//! /proc/self/exe) parses the query as `ringcap query` does, refuses host and network names
//! (unless `--allow-names`), and compiles the filter with libpcap for Ethernet, under an address
//! space limit, on a stack half a connection thread's; serve kills it when the time is up or the
//! client hangs up. Only an expression that passed is parsed and compiled in the server.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// The hidden subcommand that runs the check (the first argument, before clap sees anything).
pub const SUBCOMMAND: &str = "__check-filter";
/// Address space of the child (RLIMIT_AS): a filter that needs more is refused. A store's
/// filters compile in a few MiB; the expression of issue 33 wanted 720 MB.
pub const CHECK_MEMORY: u64 = 256 << 20;
/// Longest a check may take, when --query-timeout does not leave less.
pub const CHECK_TIME: Duration = Duration::from_secs(10);
/// The child checks on this stack: half of what a connection thread has, so anything that passed
/// there is parsed again in the server with room to spare (same code, same depth).
const CHECK_STACK: usize = httpd::CONNECTION_STACK / 2;
/// How much of the expression the child reads (serve's request bodies are at most 16 KiB).
const MAX_EXPR: u64 = 1 << 20;
/// The child's exit codes (2 is left out: flex's fatal errors exit with it).
const EXIT_REFUSED: u8 = 1;
const EXIT_NO_MEMORY: u8 = 3;

/// What the check said of a query.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It parses and compiles; no name to look up (or names allowed).
    Passed,
    /// A bad query: the message says why (libpcap's words for a bad filter).
    Refused(String),
    /// Compiling it needs more than the child's time or memory: what was exceeded.
    TooCostly(String),
    /// The client hung up while the check ran; the child was killed.
    ClientGone,
    /// The check itself could not run or ended strangely (a bug, not the client's fault).
    Failed(String),
}

/// Checks `expr` in a child, killed at `deadline` (at most [`CHECK_TIME`] from now) or as soon
/// as `hung_up(wait)` (waiting up to `wait` for it) says the client is gone.
pub fn check(
    expr: &str,
    links: &[store::FileLink],
    allow_names: bool,
    deadline: Option<Instant>,
    mut hung_up: impl FnMut(Duration) -> bool,
) -> Verdict {
    let started = Instant::now();
    let limit = deadline
        .map_or(CHECK_TIME, |d| d.saturating_duration_since(started))
        .min(CHECK_TIME);
    let over_time = || {
        Verdict::TooCostly(format!(
            "the filter is too costly to compile: over {:.1} s{}",
            limit.as_secs_f64(),
            if limit < CHECK_TIME {
                " (what --query-timeout left)"
            } else {
                ""
            }
        ))
    };
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg(SUBCOMMAND)
        .args(allow_names.then_some("--allow-names"))
        .args(links.iter().map(|l| {
            format!(
                "--link={}:{}:{}",
                l.linktype,
                l.snaplen,
                u8::from(l.swapped)
            )
        }))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // One malloc arena: each further one reserves 64 MiB of the address space.
        .env("MALLOC_ARENA_MAX", "1")
        .env("RUST_BACKTRACE", "0");
    let cpu = limit.as_secs() + 2;
    // SAFETY: only async-signal-safe system calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let set = |what, soft: u64, hard: u64| {
                let l = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                if libc::setrlimit(what, &l) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            };
            set(libc::RLIMIT_AS, CHECK_MEMORY, CHECK_MEMORY)?;
            set(libc::RLIMIT_CORE, 0, 0)?;
            // Bounded even if serve is killed before it can kill the child.
            set(libc::RLIMIT_CPU, cpu, cpu + 1)?;
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Verdict::Failed(format!("cannot start the filter check: {e}")),
    };
    // At most 16 KiB into a 64 KiB pipe: written whole without waiting for the child.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(expr.as_bytes());
    }
    let mut wait = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Verdict::Failed(format!("the filter check: {e}")),
        }
        let left = limit.saturating_sub(started.elapsed());
        let gone = !left.is_zero() && hung_up(wait.min(left));
        if left.is_zero() || gone {
            let _ = child.kill();
            let _ = child.wait();
            return if gone {
                Verdict::ClientGone
            } else {
                over_time()
            };
        }
        wait = (wait * 2).min(Duration::from_millis(20));
    };
    let text = |pipe: Option<&mut dyn Read>| {
        let mut s = String::new();
        if let Some(p) = pipe {
            let _ = p.take(64 << 10).read_to_string(&mut s);
        }
        s.trim().to_string()
    };
    let out = text(child.stdout.as_mut().map(|p| p as &mut dyn Read));
    let err = text(child.stderr.as_mut().map(|p| p as &mut dyn Read));
    let over_memory = || {
        Verdict::TooCostly(format!(
            "the filter is too costly to compile: over {} MiB",
            CHECK_MEMORY >> 20
        ))
    };
    match status.code() {
        Some(0) => Verdict::Passed,
        Some(c) if c == EXIT_REFUSED as i32 => Verdict::Refused(out),
        Some(c) if c == EXIT_NO_MEMORY as i32 => over_memory(),
        // Rust's and flex's words when an allocation fails.
        _ if err.contains("memory allocation of") || err.contains("out of dynamic memory") => {
            over_memory()
        }
        _ if err.contains("overflowed its stack") => Verdict::Refused(format!(
            "the expression is nested too deeply (its check overflowed a {} MiB stack)",
            CHECK_STACK as f64 / (1 << 20) as f64
        )),
        _ if matches!(status.signal(), Some(libc::SIGXCPU) | Some(libc::SIGKILL)) => over_time(),
        _ => Verdict::Failed(format!(
            "the filter check ended with {status}: {}",
            err.lines().next().unwrap_or("")
        )),
    }
}

/// `ringcap __check-filter [--allow-names]`: the child. Reads the query on stdin; exits 0 when
/// it passes, else prints why and exits [`EXIT_REFUSED`] or [`EXIT_NO_MEMORY`].
pub fn child_main(args: &[OsString]) -> ExitCode {
    let allow_names = args.iter().any(|a| a == "--allow-names");
    // The store's links (`--link=LINKTYPE:SNAPLEN:SWAPPED`), which the query will compile for.
    let links: Vec<bpf::SavefileLink> = args
        .iter()
        .filter_map(|a| a.to_str()?.strip_prefix("--link="))
        .filter_map(|v| {
            let mut f = v.split(':').map(|x| x.parse::<u32>().ok());
            Some(bpf::SavefileLink {
                linktype: f.next()??,
                snaplen: f.next()??,
                swapped: f.next()?? != 0,
            })
        })
        .collect();
    // It needs nothing but its stdin and stdout.
    let _ = sys::keep_only_capabilities(&[]);
    let mut expr = String::new();
    if std::io::stdin()
        .take(MAX_EXPR)
        .read_to_string(&mut expr)
        .is_err()
    {
        println!("the query must be UTF-8 text");
        return ExitCode::from(EXIT_REFUSED);
    }
    let checked = std::thread::Builder::new()
        .name("check-filter".into())
        .stack_size(CHECK_STACK)
        .spawn(move || verdict(&expr, &links, allow_names))
        .map(|t| t.join());
    let (code, why) = match checked {
        Ok(Ok(v)) => v,
        _ => (101, "the filter check failed".to_string()),
    };
    if !why.is_empty() {
        println!("{}", truncate(&why, 32 << 10));
    }
    ExitCode::from(code)
}

/// The exit code and message of the check of `expr`: the query parsed as `ringcap query`
/// parses it, its filter compiled as the query compiles it, for each of the store's links (for
/// Ethernet when the store has no file yet), so that libpcap's running out of memory can be told
/// from a typo.
fn verdict(expr: &str, links: &[bpf::SavefileLink], allow_names: bool) -> (u8, String) {
    let q = match index::parse_query(expr.trim(), sys::now_ns()) {
        Ok(q) => q,
        Err(e) => return (EXIT_REFUSED, e),
    };
    if !allow_names {
        if let Some(name) = looked_up_name(&q.filter) {
            return (
                EXIT_REFUSED,
                format!(
                    "{name:?} would be looked up as a host or network name (DNS) on the sensor; \
                     give addresses instead (host 192.0.2.1, net 10.0.0.0/8, ether host 00:11:22:33:44:55); \
                     port and protocol names are fine (ringcap serve --allow-names allows names)"
                ),
            );
        }
    }
    if q.filter.is_empty() {
        return (0, String::new());
    }
    let ethernet = [bpf::SavefileLink {
        linktype: 1,
        snaplen: bpf::MAX_SNAPLEN,
        swapped: false,
    }];
    let links = if links.is_empty() {
        &ethernet[..]
    } else {
        links
    };
    for &link in links {
        match index::compile_query(&q, link) {
            Ok(_) => {}
            Err(bpf::FilterError::Syntax { message, .. }) if out_of_memory(&message) => {
                return (EXIT_NO_MEMORY, message)
            }
            Err(e) => return (EXIT_REFUSED, e.to_string()),
        }
    }
    (0, String::new())
}

/// libpcap's words when an allocation failed (its optimiser says "malloc", the code generator
/// "out of memory"). Bison's "memory exhausted" is its nesting limit, a client's error.
fn out_of_memory(message: &str) -> bool {
    let m = message.trim();
    m == "malloc"
        || m == "calloc"
        || m == "realloc"
        || m.contains("out of memory")
        || m.contains("Cannot allocate memory")
}

fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// What a bare word names where it stands: libpcap gives a word the qualifiers of the term
/// before it (`port 80 or http`: a port; `host a or b`: a host), across `and`, `or`, `not` and
/// parentheses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Names {
    /// A host (DNS, /etc/hosts), network (/etc/networks) or Ethernet host (/etc/ethers): what
    /// a word with no qualifier, or after host/net/gateway/src/dst or a protocol, names.
    Host,
    /// A port (/etc/services) or protocol (/etc/protocols): local files, fine.
    Local,
}

/// libpcap's keywords (its scanner's), which are never names.
const KEYWORDS: &[&str] = &[
    "dst",
    "src",
    "link",
    "ether",
    "ppp",
    "slip",
    "fddi",
    "tr",
    "wlan",
    "arp",
    "rarp",
    "ip",
    "sctp",
    "tcp",
    "udp",
    "icmp",
    "igmp",
    "igrp",
    "pim",
    "vrrp",
    "carp",
    "radio",
    "ip6",
    "icmp6",
    "ah",
    "esp",
    "atalk",
    "aarp",
    "decnet",
    "lat",
    "sca",
    "moprc",
    "mopdl",
    "iso",
    "esis",
    "es-is",
    "isis",
    "is-is",
    "l1",
    "l2",
    "iih",
    "lsp",
    "snp",
    "csnp",
    "psnp",
    "clnp",
    "stp",
    "ipx",
    "netbeui",
    "host",
    "net",
    "mask",
    "port",
    "portrange",
    "proto",
    "protochain",
    "gateway",
    "type",
    "subtype",
    "direction",
    "dir",
    "address1",
    "addr1",
    "address2",
    "addr2",
    "address3",
    "addr3",
    "address4",
    "addr4",
    "ra",
    "ta",
    "less",
    "greater",
    "byte",
    "broadcast",
    "multicast",
    "and",
    "or",
    "not",
    "len",
    "length",
    "inbound",
    "outbound",
    "ifindex",
    "vlan",
    "mpls",
    "pppoed",
    "pppoes",
    "geneve",
    // ringcap's own tunnel terms (index::tunnel_term).
    "vxlan",
    "gre",
    "erspan",
    "lane",
    "llc",
    "metac",
    "bcc",
    "oam",
    "oamf4",
    "oamf4ec",
    "oamf4sc",
    "sc",
    "ilmic",
    "vpi",
    "vci",
    "connectmsg",
    "metaconnect",
    "on",
    "ifname",
    "rset",
    "ruleset",
    "rnr",
    "rulenum",
    "srnr",
    "subrulenum",
    "reason",
    "action",
    "fisu",
    "lssu",
    "lsu",
    "msu",
    "hfisu",
    "hlssu",
    "hmsu",
    "sio",
    "opc",
    "dpc",
    "sls",
    "hsio",
    "hopc",
    "hdpc",
    "hsls",
    "icmptype",
    "icmpcode",
    "icmp6type",
    "icmp6code",
    "tcpflags",
];

/// Whether `w` is one of libpcap's named constants (`icmp-echo`, `icmp6-echoreply`, `tcp-syn`).
fn named_constant(w: &str) -> bool {
    const TCP: &[&str] = &["fin", "syn", "rst", "push", "ack", "urg", "ece", "cwr"];
    const ICMP: &[&str] = &[
        "echoreply",
        "unreach",
        "sourcequench",
        "redirect",
        "echo",
        "routeradvert",
        "routersolicit",
        "timxceed",
        "paramprob",
        "tstamp",
        "tstampreply",
        "ireq",
        "ireqreply",
        "maskreq",
        "maskreply",
    ];
    const ICMP6: &[&str] = &[
        "destinationunreach",
        "packettoobig",
        "timeexceeded",
        "parameterproblem",
        "echo",
        "echoreply",
        "multicastlistenerquery",
        "multicastlistenerreportv1",
        "multicastlistenerdone",
        "routersolicit",
        "routeradvert",
        "neighborsolicit",
        "neighboradvert",
        "redirect",
        "routerrenum",
        "nodeinformationquery",
        "nodeinformationresponse",
        "ineighbordiscoverysolicit",
        "ineighbordiscoveryadvert",
        "multicastlistenerreportv2",
        "homeagentdiscoveryrequest",
        "homeagentdiscoveryreply",
        "mobileprefixsolicit",
        "mobileprefixadvert",
        "certpathsolicit",
        "certpathadvert",
        "multicastrouteradvert",
        "multicastroutersolicit",
        "multicastrouterterm",
    ];
    match w.split_once('-') {
        Some(("tcp", n)) => TCP.contains(&n),
        Some(("icmp", n)) => ICMP.contains(&n),
        Some(("icmp6", n)) => ICMP6.contains(&n),
        _ => false,
    }
}

/// Whether a word is a number or an address as libpcap's scanner reads them: decimal, 0x hex,
/// dotted IPv4 (whole or partial: 1 to 4 numbers), IPv6 (with colons), or a MAC (`:`, `-` or
/// `.` separated, or 12 hex digits). Anything longer is a name to it (`10.0.0.1.5`, `10.`).
fn number_or_address(w: &str) -> bool {
    let dotted = w.split('.').count() <= 4
        && w.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    let groups = |sep: char, n: usize, width: std::ops::RangeInclusive<usize>| {
        let parts: Vec<&str> = w.split(sep).collect();
        parts.len() == n && parts.iter().all(|p| hex(p) && width.contains(&p.len()))
    };
    dotted
        || (w.len() > 2 && (w.starts_with("0x") || w.starts_with("0X")) && hex(&w[2..]))
        || (w.contains(':')
            && w.bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.'))
        || groups('-', 6, 1..=2)
        || groups('.', 6, 1..=2)
        || groups('.', 3, 4..=4)
        || (w.len() == 12 && hex(w))
}

/// The first word of a libpcap filter that libpcap would look up as a host, network or Ethernet
/// host name (DNS on a sensor: a remote client must not make it resolve names, nor learn from
/// the delay what it resolves). Conservative: a bare word anywhere a host may stand counts,
/// even where libpcap would take it for something else (`port 80 and tcp and https`); port and
/// protocol names, which come from local files, do not. A linear scan with no recursion.
pub fn looked_up_name(filter: &str) -> Option<&str> {
    let b = filter.as_bytes();
    let word_byte = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b':');
    let mut names = Names::Host;
    // After type, subtype, dir, on, reason, action, rset, llc: the next word is no host.
    let mut next_is_local = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\\' {
            // An escaped word is always a name: `\foo` up to a blank, `!` or a parenthesis.
            let start = i;
            i += 1;
            while i < b.len() && !matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | b'!' | b'(' | b')')
            {
                i += 1;
            }
            let local = std::mem::take(&mut next_is_local);
            if names == Names::Host && !local {
                return Some(&filter[start..i]);
            }
            continue;
        }
        if c == b'$' {
            // ARCnet address: `$` and one hex byte.
            i += 1;
            while i < b.len() && b[i].is_ascii_hexdigit() {
                i += 1;
            }
            continue;
        }
        if !c.is_ascii_alphanumeric() {
            i += 1; // blanks and operators: the qualifiers carry on
            continue;
        }
        let start = i;
        while i < b.len() && word_byte(b[i]) {
            i += 1;
        }
        let word = &filter[start..i];
        if KEYWORDS.contains(&word) {
            match word {
                "port" | "portrange" | "proto" | "protochain" => names = Names::Local,
                "type" | "subtype" | "direction" | "dir" | "on" | "ifname" | "rset" | "ruleset"
                | "reason" | "action" | "llc" => next_is_local = true,
                "and" | "or" | "not" | "less" | "greater" | "len" | "length" | "byte"
                | "broadcast" | "multicast" | "inbound" | "outbound" | "ifindex" | "vlan"
                | "mpls" | "pppoed" | "pppoes" | "geneve" | "vxlan" | "gre" | "erspan" | "mask"
                | "icmptype" | "icmpcode" | "icmp6type" | "icmp6code" | "tcpflags" | "rnr"
                | "rulenum" | "srnr" | "subrulenum" => {}
                // host, net, gateway, src, dst, a protocol or link: a host from here on.
                _ => names = Names::Host,
            }
            continue;
        }
        if std::mem::take(&mut next_is_local) || named_constant(word) || number_or_address(word) {
            continue;
        }
        if names == Names::Host {
            return Some(word);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_network_names_are_found_and_addresses_ports_and_keywords_are_not() {
        for (filter, name) in [
            ("host foo", "foo"),
            ("src host sensor.example.com", "sensor.example.com"),
            ("foo", "foo"),
            ("tcp and foo", "foo"),
            ("ether host router", "router"),
            ("gateway gw1", "gw1"),
            ("net corp", "corp"),
            ("dst net corp mask 255.255.0.0", "corp"),
            ("host 10.0.0.1 or bar", "bar"),
            ("host (a or b)", "a"),
            ("udp port 53 and dst example.org", "example.org"),
            ("host \\foo", "\\foo"),
            ("host 10.0.0.1a", "10.0.0.1a"),
            ("port 80 and tcp and https", "https"),
            ("ip6 and host x-1_y", "x-1_y"),
            ("wlan type mgt and beacon", "beacon"),
            ("not (host 10.0.0.1) and not evil", "evil"),
            ("host 1000-2000", "1000-2000"),
            ("host 10.0.0.1.5", "10.0.0.1.5"),
            ("host 10.", "10."),
            ("icmp[0] = icmp-bogus or host 10.0.0.1", "icmp-bogus"),
        ] {
            assert_eq!(looked_up_name(filter), Some(name), "{filter}");
        }
        for filter in [
            "",
            "host 10.0.0.1",
            "port http",
            "tcp port https or port domain",
            "port 80 or http",
            "port (http or https)",
            "portrange http-https",
            "portrange 1000-2000",
            "ip proto \\tcp",
            "proto tcp",
            "ether proto 0x88b5",
            "ether host 00:11:22:33:44:55",
            "ether host 00-11-22-33-44-55",
            "ether src 0011.2233.4455",
            "ether dst 001122334455",
            "host fe80::1 or net 2001:db8::/32",
            "net 10.0.0.0/8 or net 192.168",
            "vlan 100 and host 10.0.0.9",
            "udp[8] & 1 = 1",
            "tcp[tcpflags] & (tcp-syn|tcp-ack) != 0",
            "icmp[icmptype] = icmp-echo or icmp6[icmp6type] = icmp6-echoreply",
            "ip and multicast or ether broadcast",
            "less 100 or greater 1500",
            "len >= 0x40",
            "wlan type mgt subtype beacon",
            "!tcp && !(udp || icmp)",
        ] {
            assert_eq!(looked_up_name(filter), None, "{filter}");
        }
    }

    #[test]
    fn allocation_failures_are_told_from_syntax_errors() {
        assert!(out_of_memory("malloc"));
        assert!(out_of_memory("out of memory"));
        assert!(!out_of_memory(
            "can't parse filter expression: memory exhausted"
        ));
        assert!(!out_of_memory("syntax error"));
        assert!(!out_of_memory("unknown host 'malloc'"));
    }
}

/// Expressions that passed the check lately, for the links they were checked for: the page
/// checks an expression as it is typed, then runs it; compiling the same text for the same links
/// is deterministic (no host names are looked up: never kept with --allow-names), so a pass
/// stays a pass and the query need not fork another child to learn it again.
pub struct Passed {
    kept: std::sync::Mutex<std::collections::VecDeque<(String, Vec<store::FileLink>, Instant)>>,
}

/// Passes kept, at most, and for how long.
const PASSED_KEPT: usize = 64;
const PASSED_FOR: Duration = Duration::from_secs(300);

impl Passed {
    pub fn new() -> Passed {
        Passed {
            kept: Default::default(),
        }
    }

    /// Whether `expr` passed for exactly these links within [`PASSED_FOR`].
    pub fn knows(&self, expr: &str, links: &[store::FileLink]) -> bool {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter()
            .any(|(e, l, at)| e == expr && l == links && at.elapsed() < PASSED_FOR)
    }

    pub fn remember(&self, expr: &str, links: &[store::FileLink]) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(e, l, _)| !(e == expr && l == links));
        if kept.len() == PASSED_KEPT {
            kept.pop_front();
        }
        kept.push_back((expr.to_string(), links.to_vec(), Instant::now()));
    }
}

#[cfg(test)]
mod passed_tests {
    use super::*;

    #[test]
    fn a_pass_is_known_for_its_links_only_and_the_oldest_go_first() {
        let eth = store::FileLink {
            linktype: 1,
            snaplen: 262_144,
            swapped: false,
            nanos: false,
        };
        let raw = store::FileLink {
            linktype: 101,
            ..eth
        };
        let p = Passed::new();
        p.remember("udp", &[eth]);
        assert!(p.knows("udp", &[eth]));
        assert!(!p.knows("udp", &[eth, raw]), "another link set");
        assert!(!p.knows("tcp", &[eth]));
        for i in 0..PASSED_KEPT {
            p.remember(&format!("port {i}"), &[eth]);
        }
        assert!(!p.knows("udp", &[eth]), "the oldest was let go");
        assert!(p.knows(&format!("port {}", PASSED_KEPT - 1), &[eth]));
    }
}
