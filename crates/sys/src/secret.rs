//! Files that hold a secret (the records' HMAC keys, TLS private keys) and directories of them
//! (`--key-dir`), checked as ssh checks private keys and `~/.ssh`: a key must be a regular file
//! owned by root or by the user ringcap runs as, readable by nobody else; a key directory must be
//! owned by one of them too and writable by nobody else (else anyone could add a key, or swap
//! one). So a secret leaked by its mode, or planted by someone else, is noticed at once.
//!
//! Every check is made on the file as opened (fstat), never on a name that could change in
//! between; files are opened with O_NONBLOCK, so a FIFO or a device given as a key is refused
//! instead of hanging start-up in open().

use std::ffi::CString;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a secret file (or a directory of them) was not read.
#[derive(Debug)]
pub enum SecretFileError {
    /// It could not be opened or read.
    Read { path: PathBuf, source: io::Error },
    /// Group or others may read it.
    NotPrivate { path: PathBuf, mode: u32 },
    /// A FIFO, a device, a directory...: not a file holding a key.
    NotRegular { path: PathBuf, kind: &'static str },
    /// Owned by a user other than root and the one ringcap runs as.
    Owner { path: PathBuf, uid: u32, euid: u32 },
    /// A key directory that group or others may write.
    DirWritable { path: PathBuf, mode: u32 },
    /// A key directory owned by a user other than root and the one ringcap runs as.
    DirOwner { path: PathBuf, uid: u32, euid: u32 },
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
            SecretFileError::NotRegular { path, kind } => write!(
                f,
                "key file {} is {kind}, not a regular file: give the file that holds the key",
                path.display()
            ),
            SecretFileError::Owner { path, uid, euid } => write!(
                f,
                "key file {p} is owned by uid {uid}, not by root or by the user ringcap runs as \
                 (uid {euid}), so someone else could have written it: run chown {euid} {p} if the \
                 key is yours",
                p = path.display()
            ),
            SecretFileError::DirWritable { path, mode } => write!(
                f,
                "key directory {p} may be written by group or others (mode {mode:04o}), so anyone \
                 could add or swap a key: run chmod go-w {p}",
                p = path.display()
            ),
            SecretFileError::DirOwner { path, uid, euid } => write!(
                f,
                "key directory {p} is owned by uid {uid}, not by root or by the user ringcap runs \
                 as (uid {euid}), so its owner could add or swap a key: run chown {euid} {p} if it \
                 is yours",
                p = path.display()
            ),
        }
    }
}

// Display says everything (the io error too), so no source(): chains would print it twice.
impl std::error::Error for SecretFileError {}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// What a file that is not regular is, for messages.
fn kind_of(ft: std::fs::FileType) -> &'static str {
    if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Checks an opened secret file (its fstat, not its name) and reads the whole of it.
fn read_checked(mut file: File, path: &Path) -> Result<Vec<u8>, SecretFileError> {
    let read_err = |source| SecretFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.file_type().is_file() {
        return Err(SecretFileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
        });
    }
    let (uid, me) = (meta.uid(), euid());
    if uid != 0 && uid != me {
        return Err(SecretFileError::Owner {
            path: path.to_path_buf(),
            uid,
            euid: me,
        });
    }
    let mode = meta.mode() & 0o7777;
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

/// Flags of every secret open: O_NONBLOCK so a FIFO cannot hang open() (the check after it refuses
/// anything but a regular file, where the flag changes nothing), no controlling terminal.
const OPEN_FLAGS: i32 = libc::O_NONBLOCK | libc::O_NOCTTY;

/// Reads the whole of a file holding a secret: a regular file, owned by root or by the user ringcap
/// runs as, that group and others may not read (none of the mode bits 077: 0600 and 0400 pass).
pub fn read_private_file(path: &Path) -> Result<Vec<u8>, SecretFileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OPEN_FLAGS)
        .open(path)
        .map_err(|source| SecretFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    read_checked(file, path)
}

