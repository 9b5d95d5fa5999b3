//! Who may read the files ringcap writes: the owner only (0600), or the owner and one group (0640,
//! `--group`), for analysts who read the store without root. One process-wide setting, like the umask,
//! so every writer (capture files, indexes, spools, Parquet) creates its files the same way.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::OnceLock;

static GROUP: OnceLock<u32> = OnceLock::new();

/// Files created from now on are readable by group `gid` (mode 0640, group set with fchown).
/// Set once, before any file is written; a second call with another group is refused.
pub fn share_files_with_group(gid: u32) -> io::Result<()> {
    let set = *GROUP.get_or_init(|| gid);
    if set != gid {
        return Err(io::Error::other(format!(
            "files are already shared with group {set}"
        )));
    }
    Ok(())
}

/// The group files are shared with, if any.
pub fn file_group() -> Option<u32> {
    GROUP.get().copied()
}

/// The mode of a new data file: 0600, or 0640 with a group.
pub fn data_file_mode() -> u32 {
    if GROUP.get().is_some() {
        0o640
    } else {
        0o600
    }
}

/// Gives a file just created the shared group, if there is one. The owner may do this for any group it
/// belongs to (after `-Z USER`, the group is added to USER's groups), root for any.
pub fn apply_file_group(file: &File) -> io::Result<()> {
    if let Some(gid) = file_group() {
        // SAFETY: fchown on a descriptor we own; -1 leaves the owner as it is.
        if unsafe { libc::fchown(file.as_raw_fd(), u32::MAX, gid) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Creates a new data file: [`data_file_mode`], never through a symlink (O_NOFOLLOW), never over an
/// existing name (O_EXCL), with the shared group applied.
pub fn create_data_file(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(data_file_mode())
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    apply_file_group(&f)?;
    Ok(f)
}

/// A group's id from its name or number (getgrnam_r). Unknown: `ErrorKind::NotFound`.
pub fn group_id(name: &str) -> io::Result<u32> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(n);
    }
    let not_found = || io::Error::new(io::ErrorKind::NotFound, format!("no group {name:?}"));
    let cname = CString::new(name).map_err(|_| not_found())?;
    let mut buf = vec![0 as libc::c_char; 64 * 1024];
    // SAFETY: a zeroed group is valid; buf outlives the call; only the gid is read from the result.
    unsafe {
        let mut gr: libc::group = std::mem::zeroed();
        let mut found: *mut libc::group = std::ptr::null_mut();
        let r = libc::getgrnam_r(
            cname.as_ptr(),
            &mut gr,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        );
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        if found.is_null() {
            return Err(not_found());
        }
        Ok(gr.gr_gid)
    }
}

/// Whether this process may give its files group `gid`: root (or CAP_CHOWN), or the group is its own
/// or one of its supplementary groups.
pub fn may_use_group(gid: u32) -> bool {
    // SAFETY: getegid/getgroups/geteuid have no preconditions; the buffer is as long as we say.
    unsafe {
        if libc::geteuid() == 0 || libc::getegid() == gid {
            return true;
        }
        let n = libc::getgroups(0, std::ptr::null_mut());
        if n <= 0 {
            return false;
        }
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let n = libc::getgroups(n, groups.as_mut_ptr());
        n > 0 && groups[..n as usize].contains(&gid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_resolve_by_name_and_number() {
        assert_eq!(group_id("root").unwrap(), 0);
        assert_eq!(group_id("4").unwrap(), 4);
        assert_eq!(
            group_id("no-such-group-ringcap").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
