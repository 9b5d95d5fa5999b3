//! The flow table: next to every index, `NAME.flows.parquet`, one row per flow of the capture
//! file (the index's flows: both directions as one, with the outer VLAN), so DuckDB, Spark or
//! Trino answer "which flows talked to X" without reading a packet. Columns and bounds are in
//! `docs/index.md`; the `file` and timestamp columns and the writer properties are the other
//! tables' (`columns`).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, PrimitiveBuilder, StringBuilder};
use arrow_array::types::{UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use columns::{file_column, file_type, ts_builder, ts_type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::ZstdLevel;
use parquet::file::metadata::KeyValue;

use crate::file::Identity;
use wire::TunnelKind;

use crate::build::Names;
use crate::key::{FlowKey, KIND_IP, KIND_PORTS, KIND_VLAN};
use crate::names::FlowNames;

/// Bumped when a column changes meaning; a table of another version is rebuilt.
pub const FLOWS_VERSION: u32 = 3;
/// The footer's `ringcap.schema`: the dataset's `flows/MAJOR.MINOR` (docs/datasets.md: a new
/// column bumps MINOR, any other change MAJOR; either one bumps [`FLOWS_VERSION`] too, so a
/// store's tables are rebuilt to it).
pub const FLOWS_SCHEMA: &str = "flows/1.2";
/// Rows per record batch (and row group) while writing: bounds the Arrow columns held at once.
const CHUNK_ROWS: usize = 64 << 10;
/// Footer keys (with the `ringcap.` prefix the records tables use).
const KEY_VERSION: &str = "ringcap.flows_version";
const KEY_SIZE: &str = "ringcap.capture_size";
const KEY_COVERED: &str = "ringcap.capture_covered";
const KEY_HEAD_CRC: &str = "ringcap.capture_head_crc";
const KEY_TAIL_CRC: &str = "ringcap.capture_tail_crc";
/// flows/1.2: the file's names cut or left out (the sum of `names_cut`), and the packets that
/// looked like they carry a name but did not parse ([`crate::names::Collector::unread`]).
const KEY_NAMES_CUT: &str = "ringcap.names_cut";
const KEY_NAMES_UNREAD: &str = "ringcap.names_unread";

/// Column names (the packet table's names where the meaning is the same).
pub mod col {
    pub use columns::col::{DST_PORT, FILE, PROTOCOL, SRC_PORT, VLAN};
    pub const SRC: &str = "src";
    pub const DST: &str = "dst";
    pub const FIRST_TS: &str = "first_ts";
    pub const LAST_TS: &str = "last_ts";
    pub const PACKETS: &str = "packets";
    pub const BYTES: &str = "bytes";
    pub const SRC_PACKETS: &str = "src_packets";
    pub const SRC_BYTES: &str = "src_bytes";
    pub const DST_PACKETS: &str = "dst_packets";
    pub const DST_BYTES: &str = "dst_bytes";
    pub const TUNNEL: &str = "tunnel";
    pub const TUNNEL_ID: &str = "tunnel_id";
    pub const TUNNEL_A: &str = "tunnel_a";
    pub const TUNNEL_B: &str = "tunnel_b";
    pub const DNS_QUERY: &str = "dns_query";
    pub const DNS_CNAME: &str = "dns_cname";
    pub const DNS_ADDR: &str = "dns_addr";
    pub const TLS_SNI: &str = "tls_sni";
    pub const TLS_ALPN: &str = "tls_alpn";
    pub const JA4: &str = "ja4";
    pub const HTTP_HOST: &str = "http_host";
    pub const HTTP_PATH: &str = "http_path";
    pub const NAMES_CUT: &str = "names_cut";
}

/// The flow table's path for `capture`: next to it, `NAME.flows.parquet`.
pub fn flows_path(capture: &Path) -> PathBuf {
    store::flows_path(capture)
}

/// One flow of a file, as the builder counts it.
#[derive(Clone, Copy, Debug)]
pub struct FlowStat {
    pub key: FlowKey,
    pub first_ts: u64,
    pub last_ts: u64,
    /// The flow's earliest packet went from `a` to `b`: `a` is the table's `src`.
    pub a_first: bool,
    /// Packets and wire bytes from `a` to `b` (`[0]`) and from `b` to `a` (`[1]`).
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
}

impl FlowStat {
    pub fn new(key: FlowKey) -> FlowStat {
        FlowStat {
            key,
            first_ts: u64::MAX,
            last_ts: 0,
            a_first: true,
            packets: [0; 2],
            bytes: [0; 2],
        }
    }

    #[inline]
    pub fn add(&mut self, ts_ns: u64, a_to_b: bool, wire_len: u32) {
        if ts_ns < self.first_ts {
            self.first_ts = ts_ns;
            self.a_first = a_to_b;
        }
        self.last_ts = self.last_ts.max(ts_ns);
        let d = usize::from(!a_to_b);
        self.packets[d] += 1;
        self.bytes[d] += u64::from(wire_len);
    }

    /// Adds packets counted elsewhere (a frame's, see `build::frame_flows`): their earliest and
    /// latest times, whether the earliest went from `a` to `b`, packets and bytes each way.
    /// Added in file order, as [`Self::add`] is: of equal earliest times the first one counts.
    #[inline]
    pub fn add_counted(
        &mut self,
        first_ts: u64,
        last_ts: u64,
        a_first: bool,
        packets: [u32; 2],
        bytes: [u64; 2],
    ) {
        if first_ts < self.first_ts {
            self.first_ts = first_ts;
            self.a_first = a_first;
        }
        self.last_ts = self.last_ts.max(last_ts);
        for d in 0..2 {
            self.packets[d] += u64::from(packets[d]);
            self.bytes[d] += bytes[d];
        }
    }
}

/// The table's Arrow schema.
pub fn flow_schema() -> SchemaRef {
    use DataType::*;
    let f = |n: &str, t: DataType, null: bool| Field::new(n, t, null);
    Arc::new(Schema::new(vec![
        // As the packet table's `file`: one dictionary value, not the name on every row.
        f(col::FILE, file_type(), false),
        f(col::SRC, Utf8, true),
        f(col::SRC_PORT, UInt16, true),
        f(col::DST, Utf8, true),
        f(col::DST_PORT, UInt16, true),
        f(col::PROTOCOL, UInt8, true),
        f(col::VLAN, UInt16, true),
        f(col::FIRST_TS, ts_type(), false),
        f(col::LAST_TS, ts_type(), false),
        f(col::PACKETS, UInt64, false),
        f(col::BYTES, UInt64, false),
        f(col::SRC_PACKETS, UInt64, false),
        f(col::SRC_BYTES, UInt64, false),
        f(col::DST_PACKETS, UInt64, false),
        f(col::DST_BYTES, UInt64, false),
        // flows/1.1: the tunnel the flow came in (its packets are keyed by what it carries).
        f(col::TUNNEL, Utf8, true),
        f(col::TUNNEL_ID, UInt32, true),
        f(col::TUNNEL_A, Utf8, true),
        f(col::TUNNEL_B, Utf8, true),
        // flows/1.2: names (crate::names), null when the flow had none.
        f(col::DNS_QUERY, list_type(), true),
        f(col::DNS_CNAME, list_type(), true),
        f(col::DNS_ADDR, list_type(), true),
        f(col::TLS_SNI, Utf8, true),
        f(col::TLS_ALPN, list_type(), true),
        f(col::JA4, Utf8, true),
        f(col::HTTP_HOST, Utf8, true),
        f(col::HTTP_PATH, Utf8, true),
        f(col::NAMES_CUT, UInt32, true),
    ]))
}

/// A list of strings, as `ListBuilder<StringBuilder>` makes it.
fn list_type() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

/// Appends a list of names, null when empty.
fn append_list(out: &mut ListBuilder<StringBuilder>, v: Option<&Vec<String>>) {
    match v.filter(|v| !v.is_empty()) {
        Some(v) => {
            for s in v {
                out.values().append_value(s);
            }
            out.append(true);
        }
        None => out.append(false),
    }
}

/// Appends an address as people write it: IPv4 dotted, IPv6 in RFC 5952 form; null without one.
/// IPv4 (nearly every row) is spelled by hand: `Ipv4Addr`'s `Display` took ~90 ns per flow,
/// a third of writing the table (perf).
fn append_addr(out: &mut StringBuilder, a: Option<&[u8; 16]>) {
    let Some(a) = a else {
        return out.append_null();
    };
    if a[..12] != crate::key::mapped_v4([0; 4])[..12] {
        return out.append_value(Ipv6Addr::from(*a).to_string());
    }
    let mut text = [0u8; 15];
    let mut n = 0;
    for (i, &o) in a[12..].iter().enumerate() {
        if i > 0 {
            text[n] = b'.';
            n += 1;
        }
        if o >= 100 {
            text[n] = b'0' + o / 100;
            n += 1;
        }
        if o >= 10 {
            text[n] = b'0' + o / 10 % 10;
            n += 1;
        }
        text[n] = b'0' + o % 10;
        n += 1;
    }
    out.append_value(std::str::from_utf8(&text[..n]).expect("ASCII digits and dots"));
}

/// The names' columns (flows/1.2). A batch without any name (most, on ordinary traffic) gets
/// them as null arrays at once: appending nine nulls per row cost ~10 ns per packet of `ringcap
/// synth` traffic (indexer_cost).
fn name_columns(flows: &[(&FlowStat, Option<&FlowNames>)]) -> Vec<ArrayRef> {
    let n = flows.len();
    if flows.iter().all(|f| f.1.is_none()) {
        let schema = flow_schema();
        let first = schema.index_of(col::DNS_QUERY).expect("a column");
        return schema.fields()[first..]
            .iter()
            .map(|f| arrow_array::new_null_array(f.data_type(), n))
            .collect();
    }
    let lists = || ListBuilder::new(StringBuilder::new());
    let (mut dns_query, mut dns_cname, mut dns_addr, mut tls_alpn) =
        (lists(), lists(), lists(), lists());
    let strings = StringBuilder::new;
    let (mut tls_sni, mut ja4, mut http_host, mut http_path) =
        (strings(), strings(), strings(), strings());
    let mut names_cut = PrimitiveBuilder::<UInt32Type>::with_capacity(n);
    for &(_, names) in flows {
        append_list(&mut dns_query, names.map(|x| &x.dns_query));
        append_list(&mut dns_cname, names.map(|x| &x.dns_cname));
        append_list(&mut dns_addr, names.map(|x| &x.dns_addr));
        tls_sni.append_option(names.and_then(|x| x.tls_sni.as_deref()));
        append_list(&mut tls_alpn, names.map(|x| &x.tls_alpn));
        ja4.append_option(names.and_then(|x| x.ja4.as_deref()));
        http_host.append_option(names.and_then(|x| x.http_host.as_deref()));
        http_path.append_option(names.and_then(|x| x.http_path.as_deref()));
        names_cut.append_option(names.map(|x| x.cut));
    }
    vec![
        Arc::new(dns_query.finish()),
        Arc::new(dns_cname.finish()),
        Arc::new(dns_addr.finish()),
        Arc::new(tls_sni.finish()),
        Arc::new(tls_alpn.finish()),
        Arc::new(ja4.finish()),
        Arc::new(http_host.finish()),
        Arc::new(http_path.finish()),
        Arc::new(names_cut.finish()),
    ]
}

/// Columns of up to [`CHUNK_ROWS`] flows, each with its names if it has any.
fn batch(file: &str, flows: &[(&FlowStat, Option<&FlowNames>)]) -> RecordBatch {
    let n = flows.len();
    let mut src = StringBuilder::with_capacity(n, n * 15);
    let mut dst = StringBuilder::with_capacity(n, n * 15);
    let mut src_port = PrimitiveBuilder::<UInt16Type>::with_capacity(n);
    let mut dst_port = PrimitiveBuilder::<UInt16Type>::with_capacity(n);
    let mut protocol = PrimitiveBuilder::<UInt8Type>::with_capacity(n);
    let mut vlan = PrimitiveBuilder::<UInt16Type>::with_capacity(n);
    let (mut first, mut last) = (ts_builder(n), ts_builder(n));
    let u64s = || PrimitiveBuilder::<UInt64Type>::with_capacity(n);
    let (mut packets, mut bytes) = (u64s(), u64s());
    let (mut src_packets, mut src_bytes, mut dst_packets, mut dst_bytes) =
        (u64s(), u64s(), u64s(), u64s());
    let mut tunnel = StringBuilder::new();
    let mut tunnel_id = PrimitiveBuilder::<UInt32Type>::with_capacity(n);
    let (mut tunnel_a, mut tunnel_b) = (StringBuilder::new(), StringBuilder::new());
    for &(s, _) in flows {
        let k = &s.key;
        // `src` is the endpoint that sent the flow's earliest packet.
        let (fwd, rev) = if s.a_first { (0, 1) } else { (1, 0) };
        let ((sa, sp), (da, dp)) = if s.a_first {
            ((&k.a, k.port_a), (&k.b, k.port_b))
        } else {
            ((&k.b, k.port_b), (&k.a, k.port_a))
        };
        let ip = k.kind & KIND_IP != 0;
        let ports = k.kind & KIND_PORTS != 0;
        append_addr(&mut src, ip.then_some(sa));
        append_addr(&mut dst, ip.then_some(da));
        src_port.append_option(ports.then_some(sp));
        dst_port.append_option(ports.then_some(dp));
        protocol.append_option(ip.then_some(k.proto));
        vlan.append_option((k.kind & KIND_VLAN != 0).then_some(k.vlan));
        first.append_value(s.first_ts as i64);
        last.append_value(s.last_ts as i64);
        packets.append_value(s.packets[0] + s.packets[1]);
        bytes.append_value(s.bytes[0] + s.bytes[1]);
        src_packets.append_value(s.packets[fwd]);
        src_bytes.append_value(s.bytes[fwd]);
        dst_packets.append_value(s.packets[rev]);
        dst_bytes.append_value(s.bytes[rev]);
        let kind = TunnelKind::from_code(k.tunnel);
        tunnel.append_option(kind.map(|t| t.name()));
        // Kinds without an id (ERSPAN I, IP-in-IP) have none to show.
        let has_id = kind.is_some_and(|t| !matches!(t, TunnelKind::Erspan1 | TunnelKind::IpInIp));
        tunnel_id.append_option(has_id.then_some(k.tunnel_id));
        let carrier = kind.is_some() && (k.carrier_a != [0; 16] || k.carrier_b != [0; 16]);
        append_addr(&mut tunnel_a, carrier.then_some(&k.carrier_a));
        append_addr(&mut tunnel_b, carrier.then_some(&k.carrier_b));
    }
    let cols: Vec<ArrayRef> = vec![
        file_column(file, n),
        Arc::new(src.finish()),
        Arc::new(src_port.finish()),
        Arc::new(dst.finish()),
        Arc::new(dst_port.finish()),
        Arc::new(protocol.finish()),
        Arc::new(vlan.finish()),
        Arc::new(first.finish()),
        Arc::new(last.finish()),
        Arc::new(packets.finish()),
        Arc::new(bytes.finish()),
        Arc::new(src_packets.finish()),
        Arc::new(src_bytes.finish()),
        Arc::new(dst_packets.finish()),
        Arc::new(dst_bytes.finish()),
        Arc::new(tunnel.finish()),
        Arc::new(tunnel_id.finish()),
        Arc::new(tunnel_a.finish()),
        Arc::new(tunnel_b.finish()),
    ];
    let mut cols = cols;
    cols.extend(name_columns(flows));
    RecordBatch::try_new(flow_schema(), cols).expect("columns match the schema")
}

/// Writes the flow table of `capture` (whose index has `identity` and covers `covered` bytes):
/// first hidden (`.NAME.flows.parquet.partial`, new, mode 0600, never through a symlink), then
/// renamed. Flows without packets (a limit dropped their frame) are left out. Returns its size.
pub fn write_flow_table(
    capture: &Path,
    identity: Identity,
    covered: u64,
    flows: &[FlowStat],
    names: &Names,
) -> io::Result<u64> {
    let path = flows_path(capture);
    let tmp = store::container::partial_name(&path);
    let create = || sys::create_data_file(&tmp);
    let file = match create() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(&tmp)?;
            create()?
        }
        r => r?,
    };
    let written = write_rows(file, capture, identity, covered, flows, names).and_then(|()| {
        std::fs::rename(&tmp, &path)?;
        Ok(std::fs::metadata(&path)?.len())
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn write_rows(
    file: File,
    capture: &Path,
    identity: Identity,
    covered: u64,
    flows: &[FlowStat],
    names: &Names,
) -> io::Result<()> {
    let kv = |k: &str, v: String| KeyValue::new(k.to_string(), v);
    let footer = vec![
        kv("ringcap.schema", FLOWS_SCHEMA.into()),
        kv(KEY_VERSION, FLOWS_VERSION.to_string()),
        kv(KEY_SIZE, identity.size.to_string()),
        kv(KEY_COVERED, covered.to_string()),
        kv(KEY_HEAD_CRC, identity.head_crc.to_string()),
        kv(KEY_TAIL_CRC, identity.tail_crc.to_string()),
        kv(KEY_NAMES_CUT, names_cut(names).to_string()),
        kv(KEY_NAMES_UNREAD, names.unread.to_string()),
    ];
    // Level 1, as the index body: the table is written by the idle indexer for every file.
    let level = ZstdLevel::try_new(1).expect("zstd level 1 exists");
    let props = columns::writer_properties(level, footer)
        .set_max_row_group_row_count(Some(CHUNK_ROWS))
        .build();
    let perr = |e: parquet::errors::ParquetError| io::Error::other(e.to_string());
    let mut w = ArrowWriter::try_new(
        BufWriter::with_capacity(1 << 20, file),
        flow_schema(),
        Some(props),
    )
    .map_err(perr)?;
    let name = capture.file_name().unwrap_or_default().to_string_lossy();
    let mut chunk = Vec::with_capacity(CHUNK_ROWS.min(flows.len()));
    let mut named = names.flows.iter().peekable();
    for (i, s) in flows.iter().enumerate() {
        let mut n = None;
        while let Some(&(id, ref x)) = named.peek().copied() {
            if id as usize > i {
                break;
            }
            if id as usize == i {
                n = Some(&**x);
            }
            named.next();
        }
        if s.packets[0] + s.packets[1] == 0 {
            continue;
        }
        chunk.push((s, n));
        if chunk.len() == CHUNK_ROWS {
            w.write(&batch(&name, &chunk)).map_err(perr)?;
            chunk.clear();
        }
    }
    if !chunk.is_empty() || w.flushed_row_groups().is_empty() {
        w.write(&batch(&name, &chunk)).map_err(perr)?;
    }
    // Not synced, as the index is not: both are rebuilt from the capture file if lost.
    let mut inner = w.into_inner().map_err(perr)?;
    inner.flush()
}

/// Names cut or left out in a file: each flow's `names_cut` and the names of flows the budget
/// left unnamed.
fn names_cut(names: &Names) -> u64 {
    names
        .flows
        .iter()
        .map(|(_, n)| u64::from(n.cut))
        .sum::<u64>()
        + names.dropped
}

/// Why a flow table cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FlowTableError {
    #[error("{0}: {1}")]
    Io(String, io::Error),
    #[error("{0}: not a readable flow table: {1}")]
    Damaged(String, String),
    #[error("{0}: flow table of version {1} (this ringcap writes {FLOWS_VERSION})")]
    Version(String, String),
    #[error("{0}: the capture file changed since its flow table was written")]
    Stale(String),
}

/// Checks the flow table of `capture`: it must decode whole (every page: a cut or damaged file
/// fails), be of this version, and the capture file must be the one it was written for (size and
/// the CRCs of its ends, as the index checks). Returns its rows.
pub fn check_flow_table(capture: &Path) -> Result<u64, FlowTableError> {
    check(capture, true)
}

/// As [`check_flow_table`], from the footer alone (version, columns, the capture file's
/// identity), without reading the pages: a few KiB instead of the whole table, for checking
/// many files at once (a capture's older files at every start).
pub fn check_flow_table_footer(capture: &Path) -> Result<u64, FlowTableError> {
    check(capture, false)
}

fn check(capture: &Path, pages: bool) -> Result<u64, FlowTableError> {
    let path = flows_path(capture);
    let name = path.display().to_string();
    let file = File::open(&path).map_err(|e| FlowTableError::Io(name.clone(), e))?;
    check_table(file, &name, &LocalCapture(capture), pages)
}

/// The capture file a flow table is checked against (see [`check_table`]).
trait CaptureOf {
    fn size(&self) -> io::Result<u64>;
    fn identity(&self, covered: u64) -> io::Result<Identity>;
    fn label(&self) -> String;
}

struct LocalCapture<'a>(&'a Path);

impl CaptureOf for LocalCapture<'_> {
    fn size(&self) -> io::Result<u64> {
        std::fs::metadata(self.0).map(|m| m.len())
    }
    fn identity(&self, covered: u64) -> io::Result<Identity> {
        Identity::of(self.0, covered)
    }
    fn label(&self) -> String {
        self.0.display().to_string()
    }
}

