//! The sender thread toward collectors: seals each batch with the chosen collector's sequence number,
//! writes it (TCP or UDP), reads acks, fails over and re-sends, reconnects with backoff.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::batcher::Msg;
use super::link::{open_conn, tls_host, udp_payload_capacity, udp_socket, Link};
use super::stats::{give_back, CollectorCounters, Shared};
use super::{Dest, Probe, ProbeConfig, ProbeError, Transport};
use crate::auth::{self, AckError};
use crate::batch::{Batch, Key, MAX_PAYLOAD};

/// Batches waiting for any live collector before records are dropped.
const PENDING_MAX: usize = 256;
/// Backoff between reconnects: starts here, doubles, capped at BACKOFF_MAX.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A TCP connect attempt blocks the sender at most this long.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

impl Probe {
    /// Starts the sender thread toward TCP/UDP collectors (see [`Probe::start`]).
    pub(super) fn start_collectors(cfg: ProbeConfig) -> Result<Probe, ProbeError> {
        if cfg.dests.is_empty() {
            return Err(ProbeError::NoDest);
        }
        let mut links = Vec::new();
        let mut capacities = Vec::new();
        for d in &cfg.dests {
            let (link, cap) = match d.transport {
                Transport::Tcp => (Link::Tcp(None), cfg.tcp_payload.min(MAX_PAYLOAD)),
                Transport::Udp => {
                    let sock = udp_socket(d).map_err(|source| ProbeError::Socket {
                        dest: d.name.clone(),
                        source,
                    })?;
                    let cap = udp_payload_capacity(&sock, d.addr);
                    (Link::Udp(sock), cap)
                }
            };
            links.push(link);
            capacities.push(cap);
        }
        let shared = Arc::new(Shared {
            collectors: cfg
                .dests
                .iter()
                .map(|_| CollectorCounters::default())
                .collect(),
            names: cfg.dests.iter().map(|d| d.name.clone()).collect(),
            ..Shared::default()
        });
        let now = Instant::now();
        let sender = Sender {
            collectors: cfg
                .dests
                .iter()
                .zip(links)
                .zip(&capacities)
                .map(|((d, link), &cap)| Collector {
                    dest: d.clone(),
                    link,
                    capacity: cap,
                    seq: 0,
                    unacked: VecDeque::new(),
                    ack_buf: [0; auth::ACK_LEN],
                    ack_fill: 0,
                    retry_at: now,
                    backoff: BACKOFF_MIN,
                    warned: false,
                })
                .collect(),
            pending: VecDeque::new(),
            next: 0,
            key: cfg.key.clone(),
            probe_id: cfg.probe_id,
            tls: cfg.tls.clone(),
            ack_timeout: cfg.ack_timeout,
            unacked_max: cfg.unacked_max.max(1),
            shared: Arc::clone(&shared),
            quiet: cfg.quiet,
        };
        let stripe = cfg.stripe;
        Probe::launch(
            &cfg,
            "ringcap-records",
            shared,
            capacities,
            stripe,
            false,
            move |rx| sender.run(rx),
        )
    }
}

struct Unacked {
    seq: u64,
    batch: Batch,
    sent_at: Instant,
}

struct Collector {
    dest: Dest,
    link: Link,
    capacity: usize,
    seq: u64,
    unacked: VecDeque<Unacked>,
    ack_buf: [u8; auth::ACK_LEN],
    ack_fill: usize,
    /// Down until then (UDP after a send error, TCP while disconnected).
    retry_at: Instant,
    backoff: Duration,
    /// Said once that it is down (until it comes back).
    warned: bool,
}

impl Collector {
    fn is_up(&self, now: Instant) -> bool {
        match &self.link {
            Link::Tcp(s) => s.is_some(),
            Link::Udp(_) => now >= self.retry_at,
        }
    }
}

/// A batch that must go somewhere: first send or re-send (with the collector it left).
struct Outgoing {
    batch: Batch,
    to: Option<usize>,
    resend_from: Option<usize>,
}

struct Sender {
    collectors: Vec<Collector>,
    /// Batches waiting for a live collector (bounded by PENDING_MAX).
    pending: VecDeque<Outgoing>,
    /// Round-robin cursor.
    next: usize,
    key: Key,
    /// Also the key id announced in the handshake.
    probe_id: u64,
    tls: Option<Arc<rustls::ClientConfig>>,
    ack_timeout: Duration,
    unacked_max: usize,
    shared: Arc<Shared>,
    quiet: bool,
}

