//! Where the archive goes (`s3://bucket/prefix`, endpoint, addressing) and the credentials, taken
//! the way AWS tools take them: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else
//! the profile (`--profile`, AWS_PROFILE, "default") of AWS_SHARED_CREDENTIALS_FILE or
//! ~/.aws/credentials. Secrets are never printed: [`Credentials`] has no Debug.

use std::path::PathBuf;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{BackoffConfig, ClientOptions, RetryConfig};

use crate::error::ArchiveError;

/// `s3://bucket/prefix` parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dest {
    pub bucket: String,
    /// Without leading or trailing '/'; may be empty.
    pub prefix: String,
}

impl Dest {
    pub fn parse(url: &str) -> Result<Dest, ArchiveError> {
        let rest = url.strip_prefix("s3://").ok_or_else(|| {
            ArchiveError::Usage(format!("`{url}`: the archive is named s3://BUCKET/PREFIX"))
        })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(ArchiveError::Usage(format!("`{url}`: no bucket name")));
        }
        Ok(Dest {
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
        })
    }

    /// `s3://bucket/prefix` again (the manifest's `dest`).
    pub fn url(&self) -> String {
        match self.prefix.as_str() {
            "" => format!("s3://{}", self.bucket),
            p => format!("s3://{}/{p}", self.bucket),
        }
    }
}

/// How to reach the object store.
#[derive(Clone, Debug, Default)]
pub struct Endpoint {
    /// `http(s)://host:port` of an S3-compatible server; None: AWS (by region).
    pub url: Option<String>,
    /// Some(true): path-style (`host/bucket/key`); Some(false): virtual-host (`bucket.host/key`);
    /// None: path-style for a given endpoint (what S3-compatible servers all take), virtual-host for AWS.
    pub path_style: Option<bool>,
    pub region: Option<String>,
    /// `--profile`, else AWS_PROFILE, else "default".
    pub profile: Option<String>,
    /// Extra CA certificates (PEM) to trust for an https endpoint with a private CA.
    pub ca_file: Option<PathBuf>,
}

/// Access key, secret and session token. No Debug, no Display: nothing prints a secret.
pub struct Credentials {
    key_id: String,
    secret: String,
    token: Option<String>,
    /// Where they came from, for messages ("environment", "profile x of FILE").
    pub source: String,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn home() -> Option<PathBuf> {
    env("HOME").map(PathBuf::from)
}

impl Credentials {
    /// The environment first, then the profile's section of the shared credentials file.
    pub fn find(profile: Option<&str>) -> Result<Credentials, ArchiveError> {
        if profile.is_none() {
            if let (Some(key_id), Some(secret)) =
                (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
            {
                return Ok(Credentials {
                    key_id,
                    secret,
                    token: env("AWS_SESSION_TOKEN"),
                    source: "the environment (AWS_ACCESS_KEY_ID)".into(),
                });
            }
        }
        let profile = profile
            .map(str::to_string)
            .or_else(|| env("AWS_PROFILE"))
            .unwrap_or_else(|| "default".into());
        let file = env("AWS_SHARED_CREDENTIALS_FILE")
            .map(PathBuf::from)
            .or_else(|| home().map(|h| h.join(".aws/credentials")));
        let missing = || {
            ArchiveError::Usage(format!(
                "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or put profile \
                 [{profile}] in {} (aws_access_key_id, aws_secret_access_key)",
                file.as_ref()
                    .map_or("~/.aws/credentials".into(), |f| f.display().to_string())
            ))
        };
        let Some(path) = file.clone().filter(|f| f.exists()) else {
            return Err(missing());
        };
        let ini = ini::Ini::load_from_file(&path)
            .map_err(|e| ArchiveError::Usage(format!("cannot read {}: {e}", path.display())))?;
        let Some(sec) = ini.section(Some(profile.as_str())) else {
            return Err(missing());
        };
        match (
            sec.get("aws_access_key_id"),
            sec.get("aws_secret_access_key"),
        ) {
            (Some(k), Some(s)) => Ok(Credentials {
                key_id: k.trim().to_string(),
                secret: s.trim().to_string(),
                token: sec.get("aws_session_token").map(|t| t.trim().to_string()),
                source: format!("profile [{profile}] of {}", path.display()),
            }),
            _ => Err(missing()),
        }
    }
}

/// The region: `--region`, AWS_REGION, AWS_DEFAULT_REGION, the profile's in ~/.aws/config, us-east-1.
fn region(ep: &Endpoint) -> String {
    if let Some(r) = ep.region.clone().or_else(|| env("AWS_REGION")) {
        return r;
    }
    if let Some(r) = env("AWS_DEFAULT_REGION") {
        return r;
    }
    let profile = ep
        .profile
        .clone()
        .or_else(|| env("AWS_PROFILE"))
        .unwrap_or_else(|| "default".into());
    let section = match profile.as_str() {
        "default" => "default".to_string(),
        p => format!("profile {p}"),
    };
    env("AWS_CONFIG_FILE")
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(".aws/config")))
        .and_then(|f| ini::Ini::load_from_file(f).ok())
        .and_then(|i| i.get_from(Some(section), "region").map(str::to_string))
        .unwrap_or_else(|| "us-east-1".into())
}

