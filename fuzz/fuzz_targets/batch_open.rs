//! records::batch: what a collector does with the bytes a probe (or anyone) sends. On any bytes, `batch_len`,
//! `claimed_probe_id` and `open` never panic and `open` refuses them (they cannot carry the tag); a real sealed
//! batch with the fuzz bytes XORed in is refused unless nothing changed, and then gives back its records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use records::batch::{self, BatchBuilder, Key};
use wire::record::Record;
use wire::LinkType;

const ID: &[u8] = b"fuzz-collector";

fn key() -> Key {
    Key::from_bytes(b"fuzz-batch-key-0123456789abcdef").unwrap()
}

fn sealed() -> (Vec<u8>, Vec<Record>) {
    let frame = [0u8; 60];
    let recs: Vec<Record> = (0..3)
        .map(|i| Record::from_frame(1_000 + i, 60, &frame, LinkType::Ethernet))
        .collect();
    let mut b = BatchBuilder::new(batch::MAX_PAYLOAD);
    for r in &recs {
        assert!(b.push(r));
    }
    (b.take(7, 1).seal(&key(), ID, 1, 2_000).to_vec(), recs)
}

fuzz_target!(|data: &[u8]| {
    let key = key();
    let _ = batch::batch_len(data);
    let _ = batch::claimed_probe_id(data);
    assert!(batch::open(data, &key, ID).is_err());

    let (mut buf, recs) = sealed();
    for (b, x) in buf.iter_mut().zip(data) {
        *b ^= x;
    }
    let changed = data.iter().take(buf.len()).any(|&x| x != 0);
    match batch::open(&buf, &key, ID) {
        Ok(view) => {
            assert!(!changed, "a changed batch was accepted");
            assert_eq!(view.records().collect::<Vec<_>>(), recs);
        }
        Err(_) => assert!(changed, "the real batch was refused"),
    }
});
