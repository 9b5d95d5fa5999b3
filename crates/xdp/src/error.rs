//! What can go wrong below the stack, each with what to do about it.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum XdpError {
    /// The interface does not exist in this network namespace.
    #[error("no interface named {0} here (`ip link` lists them)")]
    NoInterface(String),
    /// Root (or CAP_BPF/CAP_NET_ADMIN/CAP_NET_RAW) is missing.
    #[error("{0}")]
    Privileges(String),
    /// The driver or kernel cannot do what was asked.
    #[error("{0}")]
    Unsupported(String),
    /// Another XDP program holds the interface.
    #[error("{0}")]
    Busy(String),
    /// Loading, the maps, or the kernel refused the program.
    #[error("{0}")]
    Load(String),
    /// An AF_XDP socket call failed.
    #[error("{what}: {err}")]
    Socket { what: String, err: std::io::Error },
    /// A setting is out of range.
    #[error("{0}")]
    Config(String),
}