/// The S3 client for `dest`. Retries are few and short (a daemon rerun resumes; a person waits
/// for an answer): 3 retries within 20 s, connect timeout 5 s.
pub fn client(dest: &Dest, ep: &Endpoint, creds: &Credentials) -> Result<AmazonS3, ArchiveError> {
    // reqwest's rustls has no bundled provider here: ring, as the rest of the workspace.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut opts = ClientOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(120));
    if let Some(ca) = &ep.ca_file {
        let pem = std::fs::read(ca)
            .map_err(|e| ArchiveError::Usage(format!("cannot read {}: {e}", ca.display())))?;
        let certs = object_store::Certificate::from_pem_bundle(&pem)
            .map_err(|e| ArchiveError::Usage(format!("{}: {e}", ca.display())))?;
        for c in certs {
            opts = opts.with_root_certificate(c);
        }
    }
    let path_style = ep.path_style.unwrap_or(ep.url.is_some());
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(&dest.bucket)
        .with_region(region(ep))
        .with_access_key_id(&creds.key_id)
        .with_secret_access_key(&creds.secret)
        .with_virtual_hosted_style_request(!path_style)
        // Retention deletes with one DELETE per object, the core API every S3 server has (s3proxy
        // answers 501 to object_store's bulk POST ?delete); a pass deletes few objects.
        .with_disable_bulk_delete(true)
        // Bodies are not hashed into the signature (UNSIGNED-PAYLOAD, as rclone's uploads): that
        // SHA-256 cost ringcap a pass over every byte and the server another to check it (s3proxy
        // took half of a 90 MB PUT's time), while what proves a copy is the MD5 ETag checked after
        // each upload (crate::upload), and TLS protects the bytes on the way.
        .with_unsigned_payload(true)
        .with_retry(RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: 3,
            retry_timeout: Duration::from_secs(20),
        });
    if let Some(t) = &creds.token {
        b = b.with_token(t);
    }
    if let Some(url) = &ep.url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ArchiveError::Usage(format!(
                "--endpoint `{url}`: write http://HOST:PORT or https://HOST:PORT"
            )));
        }
        // Virtual-host addressing with an endpoint: object_store wants the bucket in the host.
        let url = if path_style {
            url.clone()
        } else {
            let (scheme, host) = url.split_once("://").expect("checked");
            format!("{scheme}://{}.{host}", dest.bucket)
        };
        // Plain http only when the user names an http:// endpoint (a test server, a local proxy).
        opts = opts.with_allow_http(url.starts_with("http://"));
        b = b.with_endpoint(url);
    }
    b.with_client_options(opts)
        .build()
        .map_err(|e| ArchiveError::Usage(format!("object store client: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_parse() {
        let d = Dest::parse("s3://b/x/y/").unwrap();
        assert_eq!((d.bucket.as_str(), d.prefix.as_str()), ("b", "x/y"));
        assert_eq!(d.url(), "s3://b/x/y");
        assert_eq!(Dest::parse("s3://b").unwrap().prefix, "");
        assert!(Dest::parse("http://b/x").is_err());
        assert!(Dest::parse("s3:///x").is_err());
    }
}
