//! Header records as Parquet: a file writer (`.partial`, renamed when complete) of the table the
//! `columns` crate defines (schema, builder and writer properties, shared with `ringcap convert`
//! where the fields overlap), and a reader back into records (for `ringcap dedup`): the inverse of
//! `columns::RecordColumns::push`, null columns back to the record's zeros.

use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, ArrowPrimitiveType, RecordBatch};
use columns::{col, mac_from_u64, record_schema, RecordColumns};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::ZstdLevel;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use wire::record::Record;

/// Rows per Arrow batch handed to the writer.
pub const CHUNK_ROWS: usize = 65536;

/// A record with where it came from: one row of a records file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StoredRecord {
    /// The header record.
    pub record: Record,
    /// The probe that made it.
    pub probe_id: u64,
    /// The probe's stream.
    pub stream_id: u32,
}

/// The tables' writer properties (`columns::writer_properties`) at ZSTD level 3; `meta` goes
/// into the footer (key, value).
pub fn writer_properties(meta: &[(&str, String)]) -> WriterProperties {
    let mut kv = vec![
        KeyValue::new(
            "ringcap.version".into(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        // The dataset's version (docs/datasets.md), read by whoever joins many files into one table.
        KeyValue::new(
            "ringcap.schema".into(),
            crate::partition::SCHEMA.to_string(),
        ),
    ];
    kv.extend(
        meta.iter()
            .map(|(k, v)| KeyValue::new(format!("ringcap.{k}"), v.clone())),
    );
    let level = ZstdLevel::try_new(3).expect("zstd level 3 exists");
    columns::writer_properties(level, kv).build()
}

fn parquet_err(path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{}: {e}", path.display()))
}

/// `NAME.parquet` is written as `.NAME.parquet.partial` and renamed by [`RecordFileWriter::finish`].
pub fn partial_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.partial"))
}

/// Writes one records file: hidden while written, renamed into place when complete.
pub struct RecordFileWriter {
    writer: ArrowWriter<BufWriter<File>>,
    cols: RecordColumns,
    tmp: PathBuf,
    path: PathBuf,
    rows: u64,
}

impl RecordFileWriter {
    /// Starts `path` (written as its [`partial_path`] until finished).
    /// The file is new, mode 0600 and never opened through a symlink; a `.partial` left by a crashed run
    /// (or anything planted at its name) is removed first, not followed.
    pub fn create(path: &Path, props: WriterProperties) -> io::Result<RecordFileWriter> {
        let tmp = partial_path(path);
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let file = sys::create_data_file(&tmp).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", tmp.display()))
        })?;
        let writer = ArrowWriter::try_new(
            BufWriter::with_capacity(1 << 20, file),
            record_schema(),
            Some(props),
        )
        .map_err(|e| parquet_err(&tmp, e))?;
        Ok(RecordFileWriter {
            writer,
            cols: RecordColumns::with_capacity(CHUNK_ROWS),
            tmp,
            path: path.to_path_buf(),
            rows: 0,
        })
    }

    /// Appends one record.
    pub fn push(&mut self, r: &StoredRecord) -> io::Result<()> {
        self.cols.push(&r.record, r.probe_id, r.stream_id);
        self.rows += 1;
        if self.cols.len() >= CHUNK_ROWS {
            self.flush_chunk()?;
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> io::Result<()> {
        if self.cols.is_empty() {
            return Ok(());
        }
        let batch = self.cols.finish();
        self.writer
            .write(&batch)
            .map_err(|e| parquet_err(&self.tmp, e))
    }

    /// Rows pushed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes the footer, syncs, renames into place; returns (path, rows, bytes).
    pub fn finish(mut self) -> io::Result<(PathBuf, u64, u64)> {
        self.flush_chunk()?;
        let buf = self
            .writer
            .into_inner()
            .map_err(|e| parquet_err(&self.tmp, e))?;
        let file = buf.into_inner().map_err(|e| e.into_error())?;
        // Synced before the rename: a complete name always means complete contents.
        file.sync_all()?;
        let bytes = file.metadata()?.len();
        drop(file);
        rename_noreplace(&self.tmp, &self.path)?;
        Ok((self.path, self.rows, bytes))
    }
}

/// Renames `from` to `to` unless `to` exists (a file or a symlink planted there is never replaced).
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path with a NUL byte"))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two valid NUL-terminated paths, relative to the working directory.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "cannot rename {} to {}: {e} (move the existing file away)",
                from.display(),
                to.display()
            ),
        ));
    }
    Ok(())
}

