//! Archive retention: a sensor's objects kept by age (`--archive-max-age`) and by bytes
//! (`--archive-budget`), as capture's `--disk-budget` keeps a local store. A capture file and its
//! companions (index, flow table, coverage) go together, oldest first by their key
//! (`date=…/hour=…/<name>`: ringcap's names sort by time). The capture object is deleted first,
//! then its companions: a kill in between leaves an index without its capture, which a query
//! ignores (it pairs captures with indexes) and the next pass deletes; never a capture whose index
//! is gone while the capture stays, which a query would have to read whole.

use std::time::Duration;

use futures::TryStreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::error::{self, ArchiveError};

/// What the archive keeps; None: no limit of that kind.
#[derive(Clone, Copy, Debug, Default)]
pub struct Retention {
    /// A capture file is deleted once the whole hour of its key is older than this.
    pub max_age: Option<Duration>,
    /// The sensor's objects in all, in bytes: the oldest captures go until they fit.
    pub budget: Option<u64>,
}

impl Retention {
    pub fn is_off(&self) -> bool {
        self.max_age.is_none() && self.budget.is_none()
    }
}

/// What one expiry pass did.
#[derive(Default, Debug, Clone, serde::Serialize)]
pub struct ExpireReport {
    /// Capture files deleted (with their companions).
    pub deleted_captures: usize,
    /// Objects deleted (captures, indexes, flow tables).
    pub deleted_objects: usize,
    pub deleted_bytes: u64,
    /// The sensor's bytes in the archive after the pass.
    pub kept_bytes: u64,
}

/// A capture file's objects in the archive.
#[derive(Debug, Default)]
struct Group {
    /// `YYYY-MM-DD/HH/<capture name>`: the order of age.
    order: String,
    /// Start of the key's hour, seconds since the epoch (None: a key outside the layout).
    hour_start: Option<i64>,
    /// The capture object first (when present), then its companions.
    keys: Vec<(Key, u64)>,
    bytes: u64,
}

/// The capture file name an object belongs to: its own name, or the name its companion suffix
/// was added to.
fn capture_name(name: &str) -> &str {
    for suffix in [".idx", ".flows.parquet", ".coverage.json"] {
        if let Some(c) = name.strip_suffix(suffix) {
            return c;
        }
    }
    name
}

/// `date=YYYY-MM-DD/hour=HH/NAME` below the sensor's key: the date, hour and name.
fn parse_rel(rel: &str) -> Option<(&str, &str, &str)> {
    let mut parts = rel.splitn(3, '/');
    let date = parts.next()?.strip_prefix("date=")?;
    let hour = parts.next()?.strip_prefix("hour=")?;
    let name = parts.next()?;
    let ok = date.len() == 10 && hour.len() == 2 && !name.is_empty() && !name.contains('/');
    ok.then_some((date, hour, name))
}

/// Seconds since the epoch at the start of `YYYY-MM-DD` hour `HH` (UTC).
fn hour_start(date: &str, hour: &str) -> Option<i64> {
    let ns = units::time::parse_time(&format!("{date}T{hour}:00:00Z"), 0).ok()?;
    Some((ns / 1_000_000_000) as i64)
}

/// The sensor's objects grouped by capture file, oldest first. Objects outside the layout are
/// left alone (not ringcap's to delete).
fn groups(objects: Vec<(Key, u64)>, sensor_key: &str) -> Vec<Group> {
    let mut by_capture: std::collections::BTreeMap<String, Group> = Default::default();
    let base = format!("{sensor_key}/");
    for (key, size) in objects {
        let text = key.as_ref().to_string();
        let Some((date, hour, name)) = text.strip_prefix(&base).and_then(parse_rel) else {
            continue;
        };
        let capture = capture_name(name);
        let order = format!("{date}/{hour}/{capture}");
        let g = by_capture.entry(order.clone()).or_insert_with(|| Group {
            order,
            hour_start: hour_start(date, hour),
            ..Default::default()
        });
        g.bytes += size;
        if name == capture {
            g.keys.insert(0, (key, size));
        } else {
            g.keys.push((key, size));
        }
    }
    by_capture.into_values().collect()
}

/// Which groups (indexes into `groups`, oldest first) the retention deletes at `now` (seconds).
fn doomed(groups: &[Group], r: Retention, now: i64) -> Vec<usize> {
    let mut out = Vec::new();
    let mut total: u64 = groups.iter().map(|g| g.bytes).sum();
    for (i, g) in groups.iter().enumerate() {
        let too_old = match (r.max_age, g.hour_start) {
            (Some(age), Some(start)) => start + 3600 <= now - age.as_secs() as i64,
            _ => false,
        };
        let over = r.budget.is_some_and(|b| total > b);
        if !(too_old || over) {
            // Oldest first: the rest are younger, and the total only fell.
            break;
        }
        total -= g.bytes;
        out.push(i);
    }
    out
}

