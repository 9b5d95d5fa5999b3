//! Giving up root once the packet sockets are open (tcpdump's `-Z`): switch to an unprivileged user, or
//! keep the user but only the capabilities still needed. Parsing hostile packets and compressing them
//! should not run with the power to do anything else.

use std::ffi::{CStr, CString};
use std::io;

/// `CAP_DAC_OVERRIDE`: create and delete files in directories the user could not write otherwise.
pub const CAP_DAC_OVERRIDE: u32 = 1;
/// `CAP_DAC_READ_SEARCH`: read any file and search any directory (all a reader of the store needs).
pub const CAP_DAC_READ_SEARCH: u32 = 2;

/// A local user account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
}

impl User {
    /// Looks `name` up in the password database (getpwnam_r). Unknown: `ErrorKind::NotFound`.
    pub fn lookup(name: &str) -> io::Result<User> {
        // SAFETY: a zeroed passwd is valid and getpwnam_r fills one; its strings are copied out
        // while the lookup's buffer lives.
        unsafe {
            crate::accounts::lookup_entry(name, "user", 16 * 1024, libc::getpwnam_r, |pw| User {
                name: CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned(),
                uid: pw.pw_uid,
                gid: pw.pw_gid,
            })
        }
    }
}

/// Becomes `user` for good: its supplementary groups (plus the group files are shared with, see
/// [`crate::share_files_with_group`], so it can still give its files that group), group and user id
/// (real, effective and saved), in every thread of the process. Needs root; afterwards the process holds
/// no capabilities.
pub fn switch_user(user: &User) -> io::Result<()> {
    let name = CString::new(user.name.as_str())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain credential calls; glibc applies setgid/setuid/setgroups to every thread.
    unsafe {
        if libc::initgroups(name.as_ptr(), user.gid) != 0 {
            return Err(io::Error::last_os_error());
        }
        crate::join_file_group()?;
        if libc::setgid(user.gid) != 0 || libc::setuid(user.uid) != 0 {
            return Err(io::Error::last_os_error());
        }
        // Paranoia as in OpenSSH's permanently_set_uid: root must not be regainable.
        if user.uid != 0 && libc::setuid(0) == 0 {
            return Err(io::Error::other("could regain root after switching user"));
        }
    }
    Ok(())
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;

/// Keeps only the capabilities in `keep` (of those the calling thread has) and makes sure no exec can
/// gain new ones (no ambient or inheritable set, PR_SET_NO_NEW_PRIVS). Capabilities are per thread: call
/// this before starting threads.
pub fn keep_only_capabilities(keep: &[u32]) -> io::Result<()> {
    let mut mask = [0u32; 2];
    for &c in keep {
        mask[(c / 32) as usize] |= 1 << (c % 32);
    }
    let mut hdr = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget/capset with a v3 header and two data words, as the kernel expects; prctl with
    // integer arguments.
    unsafe {
        if libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        for (d, m) in data.iter_mut().zip(mask) {
            d.permitted &= m;
            d.effective = d.permitted;
            d.inheritable = 0;
        }
        if libc::syscall(libc::SYS_capset, &mut hdr, data.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        // Ambient capabilities would survive an exec; older kernels lack them (EINVAL): nothing to clear.
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
            && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
        {
            return Err(io::Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The calling thread's effective capabilities as a bit mask (bit N = capability N).
pub fn effective_capabilities() -> io::Result<u64> {
    let mut hdr = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: as in keep_only_capabilities.
    if unsafe { libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from(data[0].effective) | u64::from(data[1].effective) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_users_up_as_getent_does() {
        let out = std::process::Command::new("getent")
            .args(["passwd", "nobody"])
            .output()
            .unwrap();
        let line = String::from_utf8(out.stdout).unwrap();
        let f: Vec<&str> = line.trim().split(':').collect();
        let u = User::lookup("nobody").unwrap();
        assert_eq!(
            (u.uid.to_string(), u.gid.to_string()),
            (f[2].into(), f[3].into())
        );
        let e = User::lookup("no-such-user-ringcap").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    /// In a thread of its own (capabilities are per thread), keep one capability and check the rest is
    /// gone, as /proc/thread-self/status shows it.
    #[test]
    fn keeps_only_the_named_capabilities() {
        std::thread::spawn(|| {
            keep_only_capabilities(&[CAP_DAC_OVERRIDE]).unwrap();
            let eff = effective_capabilities().unwrap();
            assert_eq!(eff & !(1 << CAP_DAC_OVERRIDE), 0, "{eff:#x}");
            let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            let cap_eff = status
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
                .unwrap();
            assert_eq!(cap_eff, eff);
        })
        .join()
        .unwrap();
    }
}
