//! The one error type of the header views.

use core::fmt;

/// Why a buffer could not be viewed as a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer ends before the header does (`need` bytes, `have` bytes).
    Truncated {
        /// Which header was being read.
        header: &'static str,
        /// Bytes the header needs.
        need: usize,
        /// Bytes the buffer has.
        have: usize,
    },
    /// A field holds a value the header cannot have.
    Malformed {
        /// Which header was being read.
        header: &'static str,
        /// What is wrong with it.
        what: &'static str,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated { header, need, have } => write!(
                f,
                "{header} header truncated: needs {need} bytes, buffer has {have} \
                 (packet cut by the snap length, or not a {header} packet)"
            ),
            Error::Malformed { header, what } => {
                write!(f, "malformed {header} header: {what}")
            }
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

/// `Ok(())` when `have >= need`, else `Error::Truncated`.
#[inline]
pub(crate) fn need(header: &'static str, need: usize, have: usize) -> Result<()> {
    if have >= need {
        Ok(())
    } else {
        Err(Error::Truncated { header, need, have })
    }
}