/// Deletes what `r` does not keep under `sensor_key` (`PREFIX/sensor=NAME`).
pub(crate) async fn expire(
    s3: &dyn ObjectStore,
    sensor_key: &str,
    r: Retention,
    what: &str,
    endpoint: &str,
    bucket: &str,
) -> Result<ExpireReport, ArchiveError> {
    let classify = |e, doing: &str| error::classify(e, doing, endpoint, bucket);
    let prefix = Key::from(sensor_key);
    let objects: Vec<(Key, u64)> = s3
        .list(Some(&prefix))
        .map_ok(|m| (m.location, m.size))
        .try_collect()
        .await
        .map_err(|e| classify(e, &format!("listing {what}")))?;
    let groups = groups(objects, sensor_key);
    let now = (crate::now_ns() / 1_000_000_000) as i64;
    let mut report = ExpireReport {
        kept_bytes: groups.iter().map(|g| g.bytes).sum(),
        ..Default::default()
    };
    for i in doomed(&groups, r, now) {
        let g = &groups[i];
        for (key, size) in &g.keys {
            s3.delete(key)
                .await
                .map_err(|e| classify(e, &format!("deleting {key}")))?;
            report.deleted_objects += 1;
            report.deleted_bytes += size;
            report.kept_bytes -= size;
            log::info!("archive retention: deleted {key} ({size} bytes)");
        }
        report.deleted_captures += 1;
        log::debug!("archive retention: {} gone", g.order);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objs(list: &[(&str, u64)]) -> Vec<(Key, u64)> {
        list.iter().map(|(k, s)| (Key::from(*k), *s)).collect()
    }

    const S: &str = "p/sensor=s1";

    #[test]
    fn companions_follow_their_capture_and_the_capture_goes_first() {
        let g = groups(
            objs(&[
                ("p/sensor=s1/date=2026-11-01/hour=10/a-20261101T100000-000001.pcap.idx", 1),
                ("p/sensor=s1/date=2026-11-01/hour=10/a-20261101T100000-000001.pcap", 100),
                (
                    "p/sensor=s1/date=2026-11-01/hour=10/a-20261101T100000-000001.pcap.flows.parquet",
                    2,
                ),
                ("p/sensor=s1/notes.txt", 5),
                ("p/sensor=s1/date=2026-11-01/hour=09/b.pcap", 7),
            ]),
            S,
        );
        assert_eq!(g.len(), 2, "{g:?}");
        assert_eq!(g[0].order, "2026-11-01/09/b.pcap");
        assert_eq!(g[1].bytes, 103);
        assert!(g[1].keys[0].0.as_ref().ends_with(".pcap"));
        assert_eq!(g[1].keys.len(), 3);
        // 2026-11-01T10:00:00Z (`date -u -d 2026-11-01T10:00:00Z +%s`)
        assert_eq!(g[1].hour_start, Some(1_793_527_200));
    }

    #[test]
    fn age_counts_whole_hours_and_the_budget_takes_the_oldest() {
        let g = groups(
            objs(&[
                ("p/sensor=s1/date=2026-11-01/hour=10/a.pcap", 100),
                ("p/sensor=s1/date=2026-11-01/hour=11/b.pcap", 100),
                ("p/sensor=s1/date=2026-11-01/hour=12/c.pcap", 100),
            ]),
            S,
        );
        let at_12_30 = 1_793_527_200 + 2 * 3600 + 1800;
        let day = |h: u64| Retention {
            max_age: Some(Duration::from_secs(h * 3600)),
            budget: None,
        };
        // One hour of age at 12:30: the 10:00 hour ended 11:00 <= 11:30, the 11:00 hour ends 12:00 > 11:30.
        assert_eq!(doomed(&g, day(1), at_12_30), vec![0]);
        assert_eq!(doomed(&g, day(3), at_12_30), Vec::<usize>::new());
        let budget = |b| Retention {
            max_age: None,
            budget: Some(b),
        };
        assert_eq!(doomed(&g, budget(300), at_12_30), Vec::<usize>::new());
        assert_eq!(doomed(&g, budget(299), at_12_30), vec![0]);
        assert_eq!(doomed(&g, budget(100), at_12_30), vec![0, 1]);
        assert_eq!(doomed(&g, budget(0), at_12_30), vec![0, 1, 2]);
    }
}
