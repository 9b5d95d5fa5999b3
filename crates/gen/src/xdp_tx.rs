//! `gen --backend xdp`: an AF_XDP socket per thread, bound to transmit queue `thread`, its frames built once in
//! the UMEM by `prepare` and afterwards only rewritten where fields change (as the TX_RING backend does).
//!
//! On drivers without AF_XDP zero-copy (veth among them) the kernel sends in copy mode: it still builds an skb
//! per frame (xsk_generic_xmit), but skips the socket layer and the qdisc. BENCHMARKS.md ("Below the stack")
//! compares it with sendmmsg and trafgen.

use std::sync::atomic::{AtomicBool, Ordering};

use sys::Interface;
use xdp::{XskConfig, XskSocket};

use crate::error::GenError;
use crate::tx::{SendErrors, Tx};

/// UMEM frames per socket: enough to keep several batches in flight.
const FRAMES: u32 = 4096;

pub struct XdpTx {
    sock: XskSocket,
    batch: usize,
    max_frame: usize,
    current: u64,
    pending: Vec<(u64, u32)>,
}

impl XdpTx {
    /// A socket on transmit queue `queue` of `ifc`, sending `batch` frames per kick.
    pub fn new(
        ifc: &Interface,
        queue: u32,
        batch: usize,
        max_frame: usize,
    ) -> Result<XdpTx, GenError> {
        let cfg = XskConfig {
            frame_size: 4096,
            frames: FRAMES,
            ring_size: 2048,
            ..XskConfig::default()
        };
        if max_frame > cfg.frame_size as usize {
            return Err(GenError::Options(format!(
                "--backend xdp sends frames of at most {} bytes, and {} allows {max_frame}: lower the MTU or use \
                 --backend sendmmsg",
                cfg.frame_size, ifc.name
            )));
        }
        let sock = XskSocket::tx(ifc.index as u32, queue, &cfg).map_err(|e| GenError::Io {
            context: format!("--backend xdp on {} queue {queue}", ifc.name),
            source: std::io::Error::other(e.to_string()),
        })?;
        Ok(XdpTx {
            sock,
            batch: batch.clamp(1, 1024),
            max_frame,
            current: 0,
            pending: Vec::with_capacity(batch),
        })
    }

    /// Make the kernel send, and take back the frames it completed (it stops sending while the completion
    /// ring is full, so this must happen on every kick, not only when frames run out).
    fn kick(&mut self, errors: &mut SendErrors) -> Result<(), GenError> {
        self.sock.reap_completions();
        let sent = self.sock.tx_kick().map_err(|e| GenError::Io {
            context: "--backend xdp".into(),
            source: std::io::Error::other(e.to_string()),
        })?;
        if !sent {
            errors.enobufs += 1;
        }
        Ok(())
    }
}

impl Tx for XdpTx {
    fn capacity(&self) -> usize {
        self.batch
    }

    fn prepare(&mut self, f: &mut dyn FnMut(&mut [u8])) {
        let fs = u64::from(self.sock.frame_size());
        for i in 0..u64::from(FRAMES) {
            f(&mut self.sock.frame_mut(i * fs)[..self.max_frame]);
        }
    }

    fn pending(&self) -> usize {
        self.pending.len()
    }

    fn slot(
        &mut self,
        errors: &mut SendErrors,
        stop: &AtomicBool,
    ) -> Result<Option<&mut [u8]>, GenError> {
        let mut waited = false;
        loop {
            if let Some(addr) = self.sock.free_frame() {
                self.current = addr;
                let max = self.max_frame;
                return Ok(Some(&mut self.sock.frame_mut(addr)[..max]));
            }
            // Every frame is in flight: push the kernel on and wait for completions.
            if !waited {
                errors.ring_full += 1;
                waited = true;
            }
            self.kick(errors)?;
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            std::thread::yield_now();
        }
    }

    fn commit(&mut self, len: usize) {
        self.pending.push((self.current, len as u32));
    }

    fn flush(&mut self, errors: &mut SendErrors, stop: &AtomicBool) -> Result<usize, GenError> {
        let mut done = 0;
        while done < self.pending.len() {
            done += self.sock.tx_submit(&self.pending[done..]);
            self.kick(errors)?;
            if done < self.pending.len() {
                self.sock.reap_completions();
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
        // In copy mode the kernel sends a budget of frames per call: call until it took them all.
        while self.sock.tx_queued() > 0 && !stop.load(Ordering::Relaxed) {
            self.kick(errors)?;
        }
        self.pending.clear();
        Ok(done)
    }

    fn finish(&mut self, errors: &mut SendErrors) -> Result<(), GenError> {
        let deadline = sys::monotonic_ns() + 5_000_000_000;
        loop {
            self.kick(errors)?;
            self.sock.reap_completions();
            if self.sock.tx_queued() == 0 && self.sock.tx_in_flight() == 0 {
                return Ok(());
            }
            if sys::monotonic_ns() > deadline {
                return Err(GenError::Io {
                    context: "--backend xdp: frames still in flight 5 s after the last send".into(),
                    source: std::io::Error::from_raw_os_error(libc::ETIMEDOUT),
                });
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
}
