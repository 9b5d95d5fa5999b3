//! The time machine in a browser: `GET /` of `ringcap serve` is a page (HTML, CSS and a small
//! hand-written script, embedded here, no third-party request, a strict Content-Security-Policy)
//! that searches the store through JSON endpoints behind the same client-certificate check as
//! `POST /query`:
//!
//! - `POST /api/check` `{query, after, before}`: the query checked as it is typed, by the same
//!   bounded child that checks `POST /query` (`serve_check`), with where the error is;
//! - `POST /api/packets` `{query, after, before, limit}`: the first packets as `ringcap query`
//!   prints them (wire's printer) with their bytes, one JSON object a line, sent as found;
//! - `POST /api/flows` `{after, before, sort, desc, offset, limit, filters}`: the flow tables
//!   (`NAME.flows.parquet`) of the window, filtered by column, sorted and paged;
//! - `POST /api/timeline` `{query, after, before, name}`: packets and bytes per time bucket of
//!   what the search matches, with the window's gaps and losses (`timeline`);
//! - `POST /download` (the page's form): the whole result as the pcap stream `POST /query` gives.
//!
//! No query runs from a GET. Every POST from a browser must come from this origin: a request
//! whose `Origin` is another one, or whose `Sec-Fetch-Site` is not `same-origin` (or `none`), is
//! refused (403), `POST /query` included (curl and stenoread send neither header, so they are
//! unaffected). The JSON endpoints take `Content-Type: application/json` only, which a cross-site
//! form cannot send without a CORS preflight (never answered); `/download`, a form post, must
//! carry this origin's `Origin`. Every JSON answer is escaped by serde; the page builds its DOM
//! with `textContent`, never HTML from data.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{QueryService, Unanswered, RETRY_AFTER_SECS};
use crate::serve_check::Verdict;

mod timeline;

const INDEX_HTML: &str = include_str!("../../web/index.html");
const APP_JS: &str = include_str!("../../web/app.js");
const APP_CSS: &str = include_str!("../../web/app.css");

/// The page's policy: its own scripts, styles and fetches only; no inline script, no frames,
/// forms post to this origin only.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";
/// Sent with every answer of the page and its endpoints. (Referrer-Policy `no-referrer` would
/// make Chromium send `Origin: null` with the download form's POST, which is refused.)
const COMMON: [(&str, &str); 4] = [
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    ("X-Frame-Options", "DENY"),
    ("Cache-Control", "no-store"),
];
const JSON: &str = "application/json";
/// Packets the page may ask for at once, and what it gets when it does not say.
pub const MAX_PACKETS: usize = 1000;
const DEFAULT_PACKETS: usize = 100;
/// Bytes of each packet sent for the hex view (jumbo frames fit; the pcap has them all).
const MAX_HEX: usize = 16 << 10;
/// Flow-table rows read for one flows request, over all files: a window with more is cut (and
/// says so) rather than held in memory.
pub const MAX_FLOW_ROWS: usize = 200_000;
/// Rows of the flows table per page, at most.
const MAX_PAGE: usize = 500;

/// Answers the page's paths; None: not one of them.
pub fn route(
    s: &QueryService,
    request: &httpd::Request,
    conn: &mut httpd::Conn,
) -> Option<io::Result<()>> {
    let head_only = request.method == "HEAD";
    let asset = |body: &str, kind: &str| (body.as_bytes().to_vec(), kind.to_string());
    let get = match request.path() {
        "/" | "/index.html" => Some(asset(INDEX_HTML, "text/html; charset=utf-8")),
        "/app.js" => Some(asset(APP_JS, "text/javascript; charset=utf-8")),
        "/app.css" => Some(asset(APP_CSS, "text/css; charset=utf-8")),
        _ => None,
    };
    if let Some((body, kind)) = get {
        return Some(match request.method.as_str() {
            "GET" | "HEAD" => {
                let mut extra = vec![("Content-Security-Policy", CSP)];
                extra.extend(COMMON);
                httpd::send(conn, 200, &kind, &extra, &body, head_only)
            }
            _ => not_allowed(conn, "GET"),
        });
    }
    let api =
        |conn: &mut httpd::Conn,
         f: fn(&QueryService, &httpd::Request, &mut httpd::Conn) -> io::Result<()>| {
            if request.method != "POST" {
                return not_allowed(conn, "POST");
            }
            if let Err(why) = from_this_origin(request, conn.is_tls()) {
                return s.refuse_json(conn, 403, &why);
            }
            if !is_json(request) {
                return s.refuse_json(
                    conn,
                    415,
                    "send the request as JSON (Content-Type: application/json)",
                );
            }
            f(s, request, conn)
        };
    Some(match request.path() {
        "/api/check" => api(conn, check),
        "/api/packets" => api(conn, packets),
        "/api/flows" => api(conn, flows),
        "/api/timeline" => api(conn, timeline::timeline),
        "/download" => download(s, request, conn),
        _ => return None,
    })
}

