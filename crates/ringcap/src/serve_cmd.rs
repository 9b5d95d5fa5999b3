//! `ringcap serve`: the time machine for other machines. `POST /query` with a query as the body
//! (stenographer's request, what stenoread sends) answers with the matching packets as a pcap
//! stream, found and filtered exactly as `ringcap query` does (the `index` crate), over HTTPS with
//! client certificates (the `httpd` crate), or plain HTTP on loopback only.

use std::io;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use clap::Args;

use crate::privileges::{relinquish_privileges, unprivileged_user};
use crate::serve_check::{self, Verdict};
use crate::Fatal;

mod web;

/// Largest query accepted (an expression with its time terms is a few hundred bytes).
const MAX_QUERY: usize = 16 << 10;
/// A request (line, headers, query) must have arrived this long after the connection is ready.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// A TLS handshake must be done this long after the connection was accepted.
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// Longest line logged, and longest expression quoted in one: a client's 16 KiB expression is
/// shortened, not copied whole into the log per request.
const MAX_LOG_LINE: usize = 1000;
const MAX_LOG_EXPR: usize = 200;
/// What a client told "busy" (503) is asked to wait, in seconds.
const RETRY_AFTER_SECS: &str = "5";
const TEXT: &str = "text/plain; charset=utf-8";
/// The page's checks (each a bounded child, as a query's) that run at once.
const CHECKS: usize = 4;

#[derive(Args, Debug, Clone)]
#[command(
    mut_arg("quiet", |a| a.help("No line per query or refused client on stderr.")),
    after_help = "\
Answers POST /query, whose body is the query (a tcpdump expression; `after T` and `before T`
terms at its start or end, as stenographer and `ringcap query` take them), with the matching
packets as a pcap stream (application/octet-stream), in time order, exactly as `ringcap query
STORE... 'EXPR' -w -` gives them (POST /query?format=pcapng: as pcapng, as `-F pcapng`; name=GLOB:
as --name). stenoread-style clients work unchanged. GET /files lists the
stores' complete capture files (name, size, coverage record) as JSON, for `ringcap query` over a
fleet (it takes each file from the sensor or its archive, once).
GET / is a page for a browser (with the same client certificate): a search form checked as it is
typed, the first packets as `ringcap query` prints them with their bytes, the window's flows from
the flow tables (sorted, filtered, paged; a row opens its flow) and Download PCAP or pcapng (POST
/query's stream). A POST from a browser page of another origin is refused (403), POST /query included.
A STORE may be an archive, s3://BUCKET/PREFIX (--endpoint and the credentials as `ringcap archive`
takes them): each query lists it for its window and reads the index chunks and frames it needs
by range requests, as `ringcap query s3://…` does. More than --max-queries
at once get 503 with Retry-After. A POST without Content-Length gets 411 (chunked bodies too).