/// A capture file read by ranges (an archive's object), and what reports call it.
struct RangedCapture<'a>(&'a dyn crate::ReadAt, &'a str);

impl CaptureOf for RangedCapture<'_> {
    fn size(&self) -> io::Result<u64> {
        self.0.len()
    }
    fn identity(&self, covered: u64) -> io::Result<Identity> {
        Identity::of_ranges(self.0, covered)
    }
    fn label(&self) -> String {
        self.1.to_string()
    }
}

/// Whether the table `table` (called `name`) is this version's, whole (`pages`: every page read)
/// and written for `capture` as it is now; its rows.
fn check_table<R: parquet::file::reader::ChunkReader + 'static>(
    table: R,
    name: &str,
    capture: &dyn CaptureOf,
    pages: bool,
) -> Result<u64, FlowTableError> {
    let name = name.to_string();
    let damaged =
        |e: parquet::errors::ParquetError| FlowTableError::Damaged(name.clone(), e.to_string());
    let b = ParquetRecordBatchReaderBuilder::try_new(table).map_err(damaged)?;
    let meta = b.metadata().file_metadata();
    let get = |k: &str| -> Option<String> {
        meta.key_value_metadata()?
            .iter()
            .find(|kv| kv.key == k)
            .and_then(|kv| kv.value.clone())
    };
    let version = get(KEY_VERSION).unwrap_or_default();
    if version != FLOWS_VERSION.to_string() {
        return Err(FlowTableError::Version(name, version));
    }
    let num = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());
    let (Some(size), Some(covered), Some(head), Some(tail)) = (
        num(KEY_SIZE),
        num(KEY_COVERED),
        num(KEY_HEAD_CRC),
        num(KEY_TAIL_CRC),
    ) else {
        return Err(FlowTableError::Damaged(name, "no capture identity".into()));
    };
    let expected_rows = meta.num_rows() as u64;
    if b.schema().fields() != flow_schema().fields() {
        return Err(FlowTableError::Damaged(name, "unexpected columns".into()));
    }
    let mut rows = expected_rows;
    if pages {
        rows = 0;
        for batch in b.build().map_err(damaged)? {
            rows += batch
                .map_err(|e| FlowTableError::Damaged(name.clone(), e.to_string()))?
                .num_rows() as u64;
        }
        if rows != expected_rows {
            return Err(FlowTableError::Damaged(name, "row count".into()));
        }
    }
    // A capture file of another size changed (and a shorter one cannot even be read up to `covered`).
    let capture_size = capture
        .size()
        .map_err(|e| FlowTableError::Io(capture.label(), e))?;
    if capture_size != size {
        return Err(FlowTableError::Stale(name));
    }
    let now = capture
        .identity(covered.min(size))
        .map_err(|e| FlowTableError::Io(capture.label(), e))?;
    if now.size != size || u64::from(now.head_crc) != head || u64::from(now.tail_crc) != tail {
        return Err(FlowTableError::Stale(name));
    }
    Ok(rows)
}

