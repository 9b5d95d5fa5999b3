//! Files that hold a secret (the records' HMAC key, a TLS private key): refused when group or others
//! may read them, as ssh refuses such a private key, so a leaked-by-mode secret is noticed at once.

use std::fmt;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why a secret file was not read.
#[derive(Debug)]
pub enum SecretFileError {
    /// It could not be opened or read.
    Read { path: PathBuf, source: io::Error },
    /// Group or others may read it.
    NotPrivate { path: PathBuf, mode: u32 },
}

impl fmt::Display for SecretFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretFileError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            SecretFileError::NotPrivate { path, mode } => write!(
                f,
                "key file {p} is readable by group or others (mode {mode:04o}): run chmod 600 {p}",
                p = path.display()
            ),
        }
    }
}

// Display says everything (the io error too), so no source(): chains would print it twice.
impl std::error::Error for SecretFileError {}

/// Reads the whole of a file holding a secret, unless group or others may read it (any of the
/// mode bits 077: 0600 and 0400 pass).
pub fn read_private_file(path: &Path) -> Result<Vec<u8>, SecretFileError> {
    let read_err = |source| SecretFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(read_err)?;
    // The mode of the file opened, not of a name that could change in between.
    let mode = file.metadata().map_err(read_err)?.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SecretFileError::NotPrivate {
            path: path.to_path_buf(),
            mode,
        });
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(read_err)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_readable_by_others_is_refused_with_the_fix() {
        let dir = std::env::temp_dir().join(format!("sys-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("k");
        std::fs::write(&p, b"secret").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = read_private_file(&p).unwrap_err();
        assert!(e.to_string().contains("mode 0640): run chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_private_file(&p).unwrap(), b"secret");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