/// Reads every row of a records file written by [`RecordFileWriter`].
pub fn read_records(path: &Path, out: &mut Vec<StoredRecord>) -> io::Result<u64> {
    let file = File::open(path)?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| parquet_err(path, e))?
        .with_batch_size(CHUNK_ROWS)
        .build()
        .map_err(|e| parquet_err(path, e))?;
    let mut n = 0;
    for batch in reader {
        let batch = batch.map_err(|e| parquet_err(path, e))?;
        n += append_rows(&batch, out).map_err(|e| parquet_err(path, e))?;
    }
    Ok(n)
}

/// A column by name with the expected primitive type.
fn prim<'a, T: ArrowPrimitiveType>(
    b: &'a RecordBatch,
    name: &str,
) -> Result<&'a arrow_array::PrimitiveArray<T>, String> {
    let c = b
        .column_by_name(name)
        .ok_or_else(|| format!("no column `{name}`: not a ringcap records file"))?;
    c.as_primitive_opt::<T>().ok_or_else(|| {
        format!(
            "column `{name}` is {} (want {}): not a ringcap records file",
            c.data_type(),
            T::DATA_TYPE
        )
    })
}

fn opt<T: ArrowPrimitiveType>(a: &arrow_array::PrimitiveArray<T>, i: usize) -> Option<T::Native> {
    a.is_valid(i).then(|| a.value(i))
}

fn append_rows(b: &RecordBatch, out: &mut Vec<StoredRecord>) -> Result<u64, String> {
    let ts = prim::<TimestampNanosecondType>(b, col::TS)?;
    let wire_len = prim::<UInt32Type>(b, col::WIRE_LEN)?;
    let src_mac = prim::<UInt64Type>(b, col::SRC_MAC)?;
    let dst_mac = prim::<UInt64Type>(b, col::DST_MAC)?;
    let ethertype = prim::<UInt16Type>(b, col::ETHERTYPE)?;
    let vlan = prim::<UInt16Type>(b, col::VLAN)?;
    let ip_version = prim::<UInt8Type>(b, col::IP_VERSION)?;
    let src_ip4 = prim::<UInt32Type>(b, col::SRC_IP4)?;
    let dst_ip4 = prim::<UInt32Type>(b, col::DST_IP4)?;
    let fsb = |name: &str| {
        b.column_by_name(name)
            .and_then(|c| c.as_fixed_size_binary_opt())
            .filter(|a| a.value_length() == 16)
            .ok_or_else(|| format!("column `{name}` missing or not 16-byte binary"))
    };
    let src_ip6 = fsb(col::SRC_IP6)?;
    let dst_ip6 = fsb(col::DST_IP6)?;
    let ip_len = prim::<UInt32Type>(b, col::IP_LEN)?;
    let ip_header_len = prim::<UInt8Type>(b, col::IP_HEADER_LEN)?;
    let protocol = prim::<UInt8Type>(b, col::PROTOCOL)?;
    let src_port = prim::<UInt16Type>(b, col::SRC_PORT)?;
    let dst_port = prim::<UInt16Type>(b, col::DST_PORT)?;
    let tcp_flags = prim::<UInt16Type>(b, col::TCP_FLAGS)?;
    let tcp_header_len = prim::<UInt8Type>(b, col::TCP_HEADER_LEN)?;
    let udp_len = prim::<UInt16Type>(b, col::UDP_LEN)?;
    let icmp_type = prim::<UInt8Type>(b, col::ICMP_TYPE)?;
    let icmp_code = prim::<UInt8Type>(b, col::ICMP_CODE)?;
    let probe_id = prim::<UInt64Type>(b, col::PROBE_ID)?;
    let stream_id = prim::<UInt32Type>(b, col::STREAM_ID)?;
    let tunnels = Tunnels::of(b)?;
    out.reserve(b.num_rows());
    for i in 0..b.num_rows() {
        let mut r = Record {
            ts_ns: ts.value(i).max(0) as u64,
            wire_len: wire_len.value(i),
            src_mac: mac_from_u64(src_mac.value(i)),
            dst_mac: mac_from_u64(dst_mac.value(i)),
            ethertype: ethertype.value(i),
            vlan: opt(vlan, i).unwrap_or(0),
            ip_version: opt(ip_version, i).unwrap_or(0),
            ip_header_len: opt(ip_header_len, i).unwrap_or(0),
            protocol: opt(protocol, i).unwrap_or(0),
            tcp_flags: opt(tcp_flags, i).unwrap_or(0) as u8,
            ip_len: opt(ip_len, i).unwrap_or(0).min(u16::MAX as u32) as u16,
            ..Record::default()
        };
        if let Some(a) = opt(src_ip4, i) {
            r.src_ip4 = a.to_be_bytes();
        }
        if let Some(a) = opt(dst_ip4, i) {
            r.dst_ip4 = a.to_be_bytes();
        }
        if src_ip6.is_valid(i) {
            r.src_ip6.copy_from_slice(src_ip6.value(i));
        }
        if dst_ip6.is_valid(i) {
            r.dst_ip6.copy_from_slice(dst_ip6.value(i));
        }
        r.src_port = opt(src_port, i)
            .or(opt(icmp_type, i).map(u16::from))
            .unwrap_or(0);
        r.dst_port = opt(dst_port, i)
            .or(opt(icmp_code, i).map(u16::from))
            .unwrap_or(0);
        r.l4_len = opt(tcp_header_len, i)
            .map(u16::from)
            .or(opt(udp_len, i))
            .unwrap_or(0);
        if let Some(t) = &tunnels {
            t.fill(i, &mut r)?;
        }
        out.push(StoredRecord {
            record: r,
            probe_id: probe_id.value(i),
            stream_id: stream_id.value(i),
        });
    }
    Ok(b.num_rows() as u64)
}