/// The flows of `capture`'s table that have a name matching one of `patterns` (a DNS question or
/// CNAME target, the SNI, the HTTP Host without its port; see [`FlowNames::matches`]), as the
/// index keys them. The table must be usable as [`check_flow_table_footer`] says (this version,
/// this capture file), and the columns read must decode.
pub fn named_flows(
    capture: &Path,
    patterns: &[crate::names::NamePattern],
) -> Result<Vec<FlowKey>, FlowTableError> {
    check(capture, false)?;
    let path = flows_path(capture);
    let name = path.display().to_string();
    let file = File::open(&path).map_err(|e| FlowTableError::Io(name.clone(), e))?;
    named_rows(file, &name, patterns)
}

/// Largest flow table fetched whole from an archive (a 256 MB capture file's is a few MB).
pub const MAX_RANGED_TABLE: u64 = 1 << 30;

/// As [`named_flows`], for a capture file read by ranges (`capture`, called `name`) and its flow
/// table (`table`, an archive's object), fetched whole.
pub fn named_flows_ranged(
    capture: &dyn crate::ReadAt,
    name: &str,
    table: &dyn crate::ReadAt,
    patterns: &[crate::names::NamePattern],
) -> Result<Vec<FlowKey>, FlowTableError> {
    let table_name = flows_path(Path::new(name)).display().to_string();
    let io = |e| FlowTableError::Io(table_name.clone(), e);
    let len = table.len().map_err(io)?;
    if len > MAX_RANGED_TABLE {
        return Err(FlowTableError::Damaged(
            table_name,
            format!("{len} bytes, over the {MAX_RANGED_TABLE} fetched whole"),
        ));
    }
    let mut bytes = vec![0; len as usize];
    table.read_at(&mut bytes, 0).map_err(io)?;
    let bytes = bytes::Bytes::from(bytes);
    check_table(
        bytes.clone(),
        &table_name,
        &RangedCapture(capture, name),
        false,
    )?;
    named_rows(bytes, &table_name, patterns)
}

