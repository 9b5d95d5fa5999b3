//! What went wrong, in words that say what to do, and the exit code each kind means.

use object_store::client::{HttpError, HttpErrorKind};

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The command or its configuration must change (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The object store answered but refused: credentials, bucket, permissions (exit 3).
    #[error("{0}")]
    Refused(String),
    /// The object store could not be reached (exit 4).
    #[error("{0}")]
    Unreachable(String),
    /// A local file could not be read, or the manifest written (exit 1).
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// Any other failure of the object store, or an upload that did not verify (exit 1).
    #[error("{0}")]
    Store(String),
}

impl ArchiveError {
    /// 1 runtime (rerun resumes), 2 usage, 3 refused by the store, 4 store unreachable.
    pub fn exit_code(&self) -> u8 {
        match self {
            ArchiveError::Usage(_) => 2,
            ArchiveError::Refused(_) => 3,
            ArchiveError::Unreachable(_) => 4,
            ArchiveError::Io { .. } | ArchiveError::Store(_) => 1,
        }
    }

    pub fn io(path: &std::path::Path, source: std::io::Error) -> ArchiveError {
        ArchiveError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// The whole chain of an error as one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// Whether a connection could not be made at all (refused, no route, DNS, TLS handshake).
fn cannot_connect(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(h) = c.downcast_ref::<HttpError>() {
            if matches!(h.kind(), HttpErrorKind::Connect | HttpErrorKind::Timeout) {
                return true;
            }
        }
        cur = c.source();
    }
    false
}

/// Turns an object store error while doing `what` at `endpoint` into a kind with a hint.
pub fn classify(e: object_store::Error, what: &str, endpoint: &str, bucket: &str) -> ArchiveError {
    let text = chain(&e);
    // S3 error codes are in the response body (object_store keeps it in the message).
    let has = |code: &str| text.contains(code);
    if has("InvalidAccessKeyId") || has("SignatureDoesNotMatch") || has("InvalidToken") {
        return ArchiveError::Refused(format!(
            "{what}: {endpoint} does not accept these credentials (wrong access key or secret): \
             check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the profile in ~/.aws/credentials"
        ));
    }
    if has("ExpiredToken") || has("RequestTimeTooSkewed") {
        return ArchiveError::Refused(format!(
            "{what}: {endpoint} refused the request as expired: renew AWS_SESSION_TOKEN, or set \
             this machine's clock (the store's reply: {text})"
        ));
    }
    if has("NoSuchBucket") {
        return ArchiveError::Refused(format!(
            "{what}: bucket `{bucket}` does not exist at {endpoint}: create it (e.g. `aws s3 mb \
             s3://{bucket}`) or fix the name in --to"
        ));
    }
    if has("AccessDenied") || matches!(e, object_store::Error::PermissionDenied { .. }) {
        return ArchiveError::Refused(format!(
            "{what}: {endpoint} denied access to bucket `{bucket}`: the credentials need \
             s3:PutObject, s3:GetObject and s3:ListBucket on it ({text})"
        ));
    }
    if matches!(e, object_store::Error::Unauthenticated { .. }) {
        return ArchiveError::Refused(format!(
            "{what}: {endpoint} did not accept the credentials: {text}"
        ));
    }
    if cannot_connect(&e) {
        return ArchiveError::Unreachable(format!(
            "{what}: cannot reach {endpoint}: is the object store running and the address (and \
             --endpoint, http vs https) right? Files not yet archived are kept; run again to \
             resume. ({text})"
        ));
    }
    ArchiveError::Store(format!("{what}: {text}"))
}
