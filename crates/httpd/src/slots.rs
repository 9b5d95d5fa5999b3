//! A fixed number of places (connections open, queries running): taken without waiting, given
//! back when the guard is dropped.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// At most `max` holders at once.
#[derive(Clone, Debug)]
pub struct Slots {
    taken: Arc<AtomicUsize>,
    max: usize,
}

/// One place, held until dropped.
#[derive(Debug)]
pub struct Slot(Arc<AtomicUsize>);

impl Slots {
    pub fn new(max: usize) -> Slots {
        Slots {
            taken: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A place, or None when all are taken.
    pub fn try_take(&self) -> Option<Slot> {
        if self.taken.fetch_add(1, SeqCst) >= self.max {
            self.taken.fetch_sub(1, SeqCst);
            return None;
        }
        Some(Slot(self.taken.clone()))
    }

    pub fn max(&self) -> usize {
        self.max
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_given_back_when_dropped() {
        let s = Slots::new(2);
        let a = s.try_take().unwrap();
        let _b = s.try_take().unwrap();
        assert!(s.try_take().is_none());
        drop(a);
        assert!(s.try_take().is_some());
    }
}
