//! `--listen kafka://BROKER/TOPIC`: one thread consumes every partition of the topic and hands each message
//! value to the same checks and spool as a TCP batch (tag under the probe's key and the topic's collector id,
//! replay guard, append). Kafka keeps the messages, so freshness is not checked (a collector may catch up
//! hours later); duplicates (a probe re-sending after a lost delivery report) are still refused by seq.
//!
//! Offsets: after each fetch round the spool is synced and the next offset of every partition written to
//! `OUT_DIR/kafka-TOPIC.offsets` (one `partition offset` line each); a restarted collector resumes there, a
//! new one starts at the earliest message kept. A crash between the sync and the offsets file re-reads a
//! round: those batches are stored twice and `ringcap dedup` removes the copies, as after a lost TCP ack.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rskafka::client::partition::OffsetAt;

use super::{lock, Refusal, Shared, POLL};
use crate::batch::{self, batch_len};
use crate::kafka::{self, KafkaDest};

/// Bytes asked per partition and fetch.
const FETCH_MAX: i32 = 4 << 20;

/// Stands for the broker in log lines of refused messages (the rate limiter keys on an address).
const KAFKA_PEER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

fn offsets_path(sh: &Shared, d: &KafkaDest) -> PathBuf {
    sh.cfg
        .archive
        .dir
        .join(format!("kafka-{}.offsets", d.topic))
}

fn read_offsets(p: &PathBuf) -> BTreeMap<i32, i64> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (a, b) = l.split_once(' ')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect()
}

fn write_offsets(p: &PathBuf, o: &BTreeMap<i32, i64>) -> io::Result<()> {
    let tmp = p.with_extension("offsets.tmp");
    let text: String = o.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    std::fs::write(&tmp, text)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, p)
}

impl Shared {
    /// Checks and stores one Kafka message value: key chosen by the probe id it claims, tag bound to the
    /// topic's collector id.
    fn accept_kafka(&self, buf: &[u8], collector_id: &[u8]) -> Result<u64, Refusal> {
        let n = batch_len(buf).map_err(Refusal::Batch)?;
        if n != buf.len() {
            return Err(Refusal::Other(
                "trailing_bytes",
                format!("a message of {} bytes holds a batch of {n}", buf.len()),
            ));
        }
        let id = batch::claimed_probe_id(buf).unwrap_or(0);
        let key = self.keys.get(id).ok_or(Refusal::Handshake(
            crate::auth::HandshakeError::UnknownKeyId(id),
        ))?;
        let view = batch::open(buf, key, collector_id).map_err(Refusal::Batch)?;
        self.store_at(&view, Some(view.header().sent_unix_ns))
            .map(|(_, number)| number)
    }
}

pub(super) fn consume_loop(sh: Arc<Shared>, dest: KafkaDest) {
    let rt = match kafka::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            (sh.cfg.events)(&format!("kafka: cannot start a runtime: {e}"));
            return;
        }
    };
    let path = offsets_path(&sh, &dest);
    let mut offsets = read_offsets(&path);
    let collector_id = dest.collector_id();
    let mut warned = false;
    while !sh.stopping() {
        // (Re)connect; the broker may be down at start or go away: retry, say so once.
        let parts = rt.block_on(async {
            let (client, n) = kafka::connect(&dest, Duration::from_secs(5)).await?;
            kafka::partition_clients(&client, &dest.topic, n).await
        });
        let parts = match parts {
            Ok(p) => p,
            Err(e) => {
                if !warned {
                    (sh.cfg.events)(&format!("kafka: {e}; retrying"));
                    warned = true;
                }
                std::thread::sleep(POLL * 5);
                continue;
            }
        };
        if warned {
            (sh.cfg.events)(&format!("kafka: consuming {}", dest.name()));
            warned = false;
        }
        for pc in &parts {
            if let std::collections::btree_map::Entry::Vacant(slot) = offsets.entry(pc.partition())
            {
                match rt.block_on(pc.get_offset(OffsetAt::Earliest)) {
                    Ok(o) => {
                        slot.insert(o);
                    }
                    Err(e) => (sh.cfg.events)(&format!(
                        "kafka: partition {}: no earliest offset: {e}",
                        pc.partition()
                    )),
                }
            }
        }
        'fetching: while !sh.stopping() {
            let mut any = false;
            let mut last_number = 0;
            for pc in &parts {
                let Some(&at) = offsets.get(&pc.partition()) else {
                    continue;
                };
                let got = rt.block_on(async {
                    tokio::time::timeout(
                        Duration::from_secs(5),
                        pc.fetch_records(at, 1..FETCH_MAX, 100),
                    )
                    .await
                });
                let recs = match got {
                    Ok(Ok((recs, _high))) => recs,
                    Ok(Err(e)) => {
                        (sh.cfg.events)(&format!(
                            "kafka: fetching partition {} failed: {e}; reconnecting",
                            pc.partition()
                        ));
                        warned = true;
                        break 'fetching;
                    }
                    Err(_) => {
                        warned = true;
                        (sh.cfg.events)(&format!(
                            "kafka: no fetch answer from partition {} within 5 s; reconnecting",
                            pc.partition()
                        ));
                        break 'fetching;
                    }
                };
                for r in recs {
                    any = true;
                    offsets.insert(pc.partition(), r.offset + 1);
                    let Some(v) = r.record.value else { continue };
                    match sh.accept_kafka(&v, &collector_id) {
                        Ok(number) => last_number = last_number.max(number),
                        Err(e) => sh.refuse(KAFKA_PEER, "kafka", &e),
                    }
                }
            }
            if any {
                // Stored before the offsets move past them: a crash re-reads, never skips.
                let synced = match lock(&sh.state).archive.as_mut() {
                    Some(a) if last_number > 0 => a.sync(last_number),
                    _ => Ok(()),
                };
                match synced.and_then(|_| write_offsets(&path, &offsets)) {
                    Ok(()) => {}
                    Err(e) => (sh.cfg.events)(&format!(
                        "kafka: could not save the spool or offsets ({e}); a restart re-reads from the last saved offsets"
                    )),
                }
            }
        }
    }
}
