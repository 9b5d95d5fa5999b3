//! The fleet file: which sensors there are, where their `ringcap serve` listens, where their
//! files are archived, and the certificates to ask them with.
//!
//! ```toml
//! # Every sensor is asked with these (a sensor may give its own).
//! ca = "ca.pem"          # the CA that signed the sensors' server certificates
//! cert = "client.pem"    # this client's certificate, signed by the sensors' --client-ca
//! key = "client.key"     # its private key (chmod 600)
//!
//! [[sensor]]
//! name = "s1"
//! url = "https://sensor1.example:8443"
//! archive = "s3://pcap/site1"   # what `ringcap archive --to` was given (sensor=s1 below it)
//! ```
//! Relative paths are relative to the fleet file's directory.

use std::path::{Path, PathBuf};

/// Why a fleet file cannot be used; each says where and what to do.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {what}", path.display())]
    Invalid { path: PathBuf, what: String },
    #[error("sensor {sensor}: {source}")]
    Tls {
        sensor: String,
        source: httpd::TlsError,
    },
    #[error("sensor {sensor}: {what}")]
    Client { sensor: String, what: String },
}

/// The fleet file as written.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetFile {
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    #[serde(default)]
    sensor: Vec<SensorEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SensorEntry {
    name: String,
    url: String,
    archive: Option<String>,
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
}

/// One sensor: its `ringcap serve`, and its archive if it has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sensor {
    pub name: String,
    /// `https://HOST:PORT` (or `http://` to a loopback address), without a trailing slash.
    pub url: String,
    /// Its archive: `s3://BUCKET/PREFIX/sensor=NAME`.
    pub archive: Option<String>,
    /// CA, client certificate and key (all three for https).
    pub tls: Option<TlsFiles>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The sensors of a fleet file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fleet {
    pub sensors: Vec<Sensor>,
}

/// Largest fleet file read: names and URLs of thousands of sensors fit.
const MAX_FLEET_FILE: u64 = 4 << 20;

impl Fleet {
    /// Reads and checks a fleet file.
    pub fn load(path: &Path) -> Result<Fleet, FleetError> {
        use std::io::Read;
        let read_err = |source| FleetError::Read {
            path: path.to_path_buf(),
            source,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .map_err(read_err)?
            .take(MAX_FLEET_FILE)
            .read_to_string(&mut text)
            .map_err(read_err)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Fleet::parse(&text, dir).map_err(|what| FleetError::Invalid {
            path: path.to_path_buf(),
            what,
        })
    }

    /// Parses a fleet file's text; relative paths are taken from `dir`.
    pub fn parse(text: &str, dir: &Path) -> Result<Fleet, String> {
        let f: FleetFile = toml::from_str(text).map_err(|e| e.to_string())?;
        if f.sensor.is_empty() {
            return Err("no sensor in it: add [[sensor]] tables with a name and a url".into());
        }
        let at = |p: &PathBuf| dir.join(p);
        let mut sensors: Vec<Sensor> = Vec::new();
        for s in f.sensor {
            let name = s.name.trim().to_string();
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            {
                return Err(format!(
                    "sensor name `{}`: use letters, digits, '.', '_' and '-' (it is the archive's sensor=NAME)",
                    s.name
                ));
            }
            if sensors.iter().any(|o| o.name == name) {
                return Err(format!("sensor `{name}` is named twice"));
            }
            let url = s.url.trim().trim_end_matches('/').to_string();
            let https = url.starts_with("https://");
            if !https && !url.starts_with("http://") {
                return Err(format!(
                    "sensor `{name}`: url `{url}` must be https://HOST:PORT (or http:// to a loopback serve)"
                ));
            }
            let pick = |own: &Option<PathBuf>, all: &Option<PathBuf>| {
                own.as_ref().or(all.as_ref()).map(at)
            };
            let tls = match (pick(&s.ca, &f.ca), pick(&s.cert, &f.cert), pick(&s.key, &f.key)) {
                (Some(ca), Some(cert), Some(key)) => Some(TlsFiles { ca, cert, key }),
                _ if https => {
                    return Err(format!(
                        "sensor `{name}`: https needs ca, cert and key (at the top for every sensor, or in its table)"
                    ))
                }
                _ => None,
            };
            let archive = match s.archive {
                None => None,
                Some(a) if a.starts_with("s3://") => {
                    let a = a.trim_end_matches('/');
                    let part = format!("sensor={name}");
                    Some(if a.ends_with(&part) {
                        a.to_string()
                    } else {
                        format!("{a}/{part}")
                    })
                }
                Some(a) => {
                    return Err(format!(
                        "sensor `{name}`: archive `{a}` must be s3://BUCKET/PREFIX (what `ringcap archive --to` was given)"
                    ))
                }
            };
            sensors.push(Sensor {
                name,
                url,
                archive,
                tls,
            });
        }
        Ok(Fleet { sensors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_to_every_sensor_and_a_sensor_may_give_its_own() {
        let f = Fleet::parse(
            r#"
ca = "ca.pem"
cert = "c.pem"
key = "c.key"
[[sensor]]
name = "s1"
url = "https://10.0.0.1:8443/"
archive = "s3://pcap/site"
[[sensor]]
name = "s2"
url = "https://10.0.0.2:8443"
key = "/etc/ringcap/s2.key"
archive = "s3://pcap/site/sensor=s2"
"#,
            Path::new("/etc/fleet"),
        )
        .unwrap();
        assert_eq!(f.sensors[0].url, "https://10.0.0.1:8443");
        assert_eq!(
            f.sensors[0].archive.as_deref(),
            Some("s3://pcap/site/sensor=s1")
        );
        assert_eq!(
            f.sensors[1].archive.as_deref(),
            Some("s3://pcap/site/sensor=s2")
        );
        let t = f.sensors[1].tls.as_ref().unwrap();
        assert_eq!(t.ca, Path::new("/etc/fleet/ca.pem"));
        assert_eq!(t.key, Path::new("/etc/ringcap/s2.key"));
    }

    #[test]
    fn mistakes_are_said() {
        let bad = [
            ("", "no sensor"),
            ("[[sensor]]\nname = \"a b\"\nurl = \"http://127.0.0.1:1\"", "sensor name"),
            ("[[sensor]]\nname = \"a\"\nurl = \"ftp://x\"", "must be https"),
            ("[[sensor]]\nname = \"a\"\nurl = \"https://x:1\"", "https needs ca"),
            ("[[sensor]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n[[sensor]]\nname = \"a\"\nurl = \"http://127.0.0.1:2\"", "named twice"),
            ("[[sensor]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\nport = 3", "unknown field"),
        ];
        for (text, want) in bad {
            let e = Fleet::parse(text, Path::new(".")).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