Each query is checked first in a child process, inside its --max-queries place: parsed, then
compiled by libpcap under 256 MiB of address space and within 10 s (or what --query-timeout
leaves), killed at once if the client hangs up. A bad expression gets 400 with libpcap's message;
one too deeply nested 400; one too costly to compile 422 (\"over 10 s\", \"over 256 MiB\").
Host and network names (host NAME, net NAME, gateway NAME, ether host NAME, a bare NAME) get 400:
the sensor would resolve them (DNS) for a remote client; give addresses, or pass --allow-names.
Port and protocol names (port https) are fine. A pass is kept 5 minutes (the last 64 expressions,
per link set; never with --allow-names), so a search the page checked as it was typed runs at once.

A connection waits for its first whole message (TLS ClientHello, request head) before it takes
one of --max-connections places; peers that connect, send a byte and stall are closed first when
more come, and never keep clients with certificates out. A query cut because its client went away
or stopped reading is logged with the packets and bytes written.

HTTPS needs all of --cert, --key and --client-ca: every client must show a certificate signed by
the --client-ca certificate(s); others fail the TLS handshake. Without them, plain HTTP (no
authentication) is served on a loopback address only. The key file must not be readable by group
or others (chmod 600). The README's \"Remote queries\" section shows how to make the certificates
with openssl.

Queries run at nice 10 and the lowest best-effort I/O level, below a capture. As root without -Z,
ringcap keeps only CAP_DAC_READ_SEARCH (to read the store) once it listens; the check's child
keeps none.

Examples:
  ringcap serve /data1 /data2 --listen 0.0.0.0:8443 \\
       --cert server.pem --key server.key --client-ca ca.pem
  curl --cacert ca.pem --cert client.pem --key client.key -X POST \\
       --data 'host 10.1.2.3 and port 443 and after 10m ago' https://sensor1:8443/query -o out.pcap
  curl ... https://sensor1:8443/query | wireshark -k -i -
  ringcap serve /data --listen 127.0.0.1:8080     # plain HTTP, this machine only"
)]
pub struct ServeArgs {
    /// Stores (capture files or directories of them), as `ringcap query` takes them; or archives,
    /// s3://BUCKET/PREFIX (written by `ringcap archive`; see the Archive flags).
    #[arg(value_name = "STORE", required = true)]
    pub stores: Vec<PathBuf>,
    /// Where to listen: HOST:PORT, e.g. 0.0.0.0:8443, [::]:8443 or 127.0.0.1:8080. Without TLS,
    /// only a loopback address.
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// The server's certificate chain (PEM). With --key and --client-ca: HTTPS.
    #[arg(long, value_name = "FILE", requires_all = ["key", "client_ca"])]
    pub cert: Option<PathBuf>,
    /// The server's private key (PEM); refused if group or others may read it.
    #[arg(long, value_name = "FILE", requires_all = ["cert", "client_ca"])]
    pub key: Option<PathBuf>,
    /// The CA certificate(s) (PEM) that sign the clients' certificates: a client must show one.
    #[arg(long = "client-ca", value_name = "FILE", requires_all = ["cert", "key"])]
    pub client_ca: Option<PathBuf>,
    /// Queries answered at once; more get 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_queries: u32,
    /// Connections served at once (handshakes, requests being read, queries), once their first
    /// message (TLS ClientHello) is whole; 8 times as many may wait for it without a thread. Over
    /// the limit, a newcomer closes the oldest still in its handshake or request, never a query.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Stop a query that runs longer than this (e.g. 10m); its client sees the transfer cut
    /// (curl: exit 18). Default: no limit.
    #[arg(long, value_name = "DURATION", value_parser = units::time::parse_duration)]
    pub query_timeout: Option<Duration>,
    #[command(flatten)]
    pub jobs: crate::cli::Jobs,
    /// Each query reads at most this many bytes of the store per second (e.g. 100MB), as
    /// `ringcap query --max-read-rate`.
    #[arg(long, value_name = "SIZE", value_parser = crate::cli::parse_size_arg)]
    pub max_read_rate: Option<u64>,
    #[command(flatten)]
    pub format: crate::cli::ResultFormat,
    /// Let queries name hosts and networks (host NAME, net NAME, ...): the sensor then resolves
    /// them (DNS, /etc/hosts) for its clients. Off: such queries get 400 (give addresses).
    #[arg(long)]
    pub allow_names: bool,
    /// A client that reads nothing of its result for this long is cut off (its query ends).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = units::time::parse_duration, hide = true)]
    pub write_stall: Duration,
    #[command(flatten)]
    pub user: crate::cli::User,
    #[command(flatten)]
    pub quiet: crate::cli::Quiet,
    /// How to reach an archive given as a store (s3://BUCKET/PREFIX), as `ringcap archive`.
    #[command(flatten, next_help_heading = "Archive (a STORE is s3://BUCKET/PREFIX)")]
    pub archive: crate::archive_cmd::EndpointArgs,
    /// Range requests in flight at once per query, at most, to an archive.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_requests: usize,
}

/// The local stores and the archives (s3://) among the STORE words.
fn split_stores(stores: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
    let (archives, local): (Vec<&PathBuf>, Vec<&PathBuf>) = stores
        .iter()
        .partition(|p| p.to_str().is_some_and(|s| s.starts_with("s3://")));
    (
        local.into_iter().cloned().collect(),
        archives
            .into_iter()
            .filter_map(|p| p.to_str().map(str::to_string))
            .collect(),
    )
}

