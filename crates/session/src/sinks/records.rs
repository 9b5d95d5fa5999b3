//! `--records`: TICKET header records built straight from the ring slots and handed to the probe's sender.

use std::time::Instant;

use capture::Batch;
use records::probe::{Batcher, Probe};
use wire::record::Record;
use wire::LinkType;

use crate::sink::{Lane, Sink, SinkReport, Totals};

/// The header-record probe as a sink: a batcher per capture thread, one sender.
pub struct RecordSink {
    probe: Probe,
    linktype: LinkType,
}

impl RecordSink {
    /// Records of frames of `linktype`, sent by `probe`.
    pub fn new(probe: Probe, linktype: LinkType) -> RecordSink {
        RecordSink { probe, linktype }
    }
}

struct RecordLane {
    batcher: Batcher,
    linktype: LinkType,
}

impl Sink for RecordSink {
    fn lane(&mut self) -> anyhow::Result<Box<dyn Lane>> {
        Ok(Box::new(RecordLane {
            batcher: self.probe.batcher(),
            linktype: self.linktype,
        }))
    }

    fn finish(self: Box<Self>, _: &Totals) -> (SinkReport, Option<anyhow::Error>) {
        // Every batcher has finished with its thread: the sender sends the rest and waits for acks.
        (SinkReport::Records(self.probe.finish()), None)
    }
}

impl Lane for RecordLane {
    fn batch(&mut self, batch: &Batch<'_>) {
        for p in batch.packets() {
            // Parsed in place, no copy; a tag the kernel stripped goes back into the record, as libpcap
            // puts it back into the pcap frame.
            let mut r = Record::from_frame(p.ts_ns, p.record_wire_len(), p.data, self.linktype);
            if let Some(v) = p.vlan {
                r.vlan = v.tci;
            }
            self.batcher.push(&r);
        }
    }

    fn tick(&mut self, now: Instant) {
        self.batcher.tick(now);
    }

    fn finish(self: Box<Self>) {
        self.batcher.finish();
    }
}
