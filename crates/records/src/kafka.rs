//! Header records through Kafka (`--records kafka://BROKER[,BROKER]/TOPIC`): the probe produces each sealed
//! batch as one message value (the same bytes a TCP collector receives) and `ringcap collect --listen
//! kafka://...` consumes them, checks the tag and stores Parquet as the TCP collector does.
//!
//! Partitions: a batch holds records of many flows, so the probe keeps one batch builder per partition and puts
//! each record in the builder of `flow_hash(record) % partitions` (the symmetric 5-tuple hash of flow striping):
//! one flow, both directions, always lands in one partition, and a consumer per partition sees whole flows.
//! Keying whole batches by a "dominant" flow would split every other flow of the batch over partitions.
//! Each partition is its own stream (`stream_id + partition`) with its own seq: Kafka keeps order within a
//! partition only, so per-partition seqs arrive in order and the collector's loss and replay accounting stays
//! exact. The message key is `PROBE_ID/STREAM_ID` (the stream), for tools that repartition by key.
//!
//! Delivery: produce waits for all in-sync replicas (acks=all); a produce that returns counts the batch as
//! acked. One that fails or times out stays queued and is re-sent (same bytes, same seq: if the first try was
//! in fact written, the collector refuses the copy as a replay) after a backoff; the queue is bounded and only
//! when it is full is the oldest batch dropped and counted. So `records = acked + dropped + queue_drops +
//! unacked` at the end, as for TCP collectors.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record as KafkaRecord;
use rskafka::BackoffConfig;

use crate::batch::{Batch, Key};

/// Batches waiting to be produced (all partitions) before the oldest is dropped: 256 × 64 KiB = 16 MiB.
const QUEUE_MAX: usize = 256;
/// Batches per produce request (one partition).
const PER_REQUEST: usize = 16;
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// `kafka://BROKER[,BROKER]/TOPIC`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaDest {
    /// Bootstrap brokers, `HOST:PORT` each.
    pub brokers: Vec<String>,
    /// The topic.
    pub topic: String,
}

impl KafkaDest {
    /// Parses `kafka://HOST:PORT[,HOST:PORT...]/TOPIC`; None when `s` is not a kafka:// URL.
    pub fn parse(s: &str) -> Option<Result<KafkaDest, String>> {
        let rest = s.strip_prefix("kafka://")?;
        Some((|| {
            let (brokers, topic) = rest
                .split_once('/')
                .ok_or("missing /TOPIC (write kafka://HOST:PORT/TOPIC)")?;
            let brokers: Vec<String> = brokers
                .split(',')
                .map(|b| b.trim().to_string())
                .filter(|b| !b.is_empty())
                .collect();
            if brokers.is_empty() || brokers.iter().any(|b| !b.contains(':')) {
                return Err("each broker needs HOST:PORT".to_string());
            }
            // Kafka's own rule for topic names.
            if topic.is_empty()
                || topic.len() > 249
                || !topic
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            {
                return Err(format!(
                    "topic `{topic}`: 1 to 249 characters of a-z A-Z 0-9 . _ -"
                ));
            }
            Ok(KafkaDest {
                brokers,
                topic: topic.to_string(),
            })
        })())
    }

    /// As written in `--records`.
    pub fn name(&self) -> String {
        format!("kafka://{}/{}", self.brokers.join(","), self.topic)
    }

    /// The collector id batch tags are bound to: the topic (brokers may be named differently on each side).
    pub fn collector_id(&self) -> Vec<u8> {
        format!("kafka:{}", self.topic).into_bytes()
    }
}

/// A single-thread tokio runtime: rskafka is async, ringcap's threads are not.
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Connects to the brokers (within `timeout`) and returns the client and the topic's partition count.
pub(crate) async fn connect(
    dest: &KafkaDest,
    timeout: Duration,
) -> Result<(Client, usize), String> {
    let what = || format!("Kafka {}", dest.name());
    let client = tokio::time::timeout(
        timeout,
        ClientBuilder::new(dest.brokers.clone())
            .client_id("ringcap")
            // Give up a request after the timeout instead of rskafka's default of retrying for ever: the
            // sender counts the failure and retries itself.
            .backoff_config(BackoffConfig {
                init_backoff: BACKOFF_MIN,
                max_backoff: BACKOFF_MAX,
                base: 2.0,
                deadline: Some(timeout),
            })
            .build(),
    )
    .await
    .map_err(|_| format!("{}: no broker answered within {timeout:?}", what()))?
    .map_err(|e| format!("{}: {e}", what()))?;
    let topics = tokio::time::timeout(timeout, client.list_topics())
        .await
        .map_err(|_| format!("{}: no metadata within {timeout:?}", what()))?
        .map_err(|e| format!("{}: {e}", what()))?;
    let n = topics
        .iter()
        .find(|t| t.name == dest.topic)
        .map(|t| t.partitions.len())
        .ok_or_else(|| {
            format!(
                "{}: topic `{}` does not exist (create it with as many partitions as consumers you want)",
                what(),
                dest.topic
            )
        })?;
    Ok((client, n))
}

