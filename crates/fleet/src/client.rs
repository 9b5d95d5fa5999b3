//! Asking a sensor's `ringcap serve` for a query's packets: `POST /query` with the query's text,
//! over mutual TLS; the answer is a pcap stream that the query's merge reads as a feed.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::sensors::{FleetError, Sensor};

/// Most of a refusal's text quoted (serve says why in a line or two).
const MAX_REFUSAL: u64 = 2000;
/// How long a connection may take to be set up (TCP and TLS).
const CONNECT_TIME: Duration = Duration::from_secs(10);

/// The text `ringcap serve` takes for `q`: its filter and its window as `after`/`before` terms
/// (Unix seconds to the nanosecond: the same instants, whatever the sensor's clock or zone).
pub fn query_text(q: &index::Query) -> String {
    let at = |ns: u64| format!("@{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    let mut terms = Vec::new();
    if let Some(a) = q.after_ns {
        terms.push(format!("after {}", at(a)));
    }
    if let Some(b) = q.before_ns {
        terms.push(format!("before {}", at(b)));
    }
    if q.tunnel.is_some() {
        // A tunnel term stands at the top level, in a chain of `and`s only.
        terms.push(q.filter.clone());
    } else if !q.filter.is_empty() {
        // In parentheses: `and` and `or` bind alike in pcap-filter, left to right.
        terms.push(format!("({})", q.filter));
    }
    terms.join(" and ")
}

/// One sensor asked for one query's packets.
pub struct SensorFeed {
    label: PathBuf,
    /// The sensor's base URL.
    base: String,
    url: String,
    body: String,
    client: reqwest::blocking::Client,
    idle: Duration,
}

impl SensorFeed {
    /// A feed of `sensor` for the query `text` (see [`query_text`]); a sensor that sends nothing
    /// for `idle` is cut and named slow.
    pub fn new(sensor: &Sensor, text: String, idle: Duration) -> Result<SensorFeed, FleetError> {
        // reqwest builds a TLS stack even for http://: ring, as everywhere in ringcap (already
        // installed when an archive client was made first: then this does nothing).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut b = reqwest::blocking::Client::builder()
            .connect_timeout(CONNECT_TIME)
            // Per read in the blocking client: the longest silence, not the whole answer's time.
            .timeout(idle)
            .no_proxy()
            .user_agent(concat!("ringcap/", env!("CARGO_PKG_VERSION")));
        if let Some(t) = &sensor.tls {
            let config =
                httpd::client_config(&t.ca, &t.cert, &t.key).map_err(|source| FleetError::Tls {
                    sensor: sensor.name.clone(),
                    source,
                })?;
            b = b.tls_backend_preconfigured((*config).clone());
        }
        let client = b.build().map_err(|e| FleetError::Client {
            sensor: sensor.name.clone(),
            what: e.to_string(),
        })?;
        Ok(SensorFeed {
            label: PathBuf::from(if sensor.url.ends_with(&sensor.name) {
                format!("sensor {}", sensor.url)
            } else {
                format!("sensor {} ({})", sensor.name, sensor.url)
            }),
            base: sensor.url.clone(),
            url: format!("{}/query", sensor.url),
            body: text,
            client,
            idle,
        })
    }
}

impl SensorFeed {
    /// Asks only for the flows with these names (`ringcap query --name`): `?name=GLOB&…`,
    /// each byte but letters, digits and `*-._~` percent-encoded.
    pub fn with_names(mut self, names: &[index::NamePattern]) -> SensorFeed {
        let mut sep = '?';
        for n in names {
            self.url.push(sep);
            self.url.push_str("name=");
            for b in n.as_str().bytes() {
                if b.is_ascii_alphanumeric() || b"*-._~".contains(&b) {
                    self.url.push(b as char);
                } else {
                    self.url.push_str(&format!("%{b:02X}"));
                }
            }
            sep = '&';
        }
        self
    }
}

/// Largest file list taken from a sensor (a store of 100 000 files lists in about 30 MB).
const MAX_FILE_LIST: u64 = 64 << 20;

impl SensorFeed {
    /// The capture files the sensor holds, with their coverage records (`GET /files`).
    pub fn files(&self) -> Result<crate::FileList, String> {
        let answer = self
            .client
            .get(format!("{}/files", self.base))
            .send()
            .map_err(|e| why_no_answer(&e, self.idle))?;
        let status = answer.status();
        let mut body = Vec::new();
        answer
            .take(MAX_FILE_LIST)
            .read_to_end(&mut body)
            .map_err(|e| format!("its file list was cut: {e}"))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body[..body.len().min(MAX_REFUSAL as usize)])
                .trim()
                .to_string();
            return Err(format!("no file list: HTTP {}: {text}", status.as_u16()));
        }
        serde_json::from_slice(&body).map_err(|e| format!("its file list is not one: {e}"))
    }
}