fn not_allowed(conn: &mut httpd::Conn, allow: &str) -> io::Result<()> {
    httpd::send(
        conn,
        405,
        super::TEXT,
        &[("Allow", allow)],
        format!("use {allow}\n").as_bytes(),
        false,
    )
}

/// Whether a request may come from a browser page of another site: refused (with why) when its
/// `Sec-Fetch-Site` or `Origin` says it does. Clients that are not browsers send neither.
pub fn from_this_origin(request: &httpd::Request, tls: bool) -> Result<(), String> {
    if let Some(site) = request.header("sec-fetch-site") {
        if !matches!(site, "same-origin" | "none") {
            return Err(format!(
                "refused: a request from another site's page (Sec-Fetch-Site: {site})"
            ));
        }
    }
    if let Some(origin) = request.header("origin") {
        if !same_origin(origin, request.header("host"), tls) {
            return Err(format!(
                "refused: a request from another origin's page (Origin: {origin})"
            ));
        }
    }
    Ok(())
}

fn same_origin(origin: &str, host: Option<&str>, tls: bool) -> bool {
    let scheme = if tls { "https://" } else { "http://" };
    match (origin.strip_prefix(scheme), host) {
        (Some(o), Some(h)) => o.eq_ignore_ascii_case(h),
        _ => false,
    }
}

fn is_json(request: &httpd::Request) -> bool {
    request
        .header("content-type")
        .and_then(|t| t.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(JSON))
}

/// The search form's fields: an expression and the window's ends, each as `ringcap query`
/// takes them.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Search {
    query: String,
    after: String,
    before: String,
    /// `--name` patterns, separated by spaces (empty: any flow).
    name: String,
    limit: Option<usize>,
}

/// The name field's patterns (`*.evil.example other.example`), as `ringcap query --name` takes
/// each; the error as the page shows it, at the field.
fn name_patterns(field: &str) -> Result<Vec<index::NamePattern>, Problem> {
    field
        .split_whitespace()
        .map(|n| {
            index::NamePattern::parse(n).map_err(|error| {
                let start = field.find(n).unwrap_or(0);
                Problem {
                    error,
                    field: "name",
                    at: Some((start, start + n.len())),
                }
            })
        })
        .collect()
}

impl Search {
    /// The query `ringcap query` would be given: the expression, then `after T`/`before T`.
    fn text(&self) -> String {
        compose(&self.query, &self.after, &self.before)
    }
}

/// `EXPR and after T and before U`, leaving out what is blank: what `POST /query` and
/// `ringcap query` take (the time terms at the end, as stenographer writes them).
pub fn compose(expr: &str, after: &str, before: &str) -> String {
    let mut parts = Vec::new();
    if !expr.trim().is_empty() {
        parts.push(expr.trim().to_string());
    }
    if !after.trim().is_empty() {
        parts.push(format!("after {}", after.trim()));
    }
    if !before.trim().is_empty() {
        parts.push(format!("before {}", before.trim()));
    }
    parts.join(" and ")
}

/// What the page is told of a refused query: the words, and which field and where.
#[derive(Serialize, Debug, PartialEq, Eq)]
pub struct Problem {
    pub error: String,
    /// "query", "after", "before" or "name".
    pub field: &'static str,
    /// Byte range in that field's text, when the error is at one place.
    pub at: Option<(usize, usize)>,
}

/// Where an error the parser or libpcap gave for `search` is: a bad time in its own field, else
/// the word libpcap quotes (`unknown host 'x'`), found in the expression.
fn locate(search: &Search, error: &str) -> Problem {
    let now = sys::now_ns();
    for (field, text) in [("after", &search.after), ("before", &search.before)] {
        if !text.trim().is_empty() {
            if let Err(e) = index::parse_time(text.trim(), now) {
                return Problem {
                    error: e,
                    field,
                    at: Some((0, text.len())),
                };
            }
        }
    }
    Problem {
        error: error.to_string(),
        field: "query",
        at: quoted_span(&search.query, error),
    }
}

/// The byte range in `expr` of a word `message` quotes ('x' or "x"), if it is there.
pub fn quoted_span(expr: &str, message: &str) -> Option<(usize, usize)> {
    for q in ['\'', '"'] {
        let mut parts = message.split(q);
        parts.next();
        if let Some(word) = parts.next() {
            if !word.is_empty() && parts.next().is_some() {
                if let Some(start) = expr.find(word) {
                    return Some((start, start + word.len()));
                }
            }
        }
    }
    None
}

fn parse_body<T: for<'a> Deserialize<'a>>(request: &httpd::Request) -> Result<T, String> {
    serde_json::from_slice(&request.body).map_err(|e| format!("bad request: {e}"))
}

