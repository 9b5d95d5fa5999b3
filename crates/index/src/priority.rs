//! How a query yields to a running capture: its workers' CPU and I/O priority.

/// The CPU and I/O priority of a query's workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// nice 10, lowest best-effort I/O: below a capture, yet an interactive query still finishes.
    Low,
    /// SCHED_IDLE and idle I/O: only what nothing else wants (a capture is writing to the store).
    Idle,
}

impl Priority {
    /// `Idle` when a capture is writing one of `files` (a hidden `.NAME.partial`), else `Low`.
    pub fn for_files(files: &[std::path::PathBuf]) -> Priority {
        if files.iter().any(|f| crate::is_partial_capture(f)) {
            Priority::Idle
        } else {
            Priority::Low
        }
    }

    /// Applies to the calling thread (and the threads it starts).
    pub fn apply(self) {
        match self {
            Priority::Low => sys::low_priority(),
            Priority::Idle => sys::sched_idle(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query yields to a capture writing to the store: idle when a `.NAME.partial` capture file is
    /// among the files, and SCHED_IDLE is what the kernel then reports for the thread.
    #[test]
    fn a_capture_writing_to_the_store_makes_the_query_idle() {
        let done = [std::path::PathBuf::from("/s/cap-1.pcap.zst")];
        assert_eq!(Priority::for_files(&done), Priority::Low);
        let writing = [
            std::path::PathBuf::from("/s/cap-1.pcap.zst"),
            std::path::PathBuf::from("/s/.cap-2.pcap.zst.partial"),
        ];
        assert_eq!(Priority::for_files(&writing), Priority::Idle);
        let policy = std::thread::spawn(|| {
            Priority::Idle.apply();
            // SAFETY: no arguments; the calling thread.
            unsafe { libc::sched_getscheduler(0) }
        })
        .join()
        .unwrap();
        assert_eq!(policy, libc::SCHED_IDLE);
    }
}
