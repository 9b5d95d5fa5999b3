//! The stop signal: signal handlers and other threads only set a flag; capture loops poll it between blocks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A flag raised by SIGINT/SIGTERM, `--duration`, `-c`, a failed sink or a closed pipe.
#[derive(Clone, Default)]
pub struct Stop {
    /// Set once the capture should finish, flush and summarise.
    pub stop: Arc<AtomicBool>,
}

impl Stop {
    /// A flag no signal raises (tests, embedding).
    pub fn new() -> Stop {
        Stop::default()
    }

    /// A flag raised by SIGINT and SIGTERM. A second signal while stopping kills the process the default
    /// way, so a stuck flush can still be interrupted.
    pub fn install() -> std::io::Result<Stop> {
        let stop = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&stop))?;
            signal_hook::flag::register(sig, Arc::clone(&stop))?;
        }
        Ok(Stop { stop })
    }

    /// True once a stop was requested.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Ask every loop polling this flag to finish.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