impl QueryService {
    /// A refusal as JSON `{error}`, logged as the others are.
    fn refuse_json(&self, conn: &mut httpd::Conn, status: u16, why: &str) -> io::Result<()> {
        self.log(conn.peer(), &format!("{status}: {why}"));
        let body = serde_json::json!({ "error": why });
        self.json(conn, status, &body)
    }

    fn json(&self, conn: &mut httpd::Conn, status: u16, body: &impl Serialize) -> io::Result<()> {
        let bytes = serde_json::to_vec(body).map_err(io::Error::other)?;
        httpd::send(conn, status, JSON, &COMMON, &bytes, false)
    }

    fn busy(&self, conn: &mut httpd::Conn) -> io::Result<()> {
        let why = format!(
            "{} queries are running already (--max-queries): try again later",
            self.queries.max()
        );
        self.log(conn.peer(), &format!("503: {why}"));
        let body =
            serde_json::to_vec(&serde_json::json!({ "error": why })).map_err(io::Error::other)?;
        let mut extra = vec![("Retry-After", RETRY_AFTER_SECS)];
        extra.extend(COMMON);
        httpd::send(conn, 503, JSON, &extra, &body, false)
    }
}

/// `POST /api/check`: `{ok: true}`, or `{ok: false, error, field, at}` with 200 (the check ran; the
/// query is what is wrong), or an error status when the check could not run.
fn check(s: &QueryService, request: &httpd::Request, conn: &mut httpd::Conn) -> io::Result<()> {
    let search: Search = match parse_body(request) {
        Ok(b) => b,
        Err(why) => return s.refuse_json(conn, 400, &why),
    };
    let text = search.text();
    if let Err(p) = name_patterns(&search.name) {
        return s.json(conn, 200, &serde_json::json!({"ok": false, "problem": p}));
    }
    if text.len() > super::MAX_QUERY {
        let p = Problem {
            error: format!("the query is longer than {} bytes", super::MAX_QUERY),
            field: "query",
            at: None,
        };
        return s.json(conn, 200, &serde_json::json!({"ok": false, "problem": p}));
    }
    // Checks have places of their own, so typing never waits behind a long query.
    let Some(_place) = s.checks.try_take() else {
        return s.busy(conn);
    };
    let files = index::capture_files(&s.stores, true).unwrap_or_default();
    let links = index::query::survey(&files).links();
    let verdict = s.check(&text, &links, None, conn);
    let answer = match verdict {
        Verdict::Passed => serde_json::json!({"ok": true}),
        Verdict::Refused(why) | Verdict::TooCostly(why) => {
            serde_json::json!({"ok": false, "problem": locate(&search, &why)})
        }
        Verdict::ClientGone => return Ok(()),
        Verdict::Failed(why) => return s.refuse_json(conn, 500, &why),
    };
    s.json(conn, 200, &answer)
}

/// One line of `/api/packets`' answer.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum PacketLine {
    /// The query was accepted: this is the query as `ringcap query` takes it.
    Start { query: String },
    Packet {
        n: usize,
        /// Nanoseconds since the epoch, as text (more digits than a JSON number keeps).
        ts: String,
        line: String,
        wire_len: u32,
        captured: usize,
        /// The first [`MAX_HEX`] bytes, as hex.
        hex: String,
    },
    End {
        packets: usize,
        /// More packets match than were sent.
        more: bool,
        ms: f64,
        /// Why the result may be incomplete (a file unreadable, the time limit).
        error: Option<String>,
    },
}

/// The search's plan, checked and compiled in its query place; None when it was answered
/// already (refused, with where the problem is, or its client went away).
fn plan_search(
    s: &QueryService,
    search: &Search,
    text: &str,
    names: Vec<index::NamePattern>,
    conn: &mut httpd::Conn,
    deadline: Option<Instant>,
) -> io::Result<Option<(Vec<std::path::PathBuf>, index::query::Plan)>> {
    match s.prepare(text, names, conn, deadline) {
        Ok(p) => Ok(Some(p)),
        Err(Unanswered::Refused(status, why)) => {
            s.log(conn.peer(), &format!("{status}: {why}"));
            let body = serde_json::json!({"error": why, "problem": locate(search, &why)});
            s.json(conn, status, &body).map(|_| None)
        }
        Err(Unanswered::ClientGone) => Ok(None),
    }
}

