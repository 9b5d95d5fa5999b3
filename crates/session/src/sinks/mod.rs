//! The sinks `ringcap capture` composes: the file writer, the header-record probe, the line printer, the
//! `--load` work and the `--drop-all` counter.

mod count;
mod load;
mod print;
mod records;
mod writer;

pub use count::CountSink;
pub use load::{LoadSink, LoadSpec};
pub use print::PrintSink;
pub use records::RecordSink;
pub use writer::WriterSink;
