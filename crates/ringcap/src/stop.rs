//! Stop on SIGINT/SIGTERM: handlers only set flags; the capture loops poll them between blocks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Flags raised by signals.
#[derive(Clone)]
pub struct StopFlags {
    /// SIGINT or SIGTERM: finish, flush, summarise.
    pub stop: Arc<AtomicBool>,
}

impl StopFlags {
    /// Install the handlers. A second SIGINT/SIGTERM while stopping kills the process the default way,
    /// so a stuck flush can still be interrupted.
    pub fn install() -> std::io::Result<StopFlags> {
        let stop = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&stop))?;
            signal_hook::flag::register(sig, Arc::clone(&stop))?;
        }
        Ok(StopFlags { stop })
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
