//! The packet table's tunnel columns (packets/1.1) read into flow keys, and written back into the
//! report's flow table with the flow table's names and types.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{PrimitiveBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;
use arrow_array::{Array, ArrayRef, PrimitiveArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field};
use columns::col;

use super::traffic::TunnelKey;
use crate::error::TraceError;

/// The tunnel columns of one batch.
pub(super) struct Columns<'a> {
    kind: &'a StringArray,
    id: &'a PrimitiveArray<UInt32Type>,
    a: &'a StringArray,
    b: &'a StringArray,
    problem: &'a StringArray,
}

impl<'a> Columns<'a> {
    /// `None` for a packets/1.0 file (no tunnel columns: every row is outside tunnels).
    pub(super) fn of(b: &'a RecordBatch, path: &Path) -> Result<Option<Columns<'a>>, TraceError> {
        if b.column_by_name(col::TUNNEL).is_none() {
            return Ok(None);
        }
        let bad = |name: &str| TraceError::Schema {
            path: path.to_path_buf(),
            what: format!("column {name:?} missing or of an unexpected type"),
        };
        let text = |name: &str| {
            b.column_by_name(name)
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(|| bad(name))
        };
        Ok(Some(Columns {
            kind: text(col::TUNNEL)?,
            id: b
                .column_by_name(col::TUNNEL_ID)
                .and_then(|c| c.as_primitive_opt::<UInt32Type>())
                .ok_or_else(|| bad(col::TUNNEL_ID))?,
            a: text(col::TUNNEL_A)?,
            b: text(col::TUNNEL_B)?,
            problem: text(col::TUNNEL_PROBLEM)?,
        }))
    }
}

/// Turns rows into tunnel keys; remembers the last carrier addresses parsed (a mirror sends every
/// packet between the same two, so most rows parse nothing).
#[derive(Default)]
pub(super) struct Reader {
    last: [(String, Option<IpAddr>); 2],
}

impl Reader {
    /// Row `i`'s tunnel; a row whose tunnel was not decoded is counted in `problems`.
    pub(super) fn row(
        &mut self,
        c: &Columns<'_>,
        i: usize,
        problems: &mut BTreeMap<String, u64>,
    ) -> Option<TunnelKey> {
        if c.problem.is_valid(i) {
            let p = c.problem.value(i);
            match problems.get_mut(p) {
                Some(n) => *n += 1,
                None => {
                    problems.insert(p.to_string(), 1);
                }
            }
        }
        if !c.kind.is_valid(i) {
            return None;
        }
        // A name this build does not know (a later minor) still keys its flows apart.
        let kind = wire::TunnelKind::from_name(c.kind.value(i)).map_or(u8::MAX, |k| k.code());
        let id = c.id.is_valid(i).then(|| c.id.value(i));
        let [a, b] = [(c.a, 0), (c.b, 1)].map(|(addr, slot)| {
            if !addr.is_valid(i) {
                return None;
            }
            let text = addr.value(i);
            let last = &mut self.last[slot];
            if last.0 != text {
                *last = (text.to_string(), text.parse().ok());
            }
            last.1
        });
        Some(TunnelKey { kind, id, a, b })
    }
}

/// The report flow table's tunnel columns (the index flow table's names and types).
pub(super) struct Builders {
    kind: StringBuilder,
    id: PrimitiveBuilder<UInt32Type>,
    a: StringBuilder,
    b: StringBuilder,
}

impl Builders {
    pub(super) fn new() -> Builders {
        Builders {
            kind: StringBuilder::new(),
            id: PrimitiveBuilder::new(),
            a: StringBuilder::new(),
            b: StringBuilder::new(),
        }
    }

    pub(super) fn push(&mut self, t: Option<&TunnelKey>) {
        let name = t.and_then(|t| wire::TunnelKind::from_code(t.kind).map(|k| k.name()));
        self.kind.append_option(name);
        self.id.append_option(t.and_then(|t| t.id));
        self.a
            .append_option(t.and_then(|t| t.a).map(|a| a.to_string()));
        self.b
            .append_option(t.and_then(|t| t.b).map(|a| a.to_string()));
    }

    pub(super) fn fields() -> [Field; 4] {
        [
            Field::new(col::TUNNEL, DataType::Utf8, true),
            Field::new(col::TUNNEL_ID, DataType::UInt32, true),
            Field::new(col::TUNNEL_A, DataType::Utf8, true),
            Field::new(col::TUNNEL_B, DataType::Utf8, true),
        ]
    }

    pub(super) fn finish(mut self) -> [ArrayRef; 4] {
        [
            Arc::new(self.kind.finish()),
            Arc::new(self.id.finish()),
            Arc::new(self.a.finish()),
            Arc::new(self.b.finish()),
        ]
    }
}
