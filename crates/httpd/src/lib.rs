//! httpd: the one small HTTP/1.1 server of ringcap's endpoints (`--metrics`, `ringcap serve`).
//!
//! Made for peers that may be hostile: a request (line, headers, body) must arrive whole within a
//! deadline and within size and header-count limits, a TLS handshake within its own deadline, a
//! reader that stalls is cut after a write timeout. A connection waits for its first whole
//! message in the accept thread (poll), then takes one of a bounded number of places, each a
//! thread; when they run out, the connection that has shown least is closed for the newcomer,
//! never one being answered (see `server`). No async runtime: the endpoints answer a handful of
//! clients. TLS is rustls with the ring provider; client certificates are checked by webpki
//! against the CA the operator names. One request per connection (`Connection: close`).

mod conn;
mod request;
mod response;
mod server;
mod slots;
mod tls;

pub use conn::Conn;
pub use request::{parse_request, Limits, Parsed, Request};
pub use response::{reason, send, BodyStream};
pub use rustls::ServerConfig as TlsConfig;
pub use server::{spawn, Config, Handler, CONNECTION_STACK, WAITING_PER_PLACE};
pub use slots::{Slot, Slots};
pub use tls::{client_config, server_config, TlsError};