fn named_rows<R: parquet::file::reader::ChunkReader + 'static>(
    table: R,
    name: &str,
    patterns: &[crate::names::NamePattern],
) -> Result<Vec<FlowKey>, FlowTableError> {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    use parquet::arrow::ProjectionMask;
    let name = name.to_string();
    let damaged = |e: &dyn std::fmt::Display| FlowTableError::Damaged(name.clone(), e.to_string());
    let b = ParquetRecordBatchReaderBuilder::try_new(table).map_err(|e| damaged(&e))?;
    let schema = flow_schema();
    let wanted = [
        col::SRC,
        col::SRC_PORT,
        col::DST,
        col::DST_PORT,
        col::PROTOCOL,
        col::VLAN,
        col::TUNNEL,
        col::TUNNEL_ID,
        col::TUNNEL_A,
        col::TUNNEL_B,
        col::DNS_QUERY,
        col::DNS_CNAME,
        col::TLS_SNI,
        col::HTTP_HOST,
    ];
    let roots: Vec<usize> = wanted
        .iter()
        .map(|c| schema.index_of(c).expect("a column of the schema"))
        .collect();
    let mask = ProjectionMask::roots(b.parquet_schema(), roots);
    let reader = b.with_projection(mask).build().map_err(|e| damaged(&e))?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| damaged(&e))?;
        let c = |n: &str| batch.column_by_name(n).expect("projected");
        let (src, dst) = (
            c(col::SRC).as_string::<i32>(),
            c(col::DST).as_string::<i32>(),
        );
        let u16s = |n: &str| c(n).as_primitive::<UInt16Type>().clone();
        let (sp, dp, vlan) = (u16s(col::SRC_PORT), u16s(col::DST_PORT), u16s(col::VLAN));
        let proto = c(col::PROTOCOL).as_primitive::<UInt8Type>().clone();
        let tunnel = c(col::TUNNEL).as_string::<i32>();
        let tunnel_id = c(col::TUNNEL_ID).as_primitive::<UInt32Type>().clone();
        let (ta, tb) = (
            c(col::TUNNEL_A).as_string::<i32>(),
            c(col::TUNNEL_B).as_string::<i32>(),
        );
        let (query, cname) = (
            c(col::DNS_QUERY).as_list::<i32>(),
            c(col::DNS_CNAME).as_list::<i32>(),
        );
        let (sni, host) = (
            c(col::TLS_SNI).as_string::<i32>(),
            c(col::HTTP_HOST).as_string::<i32>(),
        );
        let opt =
            |a: &arrow_array::StringArray, i: usize| a.is_valid(i).then(|| a.value(i).to_string());
        let list = |a: &arrow_array::ListArray, i: usize| -> Vec<String> {
            if a.is_null(i) {
                return Vec::new();
            }
            let v = a.value(i);
            let v = v.as_string::<i32>();
            (0..v.len())
                .filter(|&j| v.is_valid(j))
                .map(|j| v.value(j).to_string())
                .collect()
        };
        for i in 0..batch.num_rows() {
            if src.is_null(i) {
                continue;
            }
            let n = FlowNames {
                dns_query: list(query, i),
                dns_cname: list(cname, i),
                tls_sni: opt(sni, i),
                http_host: opt(host, i),
                ..FlowNames::default()
            };
            if !n.matches(patterns) {
                continue;
            }
            let num = |a: &arrow_array::UInt16Array| a.is_valid(i).then(|| a.value(i));
            let row = Row {
                src: src.value(i),
                dst: dst.value(i),
                src_port: num(&sp),
                dst_port: num(&dp),
                protocol: if proto.is_valid(i) { proto.value(i) } else { 0 },
                vlan: num(&vlan),
                tunnel: tunnel.is_valid(i).then(|| tunnel.value(i)),
                tunnel_id: tunnel_id.is_valid(i).then(|| tunnel_id.value(i)),
                tunnel_a: ta.is_valid(i).then(|| ta.value(i)),
                tunnel_b: tb.is_valid(i).then(|| tb.value(i)),
            };
            match row.key() {
                Some(k) => out.push(k),
                None => return Err(damaged(&format!("row {i}: addresses that do not parse"))),
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The key columns of one row.
struct Row<'a> {
    src: &'a str,
    dst: &'a str,
    src_port: Option<u16>,
    dst_port: Option<u16>,
    protocol: u8,
    vlan: Option<u16>,
    tunnel: Option<&'a str>,
    tunnel_id: Option<u32>,
    tunnel_a: Option<&'a str>,
    tunnel_b: Option<&'a str>,
}

impl Row<'_> {
    /// The index's key of the row (what [`FlowKey::directed_of`] gives its packets).
    fn key(&self) -> Option<FlowKey> {
        let addr = |t: &str| t.parse::<std::net::IpAddr>().ok().map(crate::key::addr16);
        let (src, dst) = (addr(self.src)?, addr(self.dst)?);
        let mut kind = KIND_IP;
        let (sp, dp) = match (self.src_port, self.dst_port) {
            (Some(s), Some(d)) => {
                kind |= KIND_PORTS;
                (s, d)
            }
            _ => (0, 0),
        };
        if self.vlan.is_some() {
            kind |= KIND_VLAN;
        }
        let ((a, port_a), (b, port_b)) = if (src, sp) <= (dst, dp) {
            ((src, sp), (dst, dp))
        } else {
            ((dst, dp), (src, sp))
        };
        let tunnel = match self.tunnel {
            None => 0,
            Some(t) => (1..=u8::MAX)
                .filter_map(TunnelKind::from_code)
                .find(|k| k.name() == t)?
                .code(),
        };
        let carrier = |t: Option<&str>| t.map_or(Some([0; 16]), addr);
        Some(FlowKey {
            a,
            b,
            port_a,
            port_b,
            proto: self.protocol,
            kind,
            vlan: self.vlan.unwrap_or(0),
            tunnel,
            tunnel_id: self.tunnel_id.unwrap_or(0),
            carrier_a: carrier(self.tunnel_a)?,
            carrier_b: carrier(self.tunnel_b)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_spelled_as_std_spells_them() {
        let mut b = StringBuilder::new();
        let v4 = [
            "0.0.0.0",
            "10.0.0.1",
            "255.255.255.255",
            "1.22.133.9",
            "100.10.1.0",
        ];
        for t in v4 {
            let a: std::net::Ipv4Addr = t.parse().unwrap();
            append_addr(&mut b, Some(&crate::key::mapped_v4(a.octets())));
        }
        let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        append_addr(&mut b, Some(&v6.octets()));
        append_addr(&mut b, None);
        let col = b.finish();
        for (i, t) in v4.iter().enumerate() {
            assert_eq!(col.value(i), *t);
        }
        assert_eq!(col.value(5), "2001:db8::1");
        assert!(arrow_array::Array::is_null(&col, 6));
    }
}