pub(crate) async fn partition_clients(
    client: &Client,
    topic: &str,
    n: usize,
) -> Result<Vec<PartitionClient>, String> {
    let mut v = Vec::with_capacity(n);
    for p in 0..n {
        v.push(
            client
                .partition_client(topic, p as i32, UnknownTopicHandling::Retry)
                .await
                .map_err(|e| format!("partition {p}: {e}"))?,
        );
    }
    Ok(v)
}

/// A sealed batch waiting for its produce to be acknowledged.
struct Queued {
    batch: Batch,
    len: usize,
    /// Produced before (a failed or timed-out try): counted as re-sent.
    tried: bool,
}

/// The Kafka side of the probe's sender thread (see the module doc).
pub(crate) struct KafkaSender {
    pub(crate) dest: KafkaDest,
    pub(crate) key: Key,
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) parts: Vec<PartitionClient>,
    pub(crate) ack_timeout: Duration,
    pub(crate) shared: Arc<crate::probe::Shared>,
    pub(crate) quiet: bool,
}

impl KafkaSender {
    pub(crate) fn run(self, rx: mpsc::Receiver<crate::probe::Msg>) {
        let n = self.parts.len();
        let mut seq = vec![0u64; n];
        let mut queues: Vec<VecDeque<Queued>> = (0..n).map(|_| VecDeque::new()).collect();
        let mut retry_at = Instant::now();
        let mut backoff = BACKOFF_MIN;
        let mut warned = false;
        let collector_id = self.dest.collector_id();
        let c = &self.shared.collectors[0];
        c.up.store(true, Relaxed);
        let mut open = true;
        let mut deadline: Option<Instant> = None;
        loop {
            // Take what the batchers handed over (wait a little only when nothing is queued).
            let queued: usize = queues.iter().map(|q| q.len()).sum();
            let wait = if queued == 0 || Instant::now() < retry_at {
                Duration::from_millis(10)
            } else {
                Duration::ZERO
            };
            if open {
                let mut first = true;
                loop {
                    let m = if first {
                        first = false;
                        rx.recv_timeout(wait)
                    } else {
                        rx.try_recv().map_err(|e| match e {
                            mpsc::TryRecvError::Empty => RecvTimeoutError::Timeout,
                            mpsc::TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                        })
                    };
                    match m {
                        Ok(mut m) => {
                            let p = m.to.unwrap_or(0) % n;
                            let len = m
                                .batch
                                .seal(&self.key, &collector_id, seq[p], sys::now_ns())
                                .len();
                            seq[p] += 1;
                            if queues.iter().map(|q| q.len()).sum::<usize>() >= QUEUE_MAX {
                                // Full while the broker is away: the oldest batch of the longest queue goes.
                                let long = (0..n).max_by_key(|&i| queues[i].len()).unwrap_or(0);
                                if let Some(old) = queues[long].pop_front() {
                                    c.dropped
                                        .fetch_add(old.batch.record_count() as u64, Relaxed);
                                }
                            }
                            queues[p].push_back(Queued {
                                batch: m.batch,
                                len,
                                tried: false,
                            });
                        }
                        Err(RecvTimeoutError::Timeout) => break,
                        Err(RecvTimeoutError::Disconnected) => {
                            open = false;
                            deadline = Some(Instant::now() + self.ack_timeout * 2);
                            break;
                        }
                    }
                }
            }
            let pending: usize = queues.iter().map(|q| q.len()).sum();
            self.shared.pending.store(
                queues
                    .iter()
                    .flatten()
                    .map(|q| q.batch.record_count() as u64)
                    .sum(),
                Relaxed,
            );
            if !open && (pending == 0 || deadline.is_some_and(|d| Instant::now() >= d)) {
                break;
            }
            if pending == 0 || Instant::now() < retry_at {
                if !open {
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            // One request per partition with queued batches, all in flight at once.
            let mut reqs: Vec<(usize, usize, Vec<KafkaRecord>)> = Vec::new();
            for (p, q) in queues.iter_mut().enumerate() {
                if q.is_empty() {
                    continue;
                }
                let take = q.len().min(PER_REQUEST);
                let now = rskafka::chrono::Utc::now();
                let recs = q
                    .iter_mut()
                    .take(take)
                    .map(|b| {
                        let h = b.batch.header();
                        let count = b.batch.record_count() as u64;
                        c.sent.fetch_add(count, Relaxed);
                        c.batches_sent.fetch_add(1, Relaxed);
                        if b.tried {
                            c.resent.fetch_add(count, Relaxed);
                        }
                        b.tried = true;
                        KafkaRecord {
                            key: Some(format!("{}/{}", h.probe_id, h.stream_id).into_bytes()),
                            value: Some(b.batch.bytes()[..b.len].to_vec()),
                            headers: Default::default(),
                            timestamp: now,
                        }
                    })
                    .collect();
                reqs.push((p, take, recs));
            }
            let parts = &self.parts;
            let timeout = self.ack_timeout;
            let results: Vec<(usize, usize, Result<(), String>)> = self.rt.block_on(async {
                let mut set = Vec::new();
                for (p, take, recs) in reqs {
                    let pc = &parts[p];
                    set.push(async move {
                        let r = match tokio::time::timeout(
                            timeout,
                            pc.produce(recs, Compression::NoCompression),
                        )
                        .await
                        {
                            Ok(Ok(_)) => Ok(()),
                            Ok(Err(e)) => Err(e.to_string()),
                            Err(_) => Err(format!("no delivery report within {timeout:?}")),
                        };
                        (p, take, r)
                    });
                }
                join_all(set).await
            });
            let mut failed = None;
            for (p, take, r) in results {
                match r {
                    Ok(()) => {
                        for b in queues[p].drain(..take) {
                            c.acked.fetch_add(b.batch.record_count() as u64, Relaxed);
                            crate::probe::give_back(&self.shared, b.batch);
                        }
                    }
                    Err(e) => failed = Some(e),
                }
            }
            match failed {
                None => {
                    if warned && !self.quiet {
                        log::info!("records: {} delivers again", self.dest.name());
                    }
                    warned = false;
                    backoff = BACKOFF_MIN;
                    c.up.store(true, Relaxed);
                }
                Some(e) => {
                    c.failures.fetch_add(1, Relaxed);
                    c.up.store(false, Relaxed);
                    if !warned && !self.quiet {
                        log::warn!(
                            "records: producing to {} failed ({e}); re-sending with backoff up to {BACKOFF_MAX:?}, {} batches queued (at most {QUEUE_MAX})",
                            self.dest.name(),
                            pending
                        );
                    }
                    warned = true;
                    retry_at = Instant::now() + backoff;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
        let left: u64 = queues
            .iter()
            .flatten()
            .map(|q| q.batch.record_count() as u64)
            .sum();
        // Never produced: dropped; produced but without a delivery report: unacked (may be stored).
        let (tried, never): (u64, u64) = queues.iter().flatten().fold((0, 0), |(t, n), q| {
            let k = q.batch.record_count() as u64;
            if q.tried {
                (t + k, n)
            } else {
                (t, n + k)
            }
        });
        debug_assert_eq!(tried + never, left);
        c.unacked.store(tried, Relaxed);
        c.dropped.fetch_add(never, Relaxed);
        self.shared.pending.store(0, Relaxed);
        c.up.store(false, Relaxed);
    }
}

/// Runs futures concurrently on the current-thread runtime and returns their outputs in order.
async fn join_all<F: std::future::Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut futs: Vec<std::pin::Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all = true;
        for (i, f) in futs.iter_mut().enumerate() {
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => out[i] = Some(v),
                    std::task::Poll::Pending => all = false,
                }
            }
        }
        if all {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    out.into_iter().map(|o| o.expect("ready")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let d = KafkaDest::parse("kafka://127.0.0.1:9092,h2:9093/rec-1")
            .unwrap()
            .unwrap();
        assert_eq!(d.brokers, vec!["127.0.0.1:9092", "h2:9093"]);
        assert_eq!(d.topic, "rec-1");
        assert_eq!(d.name(), "kafka://127.0.0.1:9092,h2:9093/rec-1");
        assert!(KafkaDest::parse("tcp://1.2.3.4:5").is_none());
        assert!(KafkaDest::parse("kafka://h:1").unwrap().is_err());
        assert!(KafkaDest::parse("kafka://h/t").unwrap().is_err());
        assert!(KafkaDest::parse("kafka://h:1/a b").unwrap().is_err());
    }
}