pub fn run(a: ServeArgs) -> Result<(), Fatal> {
    let (local_stores, archive_urls) = split_stores(&a.stores);
    let files = crate::index_cmd::capture_files(&local_stores, true)?;
    let addrs = listen_addrs(&a.listen)?;
    let tls = tls_config(&a, &addrs)?;
    let user = a.user.name.as_deref().map(unprivileged_user).transpose()?;
    let listener = TcpListener::bind(&addrs[..]).map_err(|e| {
        Fatal::usage(anyhow!(
            "--listen {}: cannot listen there: {e} (give a free HOST:PORT)",
            a.listen
        ))
    })?;
    let stop = session::Stop::install()
        .map_err(|e| Fatal::runtime(anyhow!("cannot install signal handlers: {e}")))?;
    // The key is read and the port bound: nothing needs privileges any more, and no other
    // thread exists yet (capabilities are per thread).
    relinquish_privileges(user.as_ref(), &[sys::CAP_DAC_READ_SEARCH])?;
    // Every thread started from here (connections, query workers) inherits this.
    sys::low_priority();
    let local = listener
        .local_addr()
        .map_err(|e| Fatal::runtime(anyhow!("{e}")))?;
    let config = http_config(&a, tls.clone());
    // Opened after privileges are given up: their runtime's threads keep none.
    let archives = archive_urls
        .iter()
        .map(|url| {
            let dest = archive::Dest::parse(url).map_err(crate::archive_cmd::fatal)?;
            archive::Reader::new(dest, &a.archive.endpoint(), a.max_requests)
                .map(|r| (url.clone(), r))
                .map_err(crate::archive_cmd::fatal)
        })
        .collect::<Result<Vec<_>, Fatal>>()?;
    let service = QueryService::new(&a, local_stores, archives);
    httpd::spawn(listener, config, Arc::new(service))
        .map_err(|e| Fatal::runtime(anyhow!("cannot start the server thread: {e}")))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let who = match &a.client_ca {
        Some(ca) => format!("clients with a certificate from {}", ca.display()),
        None => "plain HTTP, this machine only".into(),
    };
    eprintln!(
        "ringcap serve: listening on {scheme}://{local}/query ({who}; capture files now: {}; at most {} queries at once)",
        files.len(),
        a.max_queries
    );
    while !stop.stopping() {
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("ringcap serve: stopped");
    Ok(())
}

/// The server's limits: the flags', and the fixed deadlines and sizes above.
fn http_config(a: &ServeArgs, tls: Option<Arc<httpd::TlsConfig>>) -> httpd::Config {
    httpd::Config {
        tls,
        max_connections: a.max_connections as usize,
        handshake_deadline: HANDSHAKE_DEADLINE,
        limits: httpd::Limits {
            deadline: REQUEST_DEADLINE,
            max_head: 16 << 10,
            max_headers: 64,
            max_body: MAX_QUERY,
        },
        write_stall: a.write_stall,
        name: "ringcap-serve".into(),
    }
}

/// The addresses of `--listen` (a name may give several).
fn listen_addrs(listen: &str) -> Result<Vec<SocketAddr>, Fatal> {
    let bad = |why: String| {
        Fatal::usage(anyhow!(
            "--listen {listen}: {why} (give HOST:PORT, e.g. 0.0.0.0:8443 or 127.0.0.1:8080)"
        ))
    };
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .collect();
    if addrs.is_empty() {
        return Err(bad("no address".into()));
    }
    Ok(addrs)
}

/// The TLS config when --cert/--key/--client-ca are given (clap makes them come together);
/// without them, plain HTTP is allowed on loopback addresses only.
fn tls_config(a: &ServeArgs, addrs: &[SocketAddr]) -> Result<Option<Arc<httpd::TlsConfig>>, Fatal> {
    let (Some(cert), Some(key), Some(ca)) = (&a.cert, &a.key, &a.client_ca) else {
        if let Some(open) = addrs.iter().find(|s| !s.ip().is_loopback()) {
            let resolved = if open.to_string() == a.listen {
                String::new()
            } else {
                format!(" ({open})")
            };
            return Err(Fatal::usage(anyhow!(
                "--listen {}{resolved} without TLS: plain HTTP, with no authentication, is served on a loopback address only \
                 (127.0.0.1, [::1]); pass --cert FILE --key FILE --client-ca FILE to serve HTTPS to clients with certificates",
                a.listen
            )));
        }
        return Ok(None);
    };
    httpd::server_config(cert, key, ca)
        .map(Some)
        .map_err(|e| Fatal::usage(anyhow!("cannot set up TLS: {e}")))
}

/// Answers `POST /query`.
struct QueryService {
    stores: Vec<PathBuf>,
    /// Archives served as stores are (URL, reader).
    archives: Vec<(String, archive::Reader)>,
    queries: httpd::Slots,
    /// Places for the page's checks as an expression is typed, apart from the queries'.
    checks: httpd::Slots,
    /// Expressions that passed the check lately (as typed in the page, then run).
    passed: serve_check::Passed,
    options: index::QueryOptions,
    timeout: Option<Duration>,
    /// None: as `ringcap query -w` (µs when every file has µs times, else ns).
    format: Option<store::Format>,
    allow_names: bool,
    write_stall: Duration,
    quiet: bool,
}

impl httpd::Handler for QueryService {
    fn handle(&self, request: httpd::Request, conn: &mut httpd::Conn) -> io::Result<()> {
        let head_only = request.method == "HEAD";
        if let Some(answered) = web::route(self, &request, conn) {
            return answered;
        }
        match (request.path(), request.method.as_str()) {
            ("/query", "POST") => self.query(&request, conn),
            ("/files", "GET" | "HEAD") => self.files(conn, head_only),
            ("/query", _) => httpd::send(
                conn,
                405,
                TEXT,
                &[("Allow", "POST")],
                b"POST the query (a tcpdump expression) to /query\n",
                head_only,
            ),
            _ => httpd::send(
                conn,
                404,
                TEXT,
                &[],
                b"not found: POST the query (a tcpdump expression) to /query\n",
                head_only,
            ),
        }
    }

    fn rejected(&self, peer: SocketAddr, why: &str) {
        self.log(peer, why);
    }
}

impl QueryService {
    fn new(
        a: &ServeArgs,
        stores: Vec<PathBuf>,
        archives: Vec<(String, archive::Reader)>,
    ) -> QueryService {
        QueryService {
            stores,
            archives,
            queries: httpd::Slots::new(a.max_queries as usize),
            checks: httpd::Slots::new(CHECKS),
            passed: serve_check::Passed::new(),
            options: index::QueryOptions {
                jobs: a.jobs.max(1),
                use_index: true,
                max_read_rate: a.max_read_rate,
                deadline: None,
                priority: index::Priority::Low,
                progress: None,
            },
            timeout: a.query_timeout,
            format: a.format.format.map(Into::into),
            allow_names: a.allow_names,
            write_stall: a.write_stall,
            quiet: a.quiet.on,
        }
    }

    /// One line on stderr; control characters a client sent (in an expression libpcap quotes
    /// back) become spaces, so a client cannot forge log lines, and a long line is shortened.
    fn log(&self, peer: SocketAddr, what: &str) {
        if !self.quiet {
            let mut line: String = what
                .chars()
                .take(MAX_LOG_LINE)
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            if what.chars().nth(MAX_LOG_LINE).is_some() {
                line.push_str(&format!("… ({} bytes in all)", what.len()));
            }
            eprintln!("ringcap serve: {peer}: {line}");
        }
    }

    /// Refuses with `status` and says why, to the client and in the log.
    fn refuse(
        &self,
        conn: &mut httpd::Conn,
        status: u16,
        extra: &[(&str, &str)],
        why: &str,
    ) -> io::Result<()> {
        self.log(conn.peer(), &format!("{status}: {why}"));
        httpd::send(
            conn,
            status,
            TEXT,
            extra,
            format!("{why}\n").as_bytes(),
            false,
        )
    }

    /// The complete capture files of the stores, by name, with their coverage records: what a
    /// fleet query needs to take each file once (from here, not from the archive too) and to say
    /// what the sensor covers of its window. Listing takes a query's place (it reads a record
    /// per file).
    fn files(&self, conn: &mut httpd::Conn, head_only: bool) -> io::Result<()> {
        let Some(running) = self.queries.try_take() else {
            let why = format!(
                "{} queries are running already (--max-queries): try again later",
                self.queries.max()
            );
            return self.refuse(conn, 503, &[("Retry-After", RETRY_AFTER_SECS)], &why);
        };
        let files = match index::capture_files(&self.stores, false) {
            Ok(f) => f,
            Err(e) => {
                drop(running);
                return self.refuse(conn, 500, &[], &e.to_string());
            }
        };
        let list = fleet::FileList {
            files: file_entries(&files),
        };
        drop(running);
        let body = serde_json::to_vec(&list).map_err(io::Error::other)?;
        httpd::send(conn, 200, "application/json", &[], &body, head_only)
    }

    fn query(&self, request: &httpd::Request, conn: &mut httpd::Conn) -> io::Result<()> {
        // A browser page of another site may not make the analyst's browser run queries.
        if let Err(why) = web::from_this_origin(request, conn.is_tls()) {
            return self.refuse(conn, 403, &[], &why);
        }
        let Ok(text) = std::str::from_utf8(&request.body) else {
            return self.refuse(conn, 400, &[], "the query must be UTF-8 text");
        };
        let Params { names, format } = match params_of_target(&request.target) {
            Ok(p) => p,
            Err(why) => return self.refuse(conn, 400, &[], &why),
        };
        self.answer(text.trim(), names, format, request.http10, conn)
    }

    /// Answers `expr` with the pcap stream of its packets (`POST /query`, the page's download), in
    /// `format` when the request chose one (else the server's -F, else pcap).
    fn answer(
        &self,
        expr: &str,
        names: Vec<index::NamePattern>,
        format: Option<store::Format>,
        http10: bool,
        conn: &mut httpd::Conn,
    ) -> io::Result<()> {
        let shown = shown(expr);
        let Some(running) = self.queries.try_take() else {
            let why = format!(
                "{} queries are running already (--max-queries): try again later",
                self.queries.max()
            );
            return self.refuse(conn, 503, &[("Retry-After", RETRY_AFTER_SECS)], &why);
        };
        let started = Instant::now();
        let deadline = self.timeout.map(|t| started + t);
        let (files, plan) = match self.prepare(expr, names, conn, deadline) {
            Ok(prepared) => prepared,
            // The place is given back before the answer is sent: a client that has read its
            // refusal can ask again at once and find it free.
            Err(Unanswered::Refused(status, why)) => {
                drop(running);
                return self.refuse(conn, status, &[], &why);
            }
            Err(Unanswered::ClientGone) => {
                let took = started.elapsed().as_secs_f64();
                self.log(
                    conn.peer(),
                    &format!("{shown}: the client went away after {took:.1} s, while its filter was being checked; check stopped"),
                );
                return Ok(());
            }
        };
        let options = index::QueryOptions {
            deadline,
            // Idle while a capture writes to the store, so a remote query never takes its CPU.
            priority: index::Priority::for_files(&files),
            ..self.options.clone()
        };
        let peer = conn.peer();
        let mut sent = Counted {
            out: conn,
            bytes: 0,
        };
        let format = format.or(self.format).unwrap_or(store::Format::Pcap {
            nanos: plan.header.nanos,
        });
        let disposition = match format {
            store::Format::PcapNg => "attachment; filename=\"ringcap-query.pcapng\"",
            store::Format::Pcap { .. } => "attachment; filename=\"ringcap-query.pcap\"",
        };
        let body = match httpd::BodyStream::start(
            &mut sent,
            200,
            "application/octet-stream",
            &[("Content-Disposition", disposition)],
            http10,
        ) {
            Ok(body) => body,
            Err(e) => {
                let why = client_cut(e.kind(), self.write_stall);
                self.log(peer, &format!("{shown}: not started: {why}"));
                return Ok(());
            }
        };
        let mut pcap = store::PacketStream::new(body, format, plan.header);
        let mut packets = 0u64;
        // A write that failed is the client's doing (gone, or not reading): kept apart from the
        // query's own failures, which the client is shown by a cut transfer.
        let mut client_error: Option<io::ErrorKind> = None;
        let result = plan.run(&options, |hit| {
            pcap.packet(&hit.time, hit.wire_len, hit.linktype, hit.data)
                .inspect_err(|e| client_error = Some(e.kind()))?;
            packets += 1;
            Ok(true)
        });
        let took = started.elapsed().as_secs_f64() * 1e3;
        // The query's work is done; what is left is the last bytes. Given back first, so a
        // client that has seen its answer end can ask again at once.
        drop(running);
        let failure = match result {
            Ok(reports) => unread_files(&reports),
            Err(e) => Some(e.to_string()),
        };
        let finished = match (client_error, failure) {
            (Some(kind), _) => Err(kind),
            (None, failure) => pcap
                .finish()
                .and_then(|body| match failure {
                    None => body.finish().map(|_| None),
                    // Sent so far, then cut without the last chunk: the client sees the
                    // result is incomplete.
                    Some(why) => Ok(Some(why)),
                })
                .map_err(|e| e.kind()),
        };
        let bytes = sent.bytes;
        match finished {
            Ok(None) => self.log(
                peer,
                &format!(
                    "{shown}: {packets} packets from {} files in {took:.1} ms",
                    files.len()
                ),
            ),
            Ok(Some(why)) => self.log(
                peer,
                &format!("{shown}: cut after {packets} packets in {took:.1} ms: {why}"),
            ),
            Err(kind) => self.log(
                peer,
                &format!(
                    "{shown}: cut after {packets} packets ({bytes} bytes written) in {took:.1} ms: {}",
                    client_cut(kind, self.write_stall)
                ),
            ),
        }
        Ok(())
    }
}

/// Why a query got no answer of packets.
enum Unanswered {
    /// Refused with this HTTP status and reason.
    Refused(u16, String),
    /// The client hung up while its filter was being checked.
    ClientGone,
}

impl QueryService {
    /// The check of `expr` for `links`: a pass seen lately is taken again (see
    /// [`serve_check::Passed`]), anything else is checked in a child.
    fn check(
        &self,
        expr: &str,
        links: &[store::FileLink],
        deadline: Option<Instant>,
        conn: &httpd::Conn,
    ) -> Verdict {
        if !self.allow_names && self.passed.knows(expr, links) {
            return Verdict::Passed;
        }
        let verdict = serve_check::check(expr, links, self.allow_names, deadline, |w| {
            conn.peer_closed(w)
        });
        if matches!(verdict, Verdict::Passed) && !self.allow_names {
            self.passed.remember(expr, links);
        }
        verdict
    }

    /// The files to read and the query's plan, with the filter checked in a bounded child
    /// first; run while the query holds its place.
    fn prepare(
        &self,
        expr: &str,
        names: Vec<index::NamePattern>,
        conn: &httpd::Conn,
        deadline: Option<Instant>,
    ) -> Result<(Vec<PathBuf>, index::query::Plan), Unanswered> {
        use Unanswered::Refused;
        // Listed per query: the capture keeps adding files and retention deletes them.
        let files =
            index::capture_files(&self.stores, true).map_err(|e| Refused(500, e.to_string()))?;
        // Each file's link, so that the check compiles the filter as the query will.
        let survey = index::query::survey(&files);
        let mut links = survey.links();
        // An archive's files are listed once the window is known (after the check): checked for
        // Ethernet, what ringcap captures; the plan compiles for their own links.
        if !self.archives.is_empty() && links.is_empty() {
            links.push(store::FileLink {
                linktype: 1,
                snaplen: store::MAX_SNAPLEN,
                swapped: false,
                nanos: false,
            });
        }
        // Checked in a child that can be killed, inside the place and the time limit; only a
        // query that passed is parsed and compiled in this process.
        let verdict = self.check(expr, &links, deadline, conn);
        match verdict {
            Verdict::Passed => {}
            Verdict::Refused(why) => return Err(Refused(400, why)),
            // Not the server's fault and no use retrying (so not 5xx), yet no syntax error.
            Verdict::TooCostly(why) => return Err(Refused(422, why)),
            Verdict::Failed(why) => return Err(Refused(500, why)),
            Verdict::ClientGone => return Err(Unanswered::ClientGone),
        }
        let mut query = index::parse_query(expr, sys::now_ns()).map_err(|e| Refused(400, e))?;
        query.names = names;
        let mut survey = survey;
        for (url, reader) in &self.archives {
            let listing = reader
                .list(query.after_ns, query.before_ns)
                .map_err(|e| Refused(502, format!("the archive {url} could not be listed: {e}")))?;
            survey = survey.join(index::query::survey_ranges(listing.files));
        }
        // The filter compiled for each file's link, as tcpdump -r compiles it (the check passed,
        // so within its bounds): refused with libpcap's words before any byte of the result.
        let plan = survey.plan(&query).map_err(|e| {
            let status = if e.is_refusal() { 400 } else { 500 };
            Refused(status, e.to_string())
        })?;
        Ok((files, plan))
    }
}

/// Each capture file by name and size, with its coverage record (a record that is not this
/// file's, or unreadable, is no record); a file gone meanwhile is left out.
fn file_entries(files: &[PathBuf]) -> Vec<fleet::FileEntry> {
    files
        .iter()
        .filter_map(|path| {
            Some(fleet::FileEntry {
                name: path.file_name()?.to_str()?.to_string(),
                size: std::fs::metadata(path).ok()?.len(),
                coverage: store::read_coverage(path).ok().flatten(),
            })
        })
        .collect()
}

/// What a request target's parameters ask for (`/query?name=*.evil.example&format=pcapng`).
#[derive(Debug, Default)]
pub(crate) struct Params {
    /// `name=` (repeatable, percent-encoded as a form would send them), as `ringcap query
    /// --name` takes them.
    pub names: Vec<index::NamePattern>,
    /// `format=pcap|pcapng`: the answer's, over the server's -F.
    pub format: Option<store::Format>,
}

/// `format=`'s value as an answer's format (pcap: microseconds or nanoseconds as the files
/// have them, as without it).
pub(crate) fn format_param(v: &str) -> Result<Option<store::Format>, String> {
    match v {
        "pcapng" => Ok(Some(store::Format::PcapNg)),
        "pcap" | "" => Ok(None),
        other => Err(format!("format={other:?}: pcap or pcapng")),
    }
}

fn params_of_target(target: &str) -> Result<Params, String> {
    let mut out = Params::default();
    let Some((_, params)) = target.split_once('?') else {
        return Ok(out);
    };
    for p in params.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        match k {
            "name" => out
                .names
                .push(index::NamePattern::parse(&percent_decoded(v)?)?),
            "format" => out.format = format_param(&percent_decoded(v)?)?,
            _ => {
                return Err(format!(
                    "unknown parameter {k:?}: /query takes name=GLOB and format=pcap|pcapng"
                ))
            }
        }
    }
    Ok(out)
}

