//! gRPC on the client side: the wire format, statuses, TLS and the transport over `h2`.
//! A leaf of the crate: `schema` (reflection) and `load` (the engine) both build on it.
pub mod status;
pub mod tls;
pub mod transport;
pub mod wire;

pub use transport::{
    Addresses, CallOptions, CallSpec, CancelAfter, Connection, Connector, Lb, Metadata, PreparedCall, Reply, Target,
};
