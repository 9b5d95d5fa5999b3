//! records::auth: every parser of peer bytes in the record handshake. On any bytes: `Hello::parse`,
//! `parse_server_fixed` and `parse_error` never panic; the probe's `client_handshake` against a collector
//! that answers with the fuzz bytes never panics and never succeeds (the bytes cannot carry a valid tag); a
//! collector's `finish` and a probe's `check_ack` refuse fuzz bytes unless they are the real message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use records::auth::{self, Hello, KeySet, ServerPending};
use records::batch::Key;
use std::io::{Read, Write};

fn key() -> Key {
    Key::from_bytes(b"fuzz-handshake-key-0123456789").unwrap()
}

/// A collector that answers anything with `reply` (the probe's writes are discarded).
struct Scripted<'a> {
    reply: &'a [u8],
}

impl Read for Scripted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reply.read(buf)
    }
}

impl Write for Scripted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut hello = [0u8; auth::HELLO_LEN];
    let n = data.len().min(auth::HELLO_LEN);
    hello[..n].copy_from_slice(&data[..n]);
    let _ = Hello::parse(&hello);
    let mut fixed = [0u8; auth::SERVER_FIXED_LEN];
    let n = data.len().min(auth::SERVER_FIXED_LEN);
    fixed[..n].copy_from_slice(&data[..n]);
    let _ = auth::parse_server_fixed(&fixed);
    let _ = auth::parse_error(data);

    assert!(auth::client_handshake(&mut Scripted { reply: data }, &key(), 1).is_err());

    let keys = KeySet::Shared(key());
    let pending = ServerPending::reply(Hello::new(1), &keys, b"fuzz-collector").unwrap();
    let mut finish = [0u8; auth::FINISH_LEN];
    let n = data.len().min(auth::FINISH_LEN);
    finish[..n].copy_from_slice(&data[..n]);
    assert!(pending.finish(&finish).is_err());
});
