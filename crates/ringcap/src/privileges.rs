//! `-Z USER` and the capabilities a command keeps once its sockets are open (capture, serve).

use anyhow::anyhow;

use crate::Fatal;

/// The user of `-Z NAME`, checked before anything is opened.
pub fn unprivileged_user(name: &str) -> Result<sys::User, Fatal> {
    let u = sys::User::lookup(name).map_err(|e| {
        Fatal::usage(anyhow!(
            "-Z {name}: {e} (give an existing user, e.g. -Z nobody)"
        ))
    })?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(Fatal::usage(anyhow!(
            "-Z {name} needs ringcap to run as root (it is running as uid {euid})"
        )));
    }
    Ok(u)
}

/// `--group NAME`: the files written from now on are readable by that group (0640). Checked before
/// anything is written: the process must be root (with `-Z USER`, USER is given the group) or a member.
pub fn share_files_with_group(name: &str, switching_to: Option<&sys::User>) -> Result<(), Fatal> {
    let gid = sys::group_id(name).map_err(|e| {
        Fatal::usage(anyhow!(
            "--group {name}: {e} (give an existing group, e.g. one made with `groupadd pcap-readers`)"
        ))
    })?;
    if switching_to.is_none() && !sys::may_use_group(gid) {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        return Err(Fatal::usage(anyhow!(
            "--group {name}: uid {euid} is not a member of that group, so it cannot give its files that group \
             (add it: `usermod -aG {name} USER`, then log in again; or run as root)"
        )));
    }
    sys::share_files_with_group(gid, name).map_err(|e| Fatal::usage(anyhow!("--group {name}: {e}")))
}

/// `-Z USER`: become USER, with no capabilities; otherwise keep only `keep` of the capabilities held
/// (capture: CAP_DAC_OVERRIDE to write files; serve: CAP_DAC_READ_SEARCH to read them).
pub fn relinquish_privileges(user: Option<&sys::User>, keep: &[u32]) -> Result<(), Fatal> {
    if let Some(u) = user {
        sys::switch_user(u)
            .map_err(|e| Fatal::runtime(anyhow!("-Z {}: cannot become that user: {e}", u.name)))?;
    }
    if user.is_none() {
        // Root without -Z keeps no CAP_CHOWN: a member of the group it can still give its files
        // the group as their owner. Best effort: where joining is not allowed (a user namespace
        // with setgroups denied) the output's start-up check says what fails, for which file.
        let _ = sys::join_file_group();
    }
    let keep: &[u32] = if user.is_some() { &[] } else { keep };
    sys::keep_only_capabilities(keep)
        .map_err(|e| Fatal::runtime(anyhow!("cannot give up capabilities: {e}")))
}
