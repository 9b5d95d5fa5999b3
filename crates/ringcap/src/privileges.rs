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

/// `-Z USER`: become USER, with no capabilities; otherwise keep only `keep` of the capabilities held
/// (capture: CAP_DAC_OVERRIDE to write files; serve: CAP_DAC_READ_SEARCH to read them).
pub fn relinquish_privileges(user: Option<&sys::User>, keep: &[u32]) -> Result<(), Fatal> {
    if let Some(u) = user {
        sys::switch_user(u)
            .map_err(|e| Fatal::runtime(anyhow!("-Z {}: cannot become that user: {e}", u.name)))?;
    }
    let keep: &[u32] = if user.is_some() { &[] } else { keep };
    sys::keep_only_capabilities(keep)
        .map_err(|e| Fatal::runtime(anyhow!("cannot give up capabilities: {e}")))
}
