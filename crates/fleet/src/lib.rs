//! ringcap beyond one sensor: a fleet file (`sensors.toml`: each sensor's name, its `ringcap
//! serve` URL, its archive, the certificates to ask it with) and the client that asks a sensor
//! for a query's packets ([`SensorFeed`], an [`index::Feed`]: the query's merge takes its stream
//! in time order with local files and archived ones).

mod client;
mod coverage;
mod sensors;

pub use client::{query_text, SensorFeed};
pub use coverage::{covered, Covered, FileEntry, FileList};
pub use sensors::{Fleet, FleetError, Sensor, TlsFiles};
