//! `--records`: the header-record probe and the line that names its collectors.

use std::time::Duration;

use anyhow::anyhow;

use crate::cli::CaptureArgs;
use crate::Fatal;

/// Starts the header-record probe for `--records` (None without it). Bad destinations or keys are usage
/// errors; collectors that cannot be reached yet are retried by the sender, not errors.
pub fn records_probe(a: &CaptureArgs) -> Result<Option<records::probe::Probe>, Fatal> {
    use records::probe::{Dest, Probe, ProbeConfig, Stripe};
    if a.records.is_empty() {
        return Ok(None);
    }
    // `--records` splits at commas, so kafka://B1:P,B2:P/TOPIC arrives in pieces: join them again.
    let mut joined: Vec<String> = Vec::new();
    for d in &a.records {
        let d = d.trim();
        match joined.last_mut() {
            Some(k) if k.starts_with("kafka://") && !k["kafka://".len()..].contains('/') => {
                k.push(',');
                k.push_str(d);
            }
            _ => joined.push(d.to_string()),
        }
    }
    let mut kafka = None;
    let mut dests = Vec::new();
    for d in &joined {
        match records::kafka::KafkaDest::parse(d) {
            Some(k) => {
                let k = k.map_err(|why| {
                    Fatal::usage(anyhow!("bad --records destination '{d}': {why}"))
                })?;
                if kafka.replace(k).is_some() {
                    return Err(Fatal::usage(anyhow!(
                        "--records takes one kafka:// destination"
                    )));
                }
            }
            None => dests.push(Dest::parse(d).map_err(Fatal::usage)?),
        }
    }
    let key_path = a.key.as_ref().ok_or_else(|| {
        Fatal::usage(anyhow!(
            "--records needs --key FILE (the collectors' shared key)"
        ))
    })?;
    let key = records::batch::Key::load(key_path).map_err(Fatal::usage)?;
    let stripe: Stripe = a.stripe.parse().map_err(Fatal::usage)?;
    let mut cfg = ProbeConfig::new(dests, key);
    cfg.stripe = stripe;
    cfg.kafka = kafka;
    cfg.probe_id = a
        .probe_id
        .unwrap_or_else(|| records::probe::default_probe_id(&a.interface.join("+")));
    cfg.flush = Duration::from_millis(a.records_flush.max(1));
    cfg.ack_timeout = Duration::from_millis(a.ack_timeout_ms.max(1));
    if let Some(ca) = &a.tls_ca {
        let identity = a.tls_cert.as_deref().zip(a.tls_key.as_deref());
        cfg.tls = Some(records::tls::client_config(ca, identity).map_err(Fatal::usage)?);
    }
    Probe::start(cfg).map(Some).map_err(Fatal::usage)
}

pub fn records_destinations(a: &CaptureArgs, p: &records::probe::Probe) -> String {
    let stats = p.stats();
    if let Some(c) = stats
        .collectors
        .first()
        .filter(|c| c.dest.starts_with("kafka://"))
    {
        // One builder per partition; records go to a partition by flow hash.
        return format!(
            "{} ({} partitions, {} B batches, partition by flow)",
            c.dest,
            p.capacities().len(),
            p.capacities().first().copied().unwrap_or(0)
        );
    }
    let dests: Vec<String> = a
        .records
        .iter()
        .zip(p.capacities())
        .map(|(d, cap)| format!("{} ({} B batches)", d.trim(), cap))
        .collect();
    format!("{}, stripe {}", dests.join(", "), a.stripe)
}
