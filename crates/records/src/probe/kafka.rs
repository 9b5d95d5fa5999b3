//! Starting the probe toward Kafka instead of collectors: connect to the broker, one batch builder per
//! partition, and the producing thread of [`crate::kafka`].

use std::sync::Arc;
use std::time::Duration;

use super::stats::{CollectorCounters, Shared};
use super::{Probe, ProbeConfig, ProbeError, Stripe};
use crate::batch::MAX_PAYLOAD;
use crate::kafka::{self, KafkaDest, KafkaSender};

impl Probe {
    /// Kafka: connects now (the partition count decides the batch builders; an unreachable broker or a
    /// missing topic is an error at start, unlike a TCP collector), then starts the producing thread.
    pub(super) fn start_kafka(cfg: ProbeConfig, dest: KafkaDest) -> Result<Probe, ProbeError> {
        let bad = |why: String| ProbeError::BadDest {
            dest: dest.name(),
            why,
        };
        if !cfg.dests.is_empty() {
            return Err(bad(
                "a kafka:// destination cannot be mixed with tcp:// or udp:// collectors".into(),
            ));
        }
        let rt = kafka::runtime().map_err(|e| bad(e.to_string()))?;
        let connect_timeout = cfg.ack_timeout.max(Duration::from_secs(5));
        let (parts, n) = rt
            .block_on(async {
                let (client, n) = kafka::connect(&dest, connect_timeout).await?;
                let parts = kafka::partition_clients(&client, &dest.topic, n).await?;
                Ok::<_, String>((parts, n))
            })
            .map_err(bad)?;
        let shared = Arc::new(Shared {
            collectors: vec![CollectorCounters::default()],
            names: vec![dest.name()],
            ..Shared::default()
        });
        let sender = KafkaSender {
            dest: dest.clone(),
            key: cfg.key.clone(),
            rt,
            parts,
            ack_timeout: cfg.ack_timeout,
            shared: Arc::clone(&shared),
            quiet: cfg.quiet,
        };
        // One builder per partition, each a full-size batch (the broker's default message limit is 1 MB).
        let capacities = vec![cfg.tcp_payload.min(MAX_PAYLOAD); n];
        Probe::launch(
            &cfg,
            "ringcap-kafka",
            shared,
            capacities,
            Stripe::Flow,
            true,
            move |rx| sender.run(rx),
        )
    }
}