/// `POST /api/packets`: the first `limit` packets, one JSON object per line as each is found.
fn packets(s: &QueryService, request: &httpd::Request, conn: &mut httpd::Conn) -> io::Result<()> {
    let search: Search = match parse_body(request) {
        Ok(b) => b,
        Err(why) => return s.refuse_json(conn, 400, &why),
    };
    let limit = search
        .limit
        .unwrap_or(DEFAULT_PACKETS)
        .clamp(1, MAX_PACKETS);
    let text = search.text();
    if text.len() > super::MAX_QUERY {
        return s.refuse_json(
            conn,
            413,
            &format!("the query is longer than {} bytes", super::MAX_QUERY),
        );
    }
    let shown = super::shown(&text);
    let Some(running) = s.queries.try_take() else {
        return s.busy(conn);
    };
    let started = Instant::now();
    let deadline = s.timeout.map(|t| started + t);
    let names = match name_patterns(&search.name) {
        Ok(n) => n,
        Err(p) => {
            drop(running);
            let body = serde_json::json!({"error": p.error.clone(), "problem": p});
            return s.json(conn, 400, &body);
        }
    };
    let Some((files, plan)) = plan_search(s, &search, &text, names, conn, deadline)? else {
        return Ok(());
    };
    let options = index::QueryOptions {
        deadline,
        priority: index::Priority::for_files(&files),
        ..s.options.clone()
    };
    let peer = conn.peer();
    let mut body = httpd::BodyStream::start(
        &mut *conn,
        200,
        "application/x-ndjson",
        &COMMON,
        request.http10,
    )?;
    let send = |body: &mut httpd::BodyStream<&mut httpd::Conn>, line: &PacketLine| {
        serde_json::to_writer(&mut *body, line).map_err(io::Error::other)?;
        body.write_all(b"\n")?;
        // Each line goes now: the page shows the first packet while the query goes on.
        body.flush()
    };
    send(
        &mut body,
        &PacketLine::Start {
            query: text.clone(),
        },
    )?;
    let mut n = 0usize;
    let mut more = false;
    let mut client_error = None;
    let mut line = String::new();
    let result = plan.run(&options, |hit| {
        if n == limit {
            more = true;
            return Ok(false);
        }
        n += 1;
        line.clear();
        let lt = wire::LinkType::from_pcap(hit.linktype).unwrap_or(wire::LinkType::Ethernet);
        let _ = wire::format_line(&mut line, hit.ts_ns, hit.data, hit.wire_len, lt);
        let packet = PacketLine::Packet {
            n,
            ts: hit.ts_ns.to_string(),
            line: line.clone(),
            wire_len: hit.wire_len,
            captured: hit.data.len(),
            hex: hex(&hit.data[..hit.data.len().min(MAX_HEX)]),
        };
        send(&mut body, &packet).inspect_err(|e| client_error = Some(e.kind()))?;
        Ok(true)
    });
    let took = started.elapsed().as_secs_f64() * 1e3;
    drop(running);
    if let Some(kind) = client_error {
        s.log(
            peer,
            &format!(
                "{shown}: packets for the page cut after {n}: {}",
                super::client_cut(kind, s.write_stall)
            ),
        );
        return Ok(());
    }
    let error = match result {
        Ok(reports) => super::unread_files(&reports),
        Err(e) => Some(e.to_string()),
    };
    s.log(
        peer,
        &format!("{shown}: {n} packets for the page in {took:.1} ms"),
    );
    send(
        &mut body,
        &PacketLine::End {
            packets: n,
            more,
            ms: took,
            error,
        },
    )?;
    body.finish().map(|_| ())
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// `POST /download`: the page's form (`query`, `after`, `before`, `name`, and `format=pcapng` from its
/// pcapng button; form-encoded), answered with the whole result as `POST /query` answers it. Only from this origin's page.
fn download(s: &QueryService, request: &httpd::Request, conn: &mut httpd::Conn) -> io::Result<()> {
    if request.method != "POST" {
        return not_allowed(conn, "POST");
    }
    let from_page = request.header("origin").is_some();
    if let Err(why) = from_this_origin(request, conn.is_tls()).and_then(|_| {
        if from_page {
            Ok(())
        } else {
            Err(
                "refused: /download is the page's form (POST /query the expression instead)"
                    .to_string(),
            )
        }
    }) {
        return s.refuse(conn, 403, &[], &why);
    }
    let Ok(body) = std::str::from_utf8(&request.body) else {
        return s.refuse(conn, 400, &[], "the form must be UTF-8 text");
    };
    let fields = form_fields(body);
    let field = |k: &str| fields.get(k).map(String::as_str).unwrap_or("");
    let text = compose(field("query"), field("after"), field("before"));
    let format = match super::format_param(field("format")) {
        Ok(f) => f,
        Err(why) => return s.refuse(conn, 400, &[], &why),
    };
    let names = match name_patterns(field("name")) {
        Ok(n) => n,
        Err(p) => return s.refuse(conn, 400, &[], &p.error),
    };
    s.answer(&text, names, format, request.http10, conn)
}

/// The fields of an `application/x-www-form-urlencoded` body (the last of a repeated name).
pub fn form_fields(body: &str) -> HashMap<String, String> {
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (form_decode(k), form_decode(v))
        })
        .collect()
}