impl Sender {
    fn run(mut self, rx: mpsc::Receiver<Msg>) {
        loop {
            self.service(Instant::now());
            match rx.recv_timeout(Duration::from_millis(10)) {
                Ok(m) => self.dispatch(Outgoing {
                    batch: m.batch,
                    to: m.to,
                    resend_from: None,
                }),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        // Drain: everything handed over is sent; wait for acks (re-sending on failures) up to a deadline.
        let deadline = Instant::now() + self.ack_timeout * 2;
        while Instant::now() < deadline
            && (!self.pending.is_empty() || self.collectors.iter().any(|c| !c.unacked.is_empty()))
        {
            self.service(Instant::now());
            std::thread::sleep(Duration::from_millis(2));
        }
        for i in 0..self.collectors.len() {
            let n: u64 = self.collectors[i]
                .unacked
                .iter()
                .map(|u| u.batch.record_count() as u64)
                .sum();
            self.counters(i).unacked.store(n, Relaxed);
        }
        let stuck: Vec<Outgoing> = self.pending.drain(..).collect();
        for o in stuck {
            self.drop_batch(o);
        }
    }

    fn counters(&self, i: usize) -> &CollectorCounters {
        &self.shared.collectors[i]
    }

    /// Reconnects, reads acks, fails collectors whose oldest batch waited too long, flushes pending.
    fn service(&mut self, now: Instant) {
        for i in 0..self.collectors.len() {
            if matches!(self.collectors[i].link, Link::Tcp(None))
                && now >= self.collectors[i].retry_at
            {
                self.connect(i);
            }
            if let Err(why) = self.read_acks(i) {
                self.fail(i, &why);
                continue;
            }
            let c = &self.collectors[i];
            if c.unacked
                .front()
                .is_some_and(|u| now.duration_since(u.sent_at) > self.ack_timeout)
            {
                let why = format!("no ack within {:?}", self.ack_timeout);
                self.fail(i, &why);
            }
        }
        while !self.pending.is_empty() && self.any_up(now) {
            let o = self.pending.pop_front().expect("not empty");
            self.shared
                .pending
                .store(self.pending.len() as u64, Relaxed);
            self.dispatch(o);
        }
    }

    fn any_up(&self, now: Instant) -> bool {
        self.collectors.iter().any(|c| c.is_up(now))
    }

    fn connect(&mut self, i: usize) {
        let addr = self.collectors[i].dest.addr;
        let host = tls_host(&self.collectors[i].dest.name);
        let tls = self.tls.as_ref().map(|c| (c, host.as_str()));
        // TCP connected: an error after that is the handshake's (wrong key, old collector, TLS refused).
        let mut tcp_connected = false;
        let result = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
            .map_err(|e| e.to_string())
            .and_then(|s| {
                tcp_connected = true;
                open_conn(s, tls, &self.key, self.probe_id, self.ack_timeout)
            });
        let c = &mut self.collectors[i];
        match result {
            Ok(conn) => {
                c.link = Link::Tcp(Some(Box::new(conn)));
                c.backoff = BACKOFF_MIN;
                c.ack_fill = 0;
                if c.warned && !self.quiet {
                    log::info!("records: connected to collector {}", c.dest.name);
                }
                c.warned = false;
                self.shared.collectors[i].connects.fetch_add(1, Relaxed);
                self.shared.collectors[i].up.store(true, Relaxed);
            }
            Err(e) => {
                if tcp_connected {
                    self.shared.collectors[i]
                        .handshake_failures
                        .fetch_add(1, Relaxed);
                }
                if !c.warned && !self.quiet {
                    let what = if tcp_connected {
                        "refused the handshake"
                    } else {
                        "unreachable"
                    };
                    log::warn!(
                        "records: collector {} {what} ({e}); retrying with backoff up to {:?}, records go to the others meanwhile",
                        c.dest.name, BACKOFF_MAX
                    );
                }
                c.warned = true;
                c.retry_at = Instant::now() + c.backoff;
                c.backoff = (c.backoff * 2).min(BACKOFF_MAX);
            }
        }
    }

    /// Reads whatever acks arrived (non-blocking) and releases acked batches. An ack whose tag does not
    /// verify releases nothing: it is counted and the connection dropped (its batches are re-sent).
    fn read_acks(&mut self, i: usize) -> Result<(), String> {
        let c = &mut self.collectors[i];
        let Link::Tcp(Some(conn)) = &mut c.link else {
            return Ok(());
        };
        loop {
            match conn.stream.read(&mut c.ack_buf[c.ack_fill..]) {
                Ok(0) => {
                    // A refusal is 8 bytes, then the collector closes.
                    if c.ack_fill >= auth::ERROR_LEN {
                        if let Some(code) = auth::parse_error(&c.ack_buf[..c.ack_fill]) {
                            return Err(format!("the collector refused: {code}"));
                        }
                    }
                    return Err("connection closed by the collector".into());
                }
                Ok(n) => {
                    c.ack_fill += n;
                    if c.ack_fill < auth::ACK_LEN {
                        continue;
                    }
                    c.ack_fill = 0;
                    let seq = match conn.session.check_ack(&c.ack_buf) {
                        Ok(seq) => seq,
                        Err(e) => {
                            if e == AckError::BadTag {
                                self.shared.collectors[i].bad_acks.fetch_add(1, Relaxed);
                            }
                            return Err(e.to_string());
                        }
                    };
                    // Acks come in order on one stream; everything up to seq is stored.
                    while c.unacked.front().is_some_and(|u| u.seq <= seq) {
                        let u = c.unacked.pop_front().expect("front exists");
                        self.shared.collectors[i]
                            .acked
                            .fetch_add(u.batch.record_count() as u64, Relaxed);
                        give_back(&self.shared, u.batch);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Marks `i` down and sends its unacked batches elsewhere.
    fn fail(&mut self, i: usize, why: &str) {
        let c = &mut self.collectors[i];
        if !c.warned && !self.quiet {
            log::warn!(
                "records: collector {} failed ({why}); {} unacked batches go to other collectors",
                c.dest.name,
                c.unacked.len()
            );
        }
        c.warned = true;
        if let Link::Tcp(s) = &mut c.link {
            *s = None;
        }
        c.retry_at = Instant::now() + c.backoff;
        c.backoff = (c.backoff * 2).min(BACKOFF_MAX);
        let moved: Vec<Unacked> = c.unacked.drain(..).collect();
        self.shared.collectors[i].failures.fetch_add(1, Relaxed);
        self.shared.collectors[i].up.store(false, Relaxed);
        for u in moved {
            self.dispatch(Outgoing {
                batch: u.batch,
                to: None,
                resend_from: Some(i),
            });
        }
    }

    /// Picks a live collector for `o` (its own with flow striping, else round robin) and sends it there;
    /// queues it when none is live; drops it when the pending queue is full.
    fn dispatch(&mut self, mut o: Outgoing) {
        loop {
            let now = Instant::now();
            let size = o.batch.header().payload_len as usize;
            let fits = |c: &Collector| c.is_up(now) && c.capacity >= size;
            let target = match o.to {
                Some(t) if o.resend_from != Some(t) && fits(&self.collectors[t]) => Some(t),
                _ => {
                    let n = self.collectors.len();
                    (0..n)
                        .map(|k| (self.next + k) % n)
                        .find(|&k| Some(k) != o.resend_from && fits(&self.collectors[k]))
                }
            };
            let Some(t) = target else {
                if self.pending.len() >= PENDING_MAX {
                    let oldest = self.pending.pop_front().expect("full");
                    self.drop_batch(oldest);
                }
                // Back to its own collector is fine once the others are down too.
                o.resend_from = None;
                self.pending.push_back(o);
                self.shared
                    .pending
                    .store(self.pending.len() as u64, Relaxed);
                return;
            };
            if o.to.is_none() {
                self.next = (t + 1) % self.collectors.len();
            }
            match self.send_to(t, o) {
                Ok(()) => return,
                Err(back) => o = back, // t failed; try another
            }
        }
    }

    /// Seals with `t`'s next seq and writes it; on failure marks `t` down and returns the batch.
    fn send_to(&mut self, t: usize, mut o: Outgoing) -> Result<(), Outgoing> {
        // TCP: room in the unacked queue first (waits for acks, bounded by the ack timeout).
        if matches!(self.collectors[t].link, Link::Tcp(_)) {
            while self.collectors[t].unacked.len() >= self.unacked_max {
                if let Err(why) = self.wait_acks(t) {
                    self.fail(t, &why);
                    return Err(o);
                }
            }
        }
        let seq = self.collectors[t].seq;
        let count = o.batch.record_count() as u64;
        // TCP batches are bound to the collector id learnt in the handshake; UDP has none (empty id).
        let collector_id: &[u8] = match &self.collectors[t].link {
            Link::Tcp(Some(c)) => c.session.collector_id(),
            _ => b"",
        };
        let bytes_len = {
            let bytes = o.batch.seal(&self.key, collector_id, seq, sys::now_ns());
            bytes.len()
        };
        let result = match &self.collectors[t].link {
            Link::Udp(s) => s.send(&o.batch.bytes()[..bytes_len]).map(|_| ()),
            Link::Tcp(_) => self.write_tcp(t, &o),
        };
        match result {
            Ok(()) => {
                self.collectors[t].seq += 1;
                let cc = &self.shared.collectors[t];
                cc.batches_sent.fetch_add(1, Relaxed);
                cc.sent.fetch_add(count, Relaxed);
                if o.resend_from.is_some() {
                    cc.resent.fetch_add(count, Relaxed);
                }
                match self.collectors[t].link {
                    Link::Tcp(_) => self.collectors[t].unacked.push_back(Unacked {
                        seq,
                        batch: o.batch,
                        sent_at: Instant::now(),
                    }),
                    Link::Udp(_) => give_back(&self.shared, o.batch),
                }
                Ok(())
            }
            Err(e) => {
                if matches!(self.collectors[t].link, Link::Udp(_)) {
                    let c = &mut self.collectors[t];
                    if !c.warned && !self.quiet {
                        log::warn!(
                            "records: sending to collector {} failed ({e}); retrying in {:?}",
                            c.dest.name,
                            c.backoff
                        );
                    }
                    c.warned = true;
                    c.retry_at = Instant::now() + c.backoff;
                    c.backoff = (c.backoff * 2).min(BACKOFF_MAX);
                    self.shared.collectors[t].failures.fetch_add(1, Relaxed);
                } else {
                    self.fail(t, &e.to_string());
                }
                // A first send that failed is re-sent from here; the seq it had is not used.
                if o.resend_from.is_none() {
                    o.resend_from = Some(t);
                }
                Err(o)
            }
        }
    }

    /// Writes a sealed batch on a non-blocking stream, reading acks while the socket buffer is full (so a
    /// collector blocked on sending acks cannot deadlock us); gives up after the ack timeout.
    fn write_tcp(&mut self, t: usize, o: &Outgoing) -> io::Result<()> {
        let bytes = o.batch.bytes();
        let deadline = Instant::now() + self.ack_timeout;
        let mut at = 0;
        // The last round only flushes what TLS still buffers (a no-op on plain TCP).
        while at < bytes.len() || self.tls.is_some() {
            let Link::Tcp(Some(conn)) = &mut self.collectors[t].link else {
                return Err(io::Error::new(io::ErrorKind::NotConnected, "down"));
            };
            let s = &mut conn.stream;
            // Some(bytes written), or None once the flush is done.
            let step = if at < bytes.len() {
                s.write(&bytes[at..]).map(Some)
            } else {
                s.flush().map(|_| None)
            };
            match step {
                Ok(None) => break,
                Ok(Some(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(Some(n)) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let fd = s.as_raw_fd();
                    if Instant::now() >= deadline {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "collector not reading (send buffer full for the ack timeout)",
                        ));
                    }
                    poll(fd, libc::POLLOUT | libc::POLLIN, 20);
                    self.read_acks(t).map_err(io::Error::other)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Waits (≤ 20 ms) for acks on `t`; error when it failed or the oldest batch passed the ack timeout.
    fn wait_acks(&mut self, t: usize) -> Result<(), String> {
        let c = &self.collectors[t];
        let Link::Tcp(Some(conn)) = &c.link else {
            return Err("disconnected".into());
        };
        let s = &conn.stream;
        if c.unacked
            .front()
            .is_some_and(|u| u.sent_at.elapsed() > self.ack_timeout)
        {
            return Err(format!("no ack within {:?}", self.ack_timeout));
        }
        poll(s.as_raw_fd(), libc::POLLIN, 20);
        self.read_acks(t)
    }

    fn drop_batch(&mut self, o: Outgoing) {
        let who = o.to.or(o.resend_from).unwrap_or(self.next);
        self.shared.collectors[who]
            .dropped
            .fetch_add(o.batch.record_count() as u64, Relaxed);
        give_back(&self.shared, o.batch);
    }
}

fn poll(fd: i32, events: i16, timeout_ms: i32) {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, timeout_ms) };
}
