//! Packets found elsewhere: a sensor's `ringcap serve` answers the same query and sends its
//! matching packets as a capture-file stream in time order. A feed joins a plan like a file: the
//! merge takes its packets in time order with the files' (bounded channels, as for files), and
//! its report names it when it was down, refused or cut mid-stream. Its packets are not filtered
//! again: the sensor compiled the same filter for its own files.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use store::{CaptureReader, FileLink};

use super::worker::Out;
use super::{FileError, FileReport, How};

/// A source of already-matching packets: one stream per query.
pub trait Feed: Send + Sync {
    /// What reports call it (`https://sensor1:8443`).
    fn name(&self) -> &Path;
    /// Asks for the packets: a capture file's bytes (pcap or pcapng), in time order. Called once,
    /// by the survey. An error says why the source gave nothing (down, refused, not authorised).
    fn open(&self) -> io::Result<Box<dyn Read + Send>>;
}

/// A feed in a plan: its stream once the survey opened it (the header read), for the worker.
pub(super) struct FeedTarget {
    pub(super) feed: Arc<dyn Feed>,
    pub(super) name: PathBuf,
    opened: Mutex<Option<Result<CaptureReader, FileError>>>,
    received: Arc<AtomicU64>,
}

/// Largest record a feed may send (a pcap record of the largest snaplen, with room).
const FEED_RECORD_MAX: usize = 1 << 20;

impl FeedTarget {
    pub(super) fn new(feed: Arc<dyn Feed>) -> FeedTarget {
        FeedTarget {
            name: feed.name().to_path_buf(),
            feed,
            opened: Mutex::new(None),
            received: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Sends the query and reads the stream's header: the link its packets have. The merge takes
    /// a feed first (time 0): its first packet may come before any file's.
    pub(super) fn survey(&self) -> (u64, Option<FileLink>) {
        let opened = self.feed.open().map_err(|e| FileError::Io {
            path: self.name.clone(),
            source: e,
        });
        let reader = opened.and_then(|body| {
            let counted = Counted {
                inner: body,
                bytes: self.received.clone(),
            };
            CaptureReader::strict_from_reader(Box::new(counted), &self.name, FEED_RECORD_MAX)
                .map_err(FileError::Read)
        });
        let link = reader.as_ref().ok().and_then(|r| r.link());
        *self.opened.lock().unwrap_or_else(|e| e.into_inner()) = Some(reader);
        (0, link)
    }

    /// Passes the stream's packets to the merge (within the window; not filtered again).
    pub(super) fn run(&self, out: &mut Out<'_>) -> FileReport {
        let mut r = FileReport {
            path: self.name.clone(),
            how: How::Feed,
            ..Default::default()
        };
        let opened = self.opened.lock().unwrap_or_else(|e| e.into_inner()).take();
        let result = match opened {
            None => Err(FileError::Io {
                path: self.name.clone(),
                source: io::Error::other("the feed was not opened"),
            }),
            Some(Err(e)) => Err(e),
            Some(Ok(mut reader)) => (|| {
                while let Some(p) = reader.next_packet() {
                    out.offer_unfiltered(&mut r, &p?)?;
                }
                // A stream cut inside a record ends the reader with an issue, not an error.
                if let Some(first) = reader.issues().iter().find(|i| i.corrupt) {
                    return Err(FileError::Io {
                        path: self.name.clone(),
                        source: io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!("the stream was cut ({})", first.reason),
                        ),
                    });
                }
                Ok(())
            })(),
        };
        let flushed = out.flush();
        r.bytes_read = self.received.load(Relaxed);
        if let Err(e) = result.and(flushed) {
            if !matches!(e, FileError::Stopped) {
                r.error = Some(e);
            }
        }
        r
    }
}

/// Counts the bytes a feed sent.
struct Counted {
    inner: Box<dyn Read + Send>,
    bytes: Arc<AtomicU64>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.fetch_add(n as u64, Relaxed);
        Ok(n)
    }
}