/// A directory of secret files (`--key-dir`), opened and checked once: owned by root or by the
/// user ringcap runs as, and writable by nobody else. Its files are opened relative to the
/// directory checked, never through its name again.
pub struct PrivateDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl PrivateDir {
    /// Opens and checks the directory.
    pub fn open(path: &Path) -> Result<PrivateDir, SecretFileError> {
        let read_err = |source| SecretFileError::Read {
            path: path.to_path_buf(),
            source,
        };
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | OPEN_FLAGS)
            .open(path)
            .map_err(read_err)?;
        let meta = dir.metadata().map_err(read_err)?;
        let (uid, me) = (meta.uid(), euid());
        if uid != 0 && uid != me {
            return Err(SecretFileError::DirOwner {
                path: path.to_path_buf(),
                uid,
                euid: me,
            });
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(SecretFileError::DirWritable {
                path: path.to_path_buf(),
                mode,
            });
        }
        Ok(PrivateDir {
            fd: dir.into(),
            path: path.to_path_buf(),
        })
    }

    /// The names in the directory (`.` and `..` left out), as listed through the descriptor
    /// checked.
    pub fn names(&self) -> Result<Vec<std::ffi::OsString>, SecretFileError> {
        let read_err = |source| SecretFileError::Read {
            path: self.path.clone(),
            source,
        };
        let mut names = Vec::new();
        let listing = Path::new("/proc/self/fd").join(self.fd.as_raw_fd().to_string());
        for e in std::fs::read_dir(listing).map_err(read_err)? {
            names.push(e.map_err(read_err)?.file_name());
        }
        names.sort();
        Ok(names)
    }

    /// The path of `name` in the directory, for messages.
    pub fn path_of(&self, name: &std::ffi::OsStr) -> PathBuf {
        self.path.join(name)
    }

    /// Reads the secret file `name` of the directory, checked as [`read_private_file`] checks one.
    pub fn read(&self, name: &std::ffi::OsStr) -> Result<Vec<u8>, SecretFileError> {
        let path = self.path_of(name);
        let read_err = |source| SecretFileError::Read {
            path: path.clone(),
            source,
        };
        let c = CString::new(name.as_bytes())
            .map_err(|_| read_err(io::Error::from(io::ErrorKind::InvalidInput)))?;
        // SAFETY: openat on a directory descriptor we own with a NUL-terminated name; the new
        // descriptor is owned by the File below.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC | OPEN_FLAGS,
            )
        };
        if fd < 0 {
            return Err(read_err(io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        let file = unsafe { File::from_raw_fd(fd) };
        read_checked(file, &path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sys-secret-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn chown(p: &Path, uid: u32) {
        let c = CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: chown of a path we made; -1 keeps the group.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), uid, u32::MAX) }, 0);
    }

    #[test]
    fn a_secret_readable_by_others_is_refused_with_the_fix() {
        let dir = scratch("mode");
        let p = dir.join("k");
        std::fs::write(&p, b"secret").unwrap();
        chmod(&p, 0o640);
        let e = read_private_file(&p).unwrap_err();
        assert!(e.to_string().contains("mode 0640): run chmod 600"), "{e}");
        chmod(&p, 0o600);
        assert_eq!(read_private_file(&p).unwrap(), b"secret");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A FIFO given as a key: open() would wait for a writer forever without O_NONBLOCK. Refused at
    /// once, from the descriptor's own type.
    #[test]
    fn a_fifo_given_as_a_key_is_refused_at_once_not_waited_on() {
        let dir = scratch("fifo");
        let p = dir.join("k");
        let c = CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let q = p.clone();
        std::thread::spawn(move || tx.send(read_private_file(&q).map_err(|e| e.to_string())));
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO as a key hung");
        let e = r.unwrap_err();
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Needs root (the suite runs as root: its testbeds need it) to give a file away.
    #[test]
    fn a_key_owned_by_another_user_is_refused_with_the_chown_to_run() {
        assert_eq!(euid(), 0, "the test suite runs as root");
        let dir = scratch("owner");
        let p = dir.join("k");
        std::fs::write(&p, b"secret").unwrap();
        chmod(&p, 0o600);
        chown(&p, 65534);
        let e = read_private_file(&p).unwrap_err().to_string();
        assert!(
            e.contains("owned by uid 65534") && e.contains("run chown 0 "),
            "{e}"
        );
        chown(&p, 0);
        assert_eq!(read_private_file(&p).unwrap(), b"secret");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_key_directory_others_may_write_or_own_is_refused() {
        assert_eq!(euid(), 0, "the test suite runs as root");
        let dir = scratch("dir");
        let keys = dir.join("keys");
        std::fs::create_dir(&keys).unwrap();
        std::fs::write(keys.join("17"), b"secret").unwrap();
        chmod(&keys.join("17"), 0o600);
        for mode in [0o777, 0o770, 0o1777] {
            chmod(&keys, mode);
            let e = PrivateDir::open(&keys).err().expect("refused").to_string();
            assert!(e.contains("run chmod go-w"), "{mode:o}: {e}");
        }
        chmod(&keys, 0o755);
        chown(&keys, 65534);
        let e = PrivateDir::open(&keys).err().expect("refused").to_string();
        assert!(e.contains("owned by uid 65534"), "{e}");
        chown(&keys, 0);
        let d = PrivateDir::open(&keys).unwrap();
        assert_eq!(d.names().unwrap(), vec![std::ffi::OsString::from("17")]);
        assert_eq!(d.read("17".as_ref()).unwrap(), b"secret");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
