//! Who may read the files ringcap writes: the owner only (0600), or the owner and one group (0640,
//! `--group`), for analysts who read the store without root. One process-wide setting, like the umask,
//! so every writer (capture files, indexes, spools, Parquet) creates its files the same way.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::OnceLock;

static GROUP: OnceLock<(u32, String)> = OnceLock::new();

/// Files created from now on are readable by group `gid` (mode 0640, group set with fchown); `name`
/// is how messages call it. Set once, before any file is written; a second call with another group
/// is refused.
pub fn share_files_with_group(gid: u32, name: &str) -> io::Result<()> {
    let set = GROUP.get_or_init(|| (gid, name.to_string())).0;
    if set != gid {
        return Err(io::Error::other(format!(
            "files are already shared with group {set}"
        )));
    }
    Ok(())
}

/// The group files are shared with, if any.
pub fn file_group() -> Option<u32> {
    GROUP.get().map(|g| g.0)
}

/// The mode of a new data file: 0600, or 0640 with a group.
pub fn data_file_mode() -> u32 {
    if GROUP.get().is_some() {
        0o640
    } else {
        0o600
    }
}

/// Makes this process a member of the shared group (one more supplementary group), so that as the
/// owner of its files it can give them that group without CAP_CHOWN: root keeps only
/// CAP_DAC_OVERRIDE once its sockets are open, and the kernel lets an owner without CAP_CHOWN
/// chgrp only to its own groups (root without -Z got EPERM on its first file). Needs CAP_SETGID:
/// call it before giving that up. glibc applies setgroups to every thread. Nothing to do without a
/// shared group or when it is a supplementary group already.
pub fn join_file_group() -> io::Result<()> {
    let Some(shared) = file_group() else {
        return Ok(());
    };
    // SAFETY: getgroups/setgroups with buffers as long as we say. The effective group is not
    // enough: -Z changes it afterwards.
    unsafe {
        let n = libc::getgroups(0, std::ptr::null_mut()).max(0) as usize;
        let mut groups = vec![0 as libc::gid_t; n + 1];
        let n = libc::getgroups(n as libc::c_int, groups.as_mut_ptr());
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        groups.truncate(n as usize);
        if !groups.contains(&shared) {
            groups.push(shared);
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Gives a regular file just created by this process the shared group and then mode 0640, if
/// there is a group. In that order: until the group is ours, the file stays 0600 (it was created
/// so), never readable by the creator's own group; and the mode is set explicitly, not left to the
/// umask (a umask of 077 made 0640 into 0600, unreadable by the group). Anything but a regular file
/// (`-w /dev/null`, a FIFO) is left as it is: its group is not ours to change. The error names the
/// file, the group and what to do.
pub fn apply_file_group(file: &File, path: &Path) -> io::Result<()> {
    let Some((gid, name)) = GROUP.get() else {
        return Ok(());
    };
    if !file.metadata()?.file_type().is_file() {
        return Ok(());
    }
    let fd = file.as_raw_fd();
    // SAFETY: fchown/fchmod on a descriptor we own; -1 leaves the owner as it is.
    let r = unsafe {
        if libc::fchown(fd, u32::MAX, *gid) != 0 || libc::fchmod(fd, 0o640) != 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    r.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot give {} to group {name} (gid {gid}): {e}; ringcap must run as root or as a \
                 member of {name} (`usermod -aG {name} USER`; with -Z USER, USER is made a member), \
                 on a file system that keeps group owners (and, in a user namespace, with gid {gid} \
                 mapped), or leave --group out",
                path.display()
            ),
        )
    })
}

/// Creates a new data file: mode 0600, never through a symlink (O_NOFOLLOW), never over an
/// existing name (O_EXCL), then given the shared group and mode 0640 if there is one. A file that
/// cannot be given the group is removed again: no empty file is left behind.
pub fn create_data_file(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    if let Err(e) = apply_file_group(&f, path) {
        drop(f);
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(f)
}

/// A group's id from its name or number (getgrnam_r). Unknown: `ErrorKind::NotFound`.
pub fn group_id(name: &str) -> io::Result<u32> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(n);
    }
    // SAFETY: a zeroed group is valid and getgrnam_r fills one; only the gid is read.
    unsafe {
        crate::accounts::lookup_entry(name, "group", 64 * 1024, libc::getgrnam_r, |g| g.gr_gid)
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
