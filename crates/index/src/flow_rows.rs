//! Reading a flow table back (`NAME.flows.parquet`, written by `flows`): the rows as plain
//! values, for `ringcap serve`'s flows view. Columns are found by name, so a table with more
//! columns than these (a newer minor version) still reads; a column it lacks reads as null.
//! Bounded: at most `max_rows` rows are read from one table.

use std::fs::File;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int32Type, TimestampNanosecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::flows::{col, flows_path};

/// One row of a flow table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowRow {
    pub file: String,
    pub src: Option<String>,
    pub src_port: Option<u16>,
    pub dst: Option<String>,
    pub dst_port: Option<u16>,
    pub protocol: Option<u8>,
    pub vlan: Option<u16>,
    pub first_ts: u64,
    pub last_ts: u64,
    pub packets: u64,
    pub bytes: u64,
    pub tunnel: Option<String>,
    pub tunnel_id: Option<u32>,
}

/// The rows of `capture`'s flow table whose time overlaps `[after, before)` (ns; None: open),
/// at most `max_rows` of them (then `true`: more were left unread).
pub fn read_flow_rows(
    capture: &Path,
    after: Option<u64>,
    before: Option<u64>,
    max_rows: usize,
) -> Result<(Vec<FlowRow>, bool), String> {
    let path = flows_path(capture);
    let name = path.display().to_string();
    let file = File::open(&path).map_err(|e| format!("{name}: {e}"))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.with_batch_size(8192).build())
        .map_err(|e| format!("{name}: {e}"))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| format!("{name}: {e}"))?;
        for row in rows_of(&batch) {
            let overlaps =
                after.is_none_or(|a| row.last_ts >= a) && before.is_none_or(|b| row.first_ts < b);
            if !overlaps {
                continue;
            }
            if rows.len() == max_rows {
                return Ok((rows, true));
            }
            rows.push(row);
        }
    }
    Ok((rows, false))
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Option<&'a ArrayRef> {
    batch.column_by_name(name)
}

fn rows_of(batch: &RecordBatch) -> Vec<FlowRow> {
    let n = batch.num_rows();
    let text = |name: &str| -> Vec<Option<String>> {
        let Some(c) = column(batch, name) else {
            return vec![None; n];
        };
        if let Some(s) = c.as_string_opt::<i32>() {
            return (0..n)
                .map(|i| s.is_valid(i).then(|| s.value(i).to_string()))
                .collect();
        }
        if let Some(d) = c.as_dictionary_opt::<Int32Type>() {
            let values = d.values().as_string_opt::<i32>();
            return (0..n)
                .map(|i| {
                    let v = values?;
                    d.is_valid(i)
                        .then(|| v.value(d.keys().value(i) as usize).to_string())
                })
                .collect();
        }
        vec![None; n]
    };
    macro_rules! numbers {
        ($name:expr, $t:ty) => {{
            match column(batch, $name).and_then(|c| c.as_primitive_opt::<$t>()) {
                Some(a) => (0..n)
                    .map(|i| a.is_valid(i).then(|| a.value(i)))
                    .collect::<Vec<_>>(),
                None => vec![None; n],
            }
        }};
    }
    let file = text(col::FILE);
    let src = text(col::SRC);
    let dst = text(col::DST);
    let tunnel = text(col::TUNNEL);
    let src_port = numbers!(col::SRC_PORT, UInt16Type);
    let dst_port = numbers!(col::DST_PORT, UInt16Type);
    let protocol = numbers!(col::PROTOCOL, UInt8Type);
    let vlan = numbers!(col::VLAN, UInt16Type);
    let first = numbers!(col::FIRST_TS, TimestampNanosecondType);
    let last = numbers!(col::LAST_TS, TimestampNanosecondType);
    let packets = numbers!(col::PACKETS, UInt64Type);
    let bytes = numbers!(col::BYTES, UInt64Type);
    let tunnel_id = numbers!(col::TUNNEL_ID, UInt32Type);
    (0..n)
        .map(|i| FlowRow {
            file: file[i].clone().unwrap_or_default(),
            src: src[i].clone(),
            src_port: src_port[i],
            dst: dst[i].clone(),
            dst_port: dst_port[i],
            protocol: protocol[i],
            vlan: vlan[i],
            first_ts: first[i].unwrap_or(0).max(0) as u64,
            last_ts: last[i].unwrap_or(0).max(0) as u64,
            packets: packets[i].unwrap_or(0),
            bytes: bytes[i].unwrap_or(0),
            tunnel: tunnel[i].clone(),
            tunnel_id: tunnel_id[i],
        })
        .collect()
}