impl index::Feed for SensorFeed {
    fn name(&self) -> &Path {
        &self.label
    }

    fn open(&self) -> io::Result<Box<dyn Read + Send>> {
        let answer = self
            .client
            .post(&self.url)
            .header("Content-Type", "text/plain; charset=utf-8")
            .body(self.body.clone())
            .send()
            .map_err(|e| io::Error::other(why_no_answer(&e, self.idle)))?;
        let status = answer.status();
        if !status.is_success() {
            let mut text = String::new();
            let _ = answer.take(MAX_REFUSAL).read_to_string(&mut text);
            let text: String = text
                .trim()
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            return Err(io::Error::other(format!(
                "refused the query: HTTP {}: {text}",
                status.as_u16()
            )));
        }
        Ok(Box::new(Answer {
            body: answer,
            idle: self.idle,
        }))
    }
}

/// What went wrong before an answer began: down, slow, or the TLS handshake refused.
fn why_no_answer(e: &reqwest::Error, idle: Duration) -> String {
    // The innermost cause says it best ("Connection refused (os error 111)"); the layers above
    // it (request, client, connector) repeat the URL.
    let mut chain = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        chain = s.to_string();
        src = s.source();
    }
    if e.is_timeout() {
        format!(
            "slow: no answer within {} s (--sensor-timeout) ({chain})",
            idle.as_secs()
        )
    } else if e.is_connect() {
        format!("down: cannot connect ({chain})")
    } else {
        format!("no answer: {chain}")
    }
}

/// The answer's body; a silence longer than `idle`, or a stream cut short, is said so.
struct Answer {
    body: reqwest::blocking::Response,
    idle: Duration,
}

impl Read for Answer {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.body.read(buf).map_err(|e| {
            let slow = e.kind() == io::ErrorKind::TimedOut
                || e.to_string().contains("timed out");
            if slow {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "slow: sent nothing for {} s (--sensor-timeout); its answer was cut there",
                        self.idle.as_secs()
                    ),
                )
            } else {
                io::Error::new(
                    e.kind(),
                    format!("its answer was cut ({e}): the sensor failed mid-query or the connection broke"),
                )
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_text_gives_the_sensor_the_same_filter_and_instants() {
        let q = index::parse_query(
            "host 10.0.0.1 or port 53 and after @1700000000.000000001 and before @1700000001",
            0,
        )
        .unwrap();
        let text = query_text(&q);
        assert_eq!(
            text,
            "after @1700000000.000000001 and before @1700000001.000000000 and (host 10.0.0.1 or port 53)"
        );
        let again = index::parse_query(&text, 0).unwrap();
        assert_eq!((again.after_ns, again.before_ns), (q.after_ns, q.before_ns));
        assert_eq!(again.filter, "(host 10.0.0.1 or port 53)");
        // A tunnel term may not stand in parentheses: the chain of `and`s is passed as it is.
        let q = index::parse_query(
            "udp and vxlan 42 and host 10.0.0.1 and after @1700000000",
            0,
        )
        .unwrap();
        let again = index::parse_query(&query_text(&q), 0).unwrap();
        assert_eq!((again.filter, again.tunnel), (q.filter, q.tunnel));
    }
}