/// `%HH` and `+` decoded; refused when that is not UTF-8 or a `%` is not followed by two hex digits.
fn percent_decoded(v: &str) -> Result<String, String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("name={v:?}: a % not followed by two hex digits"))?;
                out.push(hex);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| format!("name={v:?}: not UTF-8"))
}

/// The expression as the log quotes it: its start when it is long.
fn shown(expr: &str) -> String {
    match expr.char_indices().nth(MAX_LOG_EXPR) {
        None => format!("{expr:?}"),
        Some((end, _)) => format!("{:?}… ({} bytes)", &expr[..end], expr.len()),
    }
}

/// Why a write to the client failed, for the log.
fn client_cut(kind: io::ErrorKind, stall: Duration) -> String {
    match kind {
        // SO_SNDTIMEO expiring reads as EAGAIN.
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!(
            "the client stopped reading ({} without taking any of the result)",
            units::time::format_duration(stall)
        ),
        other => format!("the client went away ({other})"),
    }
}

/// A writer that counts what went through it: the bytes a cut client was sent.
struct Counted<'a, W: io::Write> {
    out: &'a mut W,
    bytes: u64,
}

impl<W: io::Write> io::Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// The files a query could not read whole, as one line; None when every file was read.
fn unread_files(reports: &[index::FileReport]) -> Option<String> {
    let errors: Vec<String> = reports.iter().filter_map(|r| r.error_line()).collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_of_a_query_target() {
        let names = |t: &str| params_of_target(t).map(|p| p.names);
        let n = names("/query?name=%2A.Evil.example&name=a.test").unwrap();
        assert_eq!(
            n.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            ["*.evil.example", "a.test"]
        );
        assert!(names("/query").unwrap().is_empty());
        assert!(names("/query?host=x").is_err());
        assert!(names("/query?name=%zz").is_err());
        assert!(names("/query?name=a+b").is_err(), "a space is no name");
        let format = |t: &str| params_of_target(t).map(|p| p.format);
        assert_eq!(
            format("/query?format=pcapng"),
            Ok(Some(store::Format::PcapNg))
        );
        assert_eq!(format("/query?format=pcap&name=a.test"), Ok(None));
        assert!(format("/query?format=erf").is_err());
    }

    #[test]
    fn listen_addresses_resolve_and_bad_ones_are_usage_errors() {
        assert_eq!(
            listen_addrs("127.0.0.1:8080").unwrap(),
            vec!["127.0.0.1:8080".parse().unwrap()]
        );
        assert_eq!(listen_addrs("8080").unwrap_err().code, 2);
    }
}