/// The tunnel columns of a records file; `None` for a `records/1.0` file, which has none.
struct Tunnels<'a> {
    kind: &'a arrow_array::StringArray,
    id: &'a arrow_array::PrimitiveArray<UInt32Type>,
    a: &'a arrow_array::StringArray,
    b: &'a arrow_array::StringArray,
    problem: &'a arrow_array::StringArray,
}

impl<'a> Tunnels<'a> {
    fn of(b: &'a RecordBatch) -> Result<Option<Tunnels<'a>>, String> {
        if b.column_by_name(col::TUNNEL).is_none() {
            return Ok(None);
        }
        let string = |name: &str| {
            b.column_by_name(name)
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(|| format!("column `{name}` missing or not a string"))
        };
        Ok(Some(Tunnels {
            kind: string(col::TUNNEL)?,
            id: prim::<UInt32Type>(b, col::TUNNEL_ID)?,
            a: string(col::TUNNEL_A)?,
            b: string(col::TUNNEL_B)?,
            problem: string(col::TUNNEL_PROBLEM)?,
        }))
    }

    /// Row `i`'s tunnel fields into `r` (the inverse of `columns`' tunnel columns).
    fn fill(&self, i: usize, r: &mut Record) -> Result<(), String> {
        if self.problem.is_valid(i) {
            let p = self.problem.value(i);
            r.tunnel_problem = wire::TunnelProblem::from_name(p)
                .ok_or_else(|| format!("unknown tunnel_problem `{p}`"))?
                .code();
        }
        if !self.kind.is_valid(i) {
            return Ok(());
        }
        let k = self.kind.value(i);
        r.tunnel = wire::TunnelKind::from_name(k)
            .ok_or_else(|| format!("unknown tunnel `{k}`"))?
            .code();
        r.tunnel_id = opt(self.id, i).unwrap_or(0);
        for (addr, out) in [(self.a, &mut r.carrier_a), (self.b, &mut r.carrier_b)] {
            if !addr.is_valid(i) {
                continue;
            }
            let text = addr.value(i);
            match text.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(a)) => {
                    out[..4].copy_from_slice(&a.octets());
                    r.carrier_version = 4;
                }
                Ok(std::net::IpAddr::V6(a)) => {
                    *out = a.octets();
                    r.carrier_version = 6;
                }
                Err(_) => return Err(format!("tunnel address `{text}` is not an IP address")),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of every kind the mapping distinguishes.
    pub(crate) fn sample_records() -> Vec<StoredRecord> {
        let base = Record {
            ts_ns: 1_700_000_000_123_456_789,
            wire_len: 650,
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_mac: [0, 0, 0, 0, 0, 1],
            ethertype: 0x0800,
            ip_version: 4,
            ip_header_len: 20,
            src_ip4: [10, 77, 0, 1],
            dst_ip4: [10, 77, 0, 2],
            ip_len: 636,
            ..Record::default()
        };
        let tcp = Record {
            protocol: 6,
            tcp_flags: 0x12,
            src_port: 443,
            dst_port: 51000,
            l4_len: 32,
            ..base
        };
        let udp = Record {
            protocol: 17,
            src_port: 53,
            dst_port: 4000,
            l4_len: 616,
            vlan: 0x2064,
            ..base
        };
        let icmp = Record {
            protocol: 1,
            src_port: 8,
            dst_port: 0,
            ..base
        };
        let gre = Record {
            protocol: 47,
            ..base
        };
        let v6 = Record {
            ethertype: 0x86dd,
            ip_version: 6,
            ip_header_len: 40,
            src_ip4: [0; 4],
            dst_ip4: [0; 4],
            src_ip6: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            dst_ip6: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            protocol: 58,
            src_port: 128,
            ..base
        };
        let arp = Record {
            ethertype: 0x0806,
            wire_len: 60,
            ..Record::default()
        };
        let mut vxlan = Record {
            tunnel: wire::TunnelKind::Vxlan.code(),
            tunnel_id: 42,
            carrier_version: 4,
            ..tcp
        };
        vxlan.carrier_a[..4].copy_from_slice(&[192, 0, 2, 1]);
        vxlan.carrier_b[..4].copy_from_slice(&[192, 0, 2, 2]);
        let ipip6 = Record {
            tunnel: wire::TunnelKind::IpInIp.code(),
            tunnel_id: 0,
            carrier_version: 6,
            carrier_a: v6.src_ip6,
            carrier_b: v6.dst_ip6,
            ..udp
        };
        let mpls = Record {
            tunnel: wire::TunnelKind::Mpls.code(),
            tunnel_id: 100,
            ..udp
        };
        let broken = Record {
            tunnel_problem: wire::TunnelProblem::Malformed.code(),
            ..gre
        };
        [tcp, udp, icmp, gre, v6, arp, vxlan, ipip6, mpls, broken]
            .into_iter()
            .enumerate()
            .map(|(i, r)| StoredRecord {
                record: Record {
                    ts_ns: r.ts_ns + i as u64,
                    ..r
                },
                probe_id: 3,
                stream_id: 0xabcd,
            })
            .collect()
    }

    #[test]
    fn rows_round_trip_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.parquet");
        let recs = sample_records();
        let mut w = RecordFileWriter::create(&path, writer_properties(&[])).unwrap();
        for r in &recs {
            w.push(r).unwrap();
        }
        assert!(partial_path(&path).exists());
        assert!(!path.exists());
        let (p, rows, bytes) = w.finish().unwrap();
        assert_eq!((p.as_path(), rows), (path.as_path(), recs.len() as u64));
        assert!(bytes > 0 && !partial_path(&path).exists());
        let mut back = Vec::new();
        assert_eq!(read_records(&path, &mut back).unwrap(), recs.len() as u64);
        assert_eq!(back, recs);
    }

    #[test]
    fn created_0600_and_never_through_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        // A symlink planted at the .partial name: removed, not followed.
        let path = dir.path().join("a.parquet");
        std::os::unix::fs::symlink(&victim, partial_path(&path)).unwrap();
        let mut w = RecordFileWriter::create(&path, writer_properties(&[])).unwrap();
        w.push(&sample_records()[0]).unwrap();
        w.finish().unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
        let meta = fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // A symlink planted at the final name: the rename refuses to replace it.
        let path2 = dir.path().join("b.parquet");
        std::os::unix::fs::symlink(&victim, &path2).unwrap();
        let w = RecordFileWriter::create(&path2, writer_properties(&[])).unwrap();
        let e = w.finish().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert!(fs::symlink_metadata(&path2)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
    }

    #[test]
    fn columns_follow_convert_where_they_overlap() {
        let mut c = RecordColumns::with_capacity(8);
        for r in sample_records() {
            c.push(&r.record, r.probe_id, r.stream_id);
        }
        let b = c.finish();
        let tcp = 0;
        let icmp = 2;
        let src = prim::<UInt32Type>(&b, col::SRC_IP4).unwrap();
        assert_eq!(src.value(tcp), 0x0a4d_0001);
        let mac = prim::<UInt64Type>(&b, col::DST_MAC).unwrap();
        assert_eq!(mac.value(tcp), 0x0200_0000_0002);
        assert!(prim::<UInt16Type>(&b, col::SRC_PORT).unwrap().is_null(icmp));
        assert_eq!(
            prim::<UInt8Type>(&b, col::ICMP_TYPE).unwrap().value(icmp),
            8
        );
        assert!(prim::<UInt16Type>(&b, col::UDP_LEN).unwrap().is_null(tcp));
        assert_eq!(b.schema(), record_schema());
        // The tunnel columns, spelled as the flow table spells them.
        let text = |name: &str, i: usize| {
            let c = b.column_by_name(name).unwrap().as_string::<i32>();
            c.is_valid(i).then(|| c.value(i).to_string())
        };
        let (vxlan, ipip6, mpls, broken) = (6, 7, 8, 9);
        assert_eq!(text(col::TUNNEL, vxlan).as_deref(), Some("vxlan"));
        assert_eq!(text(col::TUNNEL_A, vxlan).as_deref(), Some("192.0.2.1"));
        assert_eq!(text(col::TUNNEL_B, vxlan).as_deref(), Some("192.0.2.2"));
        assert_eq!(text(col::TUNNEL_A, ipip6).as_deref(), Some("2001:db8::1"));
        assert_eq!(text(col::TUNNEL_A, mpls), None);
        assert_eq!(text(col::TUNNEL, tcp), None);
        assert_eq!(
            text(col::TUNNEL_PROBLEM, broken).as_deref(),
            Some("malformed")
        );
        let id = prim::<UInt32Type>(&b, col::TUNNEL_ID).unwrap();
        assert_eq!((id.value(vxlan), id.value(mpls)), (42, 100));
        assert!(id.is_null(ipip6) && id.is_null(tcp));
    }
}