fn form_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len()
                && b[i + 1].is_ascii_hexdigit()
                && b[i + 2].is_ascii_hexdigit() =>
            {
                let digit = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                out.push(digit(b[i + 1]) << 4 | digit(b[i + 2]));
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The flows view's request.
#[derive(Deserialize, Default)]
#[serde(default)]
struct FlowsRequest {
    after: String,
    before: String,
    sort: String,
    desc: bool,
    offset: usize,
    limit: usize,
    /// Column → what its cells must match (see [`Filter`]).
    filters: BTreeMap<String, String>,
}

/// One flow: its rows of every file in the window added up.
#[derive(Serialize, Clone, Debug, Default)]
pub struct Flow {
    pub src: Option<String>,
    pub src_port: Option<u16>,
    pub dst: Option<String>,
    pub dst_port: Option<u16>,
    pub protocol: Option<u8>,
    pub proto: String,
    pub vlan: Option<u16>,
    pub tunnel: Option<String>,
    pub tunnel_id: Option<u32>,
    #[serde(skip)]
    pub first_ns: u64,
    #[serde(skip)]
    pub last_ns: u64,
    /// ns since the epoch as text, and as people read it (UTC).
    pub first_ts: String,
    pub last_ts: String,
    pub first: String,
    pub last: String,
    pub packets: u64,
    pub bytes: u64,
    /// Files the flow has rows in, and the first of them.
    pub files: usize,
    pub file: String,
    /// The query that gives its packets, when one can be written.
    pub open: Option<OpenFlow>,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct OpenFlow {
    pub query: String,
    pub after: String,
    pub before: String,
}

fn proto_name(p: Option<u8>) -> String {
    match p {
        Some(1) => "icmp".into(),
        Some(6) => "tcp".into(),
        Some(17) => "udp".into(),
        Some(58) => "icmp6".into(),
        Some(132) => "sctp".into(),
        Some(n) => n.to_string(),
        None => String::new(),
    }
}

/// `YYYY-MM-DD HH:MM:SS.mmm` UTC.
fn when(ns: u64) -> String {
    format!(
        "{}.{:03}",
        units::time::utc_seconds(ns),
        ns % 1_000_000_000 / 1_000_000
    )
}

fn stamp(ns: u64) -> String {
    format!("@{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The expression and window that give exactly this flow's packets (both directions), or None
/// for flows it cannot name (no addresses, tunnels other than VXLAN and Geneve).
pub fn open_flow(f: &Flow) -> Option<OpenFlow> {
    let (a, b) = (f.src.as_deref()?, f.dst.as_deref()?);
    let mut prefix = String::new();
    if let Some(v) = f.vlan {
        prefix.push_str(&format!("vlan {v} and "));
    }
    match (f.tunnel.as_deref(), f.tunnel_id) {
        (None, _) => {}
        (Some(kind @ ("vxlan" | "geneve")), Some(id)) => {
            prefix.push_str(&format!("{kind} {id} and "))
        }
        _ => return None,
    }
    let v6 = a.contains(':');
    let body = match (f.protocol, f.src_port, f.dst_port) {
        (Some(p @ (6 | 17 | 132)), Some(sp), Some(dp)) => format!(
            "{} and ((src host {a} and src port {sp} and dst host {b} and dst port {dp}) or \
             (src host {b} and src port {dp} and dst host {a} and dst port {sp}))",
            proto_name(Some(p))
        ),
        (Some(p), _, _) => format!(
            "{} proto {p} and host {a} and host {b}",
            if v6 { "ip6" } else { "ip" }
        ),
        (None, _, _) => format!("host {a} and host {b}"),
    };
    Some(OpenFlow {
        query: format!("{prefix}{body}"),
        after: stamp(f.first_ns),
        before: stamp(f.last_ns.saturating_add(1)),
    })
}

/// What a column's filter text asks: a part of the text (addresses, names), or a number, a
/// comparison (`>1000`, `<=5`) or a range (`80-90`).
#[derive(Debug, PartialEq)]
pub enum Filter {
    Contains(String),
    Range(u64, u64),
}

impl Filter {
    pub fn parse(column: &str, text: &str) -> Result<Filter, String> {
        let t = text.trim();
        if matches!(column, "src" | "dst" | "tunnel" | "file") {
            return Ok(Filter::Contains(t.to_ascii_lowercase()));
        }
        if column == "proto" {
            let n = match t.to_ascii_lowercase().as_str() {
                "icmp" => 1,
                "tcp" => 6,
                "udp" => 17,
                "icmp6" => 58,
                "sctp" => 132,
                other => other
                    .parse()
                    .map_err(|_| format!("proto: {t:?} is not a protocol"))?,
            };
            return Ok(Filter::Range(n, n));
        }
        let num = |s: &str| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| format!("{column}: {t:?} is not a number, >N, <N or N-M"))
        };
        Ok(if let Some(r) = t.strip_prefix(">=") {
            Filter::Range(num(r)?, u64::MAX)
        } else if let Some(r) = t.strip_prefix("<=") {
            Filter::Range(0, num(r)?)
        } else if let Some(r) = t.strip_prefix('>') {
            Filter::Range(num(r)?.saturating_add(1), u64::MAX)
        } else if let Some(r) = t.strip_prefix('<') {
            Filter::Range(0, num(r)?.saturating_sub(1))
        } else if let Some((lo, hi)) = t.split_once('-') {
            Filter::Range(num(lo)?, num(hi)?)
        } else {
            let n = num(t)?;
            Filter::Range(n, n)
        })
    }

    fn text(&self, cell: Option<&str>) -> bool {
        match self {
            Filter::Contains(part) => cell.is_some_and(|c| c.to_ascii_lowercase().contains(part)),
            Filter::Range(..) => false,
        }
    }

    fn number(&self, cell: Option<u64>) -> bool {
        match self {
            Filter::Range(lo, hi) => cell.is_some_and(|c| (*lo..=*hi).contains(&c)),
            Filter::Contains(_) => false,
        }
    }
}

/// Whether `f` passes every filter.
fn passes(f: &Flow, filters: &[(String, Filter)]) -> bool {
    filters.iter().all(|(col, filter)| match col.as_str() {
        "src" => filter.text(f.src.as_deref()),
        "dst" => filter.text(f.dst.as_deref()),
        "tunnel" => filter.text(f.tunnel.as_deref()),
        "file" => filter.text(Some(&f.file)),
        "src_port" => filter.number(f.src_port.map(u64::from)),
        "dst_port" => filter.number(f.dst_port.map(u64::from)),
        "proto" => filter.number(f.protocol.map(u64::from)),
        "vlan" => filter.number(f.vlan.map(u64::from)),
        "packets" => filter.number(Some(f.packets)),
        "bytes" => filter.number(Some(f.bytes)),
        "files" => filter.number(Some(f.files as u64)),
        _ => true,
    })
}

/// The flow-table columns the view sorts and filters by.
pub const FLOW_COLUMNS: [&str; 12] = [
    "src", "src_port", "dst", "dst_port", "proto", "vlan", "tunnel", "first", "last", "packets",
    "bytes", "files",
];

fn sort_flows(flows: &mut [Flow], column: &str, desc: bool) {
    use std::cmp::Ordering;
    // Addresses sort as addresses (10.0.0.9 before 10.0.0.10), not as text.
    let addr = |a: &Option<String>| {
        a.as_deref()
            .and_then(|s| s.parse::<std::net::IpAddr>().ok())
    };
    let by = |a: &Flow, b: &Flow| -> Ordering {
        match column {
            "src" => addr(&a.src).cmp(&addr(&b.src)),
            "dst" => addr(&a.dst).cmp(&addr(&b.dst)),
            "src_port" => a.src_port.cmp(&b.src_port),
            "dst_port" => a.dst_port.cmp(&b.dst_port),
            "proto" => a.protocol.cmp(&b.protocol),
            "vlan" => a.vlan.cmp(&b.vlan),
            "tunnel" => (&a.tunnel, a.tunnel_id).cmp(&(&b.tunnel, b.tunnel_id)),
            "last" => a.last_ns.cmp(&b.last_ns),
            "packets" => a.packets.cmp(&b.packets),
            "bytes" => a.bytes.cmp(&b.bytes),
            "files" => a.files.cmp(&b.files),
            _ => a.first_ns.cmp(&b.first_ns),
        }
    };
    // Ties in time order, whichever way the column goes: a stable, repeatable page.
    flows.sort_by(|a, b| {
        let o = by(a, b);
        let o = if desc { o.reverse() } else { o };
        o.then(a.first_ns.cmp(&b.first_ns))
            .then(addr(&a.src).cmp(&addr(&b.src)))
            .then(a.src_port.cmp(&b.src_port))
    });
}

/// The flows of `rows` (each flow's rows of every file added up), in first-seen order.
pub fn flows_of(rows: Vec<index::FlowRow>) -> Vec<Flow> {
    type Key = (
        Option<String>,
        Option<u16>,
        Option<String>,
        Option<u16>,
        Option<u8>,
        Option<u16>,
        Option<String>,
        Option<u32>,
    );
    let mut at: HashMap<Key, usize> = HashMap::new();
    let mut flows: Vec<Flow> = Vec::new();
    for r in rows {
        let key: Key = (
            r.src.clone(),
            r.src_port,
            r.dst.clone(),
            r.dst_port,
            r.protocol,
            r.vlan,
            r.tunnel.clone(),
            r.tunnel_id,
        );
        // The same flow may start the other way in another file (`src` is whoever sent a
        // file's first packet of it): one flow all the same, oriented by its earliest packet.
        let reversed: Key = (
            r.dst.clone(),
            r.dst_port,
            r.src.clone(),
            r.src_port,
            r.protocol,
            r.vlan,
            r.tunnel.clone(),
            r.tunnel_id,
        );
        let found = at.get(&key).or_else(|| at.get(&reversed)).copied();
        match found {
            Some(i) => {
                let f = &mut flows[i];
                if r.first_ts < f.first_ns && f.src != r.src {
                    std::mem::swap(&mut f.src, &mut f.dst);
                    std::mem::swap(&mut f.src_port, &mut f.dst_port);
                }
                f.first_ns = f.first_ns.min(r.first_ts);
                f.last_ns = f.last_ns.max(r.last_ts);
                f.packets += r.packets;
                f.bytes += r.bytes;
                f.files += 1;
            }
            None => {
                at.insert(key, flows.len());
                at.insert(reversed, flows.len());
                flows.push(Flow {
                    src: r.src,
                    src_port: r.src_port,
                    dst: r.dst,
                    dst_port: r.dst_port,
                    protocol: r.protocol,
                    proto: proto_name(r.protocol),
                    vlan: r.vlan,
                    tunnel: r.tunnel,
                    tunnel_id: r.tunnel_id,
                    first_ns: r.first_ts,
                    last_ns: r.last_ts,
                    packets: r.packets,
                    bytes: r.bytes,
                    files: 1,
                    file: r.file,
                    ..Flow::default()
                });
            }
        }
    }
    for f in &mut flows {
        f.first_ts = f.first_ns.to_string();
        f.last_ts = f.last_ns.to_string();
        f.first = when(f.first_ns);
        f.last = when(f.last_ns);
        f.open = open_flow(f);
    }
    flows
}

/// `POST /api/flows`: a page of the window's flows from the flow tables, filtered and sorted.
fn flows(s: &QueryService, request: &httpd::Request, conn: &mut httpd::Conn) -> io::Result<()> {
    let req: FlowsRequest = match parse_body(request) {
        Ok(b) => b,
        Err(why) => return s.refuse_json(conn, 400, &why),
    };
    let now = sys::now_ns();
    let mut window = [None, None];
    for (i, (field, text)) in [("after", &req.after), ("before", &req.before)]
        .into_iter()
        .enumerate()
    {
        if text.trim().is_empty() {
            continue;
        }
        match index::parse_time(text.trim(), now) {
            Ok(t) => window[i] = Some(t),
            Err(e) => {
                let p = Problem {
                    error: e,
                    field,
                    at: Some((0, text.len())),
                };
                return s.json(
                    conn,
                    400,
                    &serde_json::json!({"error": p.error, "problem": p}),
                );
            }
        }
    }
    let mut filters = Vec::new();
    for (col, text) in &req.filters {
        if text.trim().is_empty() {
            continue;
        }
        if !FLOW_COLUMNS.contains(&col.as_str()) {
            return s.refuse_json(conn, 400, &format!("no column {col:?} to filter by"));
        }
        match Filter::parse(col, text) {
            Ok(f) => filters.push((col.clone(), f)),
            Err(why) => {
                return s.json(conn, 400, &serde_json::json!({"error": why, "column": col}))
            }
        }
    }
    let Some(running) = s.queries.try_take() else {
        return s.busy(conn);
    };
    let started = Instant::now();
    let files = match index::capture_files(&s.stores, false) {
        Ok(f) => f,
        Err(e) => {
            drop(running);
            return s.refuse_json(conn, 500, &e.to_string());
        }
    };
    let mut rows = Vec::new();
    let (mut without, mut cut) = (0usize, false);
    for file in &files {
        let left = MAX_FLOW_ROWS - rows.len();
        if left == 0 {
            cut = true;
            break;
        }
        match index::read_flow_rows(file, window[0], window[1], left) {
            Ok((r, more)) => {
                rows.extend(r);
                cut |= more;
            }
            Err(_) => without += 1,
        }
        if s.timeout.is_some_and(|t| started.elapsed() > t) {
            cut = true;
            break;
        }
    }
    drop(running);
    let mut flows = flows_of(rows);
    flows.retain(|f| passes(f, &filters));
    sort_flows(&mut flows, &req.sort, req.desc);
    let total = flows.len();
    let limit = req.limit.clamp(1, MAX_PAGE);
    let page: Vec<Flow> = flows.into_iter().skip(req.offset).take(limit).collect();
    let took = started.elapsed().as_secs_f64() * 1e3;
    s.log(
        conn.peer(),
        &format!("flows: {total} from {} files in {took:.1} ms", files.len()),
    );
    s.json(
        conn,
        200,
        &serde_json::json!({
            "total": total,
            "offset": req.offset,
            "rows": page,
            "files": files.len(),
            "without_table": without,
            "cut": cut,
            "ms": took,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_makes_the_query_ringcap_query_takes() {
        assert_eq!(
            compose(" host 10.0.0.1 ", "15m ago", ""),
            "host 10.0.0.1 and after 15m ago"
        );
        assert_eq!(compose("", "@1", "@2"), "after @1 and before @2");
        assert_eq!(compose("tcp", " ", ""), "tcp");
    }

    #[test]
    fn form_bodies_decode() {
        let f = form_fields("query=host+10.0.0.1+and+port%2080&after=15m%20ago&before=&x=%zz");
        assert_eq!(f["query"], "host 10.0.0.1 and port 80");
        assert_eq!(f["after"], "15m ago");
        assert_eq!(f["before"], "");
        assert_eq!(f["x"], "%zz");
        assert_eq!(form_fields("a=%4")["a"], "%4");
    }

    #[test]
    fn only_this_origin_may_post() {
        let req = |h: &[(&str, &str)]| httpd::Request {
            method: "POST".into(),
            headers: h
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            ..Default::default()
        };
        assert!(from_this_origin(&req(&[]), true).is_ok());
        assert!(from_this_origin(
            &req(&[("Host", "s:8443"), ("Origin", "https://s:8443")]),
            true
        )
        .is_ok());
        assert!(from_this_origin(
            &req(&[("Host", "s:8443"), ("Origin", "https://evil")]),
            true
        )
        .is_err());
        assert!(from_this_origin(
            &req(&[("Host", "s:8443"), ("Origin", "http://s:8443")]),
            true
        )
        .is_err());
        assert!(from_this_origin(&req(&[("Host", "s:8443"), ("Origin", "null")]), true).is_err());
        assert!(from_this_origin(&req(&[("Sec-Fetch-Site", "cross-site")]), true).is_err());
        assert!(from_this_origin(&req(&[("Sec-Fetch-Site", "same-site")]), true).is_err());
        assert!(from_this_origin(&req(&[("Sec-Fetch-Site", "same-origin")]), true).is_ok());
    }

    #[test]
    fn a_quoted_word_is_found_in_the_expression() {
        assert_eq!(
            quoted_span("host 10.0.0.1 and port foo", "unknown port 'foo'"),
            Some((23, 26))
        );
        assert_eq!(quoted_span("tcp and", "syntax error"), None);
    }

    #[test]
    fn column_filters() {
        assert_eq!(
            Filter::parse("bytes", ">1000").unwrap(),
            Filter::Range(1001, u64::MAX)
        );
        assert_eq!(
            Filter::parse("dst_port", "80-90").unwrap(),
            Filter::Range(80, 90)
        );
        assert_eq!(
            Filter::parse("proto", "UDP").unwrap(),
            Filter::Range(17, 17)
        );
        assert_eq!(
            Filter::parse("src", "10.0").unwrap(),
            Filter::Contains("10.0".into())
        );
        assert!(Filter::parse("packets", "lots").is_err());
    }

    #[test]
    fn a_flow_opens_as_both_directions_in_its_time() {
        let f = Flow {
            src: Some("10.0.0.1".into()),
            src_port: Some(1000),
            dst: Some("10.0.0.2".into()),
            dst_port: Some(53),
            protocol: Some(17),
            vlan: Some(7),
            first_ns: 1_000_000_000,
            last_ns: 2_500_000_000,
            ..Flow::default()
        };
        let o = open_flow(&f).unwrap();
        assert_eq!(
            o.query,
            "vlan 7 and udp and ((src host 10.0.0.1 and src port 1000 and dst host 10.0.0.2 and dst port 53) or \
             (src host 10.0.0.2 and src port 53 and dst host 10.0.0.1 and dst port 1000))"
        );
        assert_eq!(
            (o.after.as_str(), o.before.as_str()),
            ("@1.000000000", "@2.500000001")
        );
        let t = Flow {
            tunnel: Some("gre".into()),
            ..f
        };
        assert!(open_flow(&t).is_none());
    }

    #[test]
    fn a_flow_seen_the_other_way_in_another_file_is_one_flow() {
        let row = |src: &str, sp, dst: &str, dp, first, file: &str| index::FlowRow {
            file: file.into(),
            src: Some(src.into()),
            src_port: Some(sp),
            dst: Some(dst.into()),
            dst_port: Some(dp),
            protocol: Some(17),
            first_ts: first,
            last_ts: first + 10,
            packets: 2,
            bytes: 100,
            ..Default::default()
        };
        let flows = flows_of(vec![
            row("10.0.0.53", 53, "10.0.0.1", 5000, 50, "b"),
            row("10.0.0.1", 5000, "10.0.0.53", 53, 20, "a"),
            row("10.0.0.1", 5001, "10.0.0.53", 53, 30, "a"),
        ]);
        assert_eq!(flows.len(), 2);
        let f = &flows[0];
        assert_eq!(
            (f.src.as_deref(), f.src_port),
            (Some("10.0.0.1"), Some(5000))
        );
        assert_eq!(
            (f.first_ns, f.last_ns, f.packets, f.bytes, f.files),
            (20, 60, 4, 200, 2)
        );
    }
}
