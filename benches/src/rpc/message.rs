//! The RPC echo message, written by hand so no protoc is needed. Equivalent proto:
//! `message EchoMessage { bytes payload = 1; }`.

/// Request and response of `corewire.bench.Echo/Echo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EchoMessage {
    #[prost(bytes = "bytes", tag = "1")]
    pub payload: prost::bytes::Bytes,
}
