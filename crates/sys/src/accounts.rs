//! Names to ids: one entry of the password or group database, read with the reentrant libc calls.

use std::ffi::CString;
use std::io;

/// The reentrant lookups by name: `getpwnam_r` (entry `libc::passwd`) and `getgrnam_r` (`libc::group`).
pub(crate) type LookupFn<E> = unsafe extern "C" fn(
    *const libc::c_char,
    *mut E,
    *mut libc::c_char,
    libc::size_t,
    *mut *mut E,
) -> libc::c_int;

/// Looks `name` up with `lookup` (a buffer of `buf_len` bytes for its strings) and gives the entry to
/// `read` while that buffer lives. Unknown: `ErrorKind::NotFound`, "no {what} {name:?}".
///
/// # Safety
/// `E` must be a plain C struct for which all-zero bytes are a valid value (`passwd`, `group`), and
/// `lookup` must be the `*_r` call that fills it.
pub(crate) unsafe fn lookup_entry<E, T>(
    name: &str,
    what: &str,
    buf_len: usize,
    lookup: LookupFn<E>,
    read: impl FnOnce(&E) -> T,
) -> io::Result<T> {
    let not_found = || io::Error::new(io::ErrorKind::NotFound, format!("no {what} {name:?}"));
    let cname = CString::new(name).map_err(|_| not_found())?;
    let mut buf = vec![0 as libc::c_char; buf_len];
    // SAFETY: a zeroed entry is valid (the caller's promise); buf outlives the call and `read`.
    let mut entry: E = std::mem::zeroed();
    let mut found: *mut E = std::ptr::null_mut();
    let r = lookup(
        cname.as_ptr(),
        &mut entry,
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
    Ok(read(&entry))
}
