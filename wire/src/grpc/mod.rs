//! gRPC's wire format over HTTP/2, sans-I/O: the length-prefixed message framing, status
//! codes and their mapping to [`Status`](crate::rpc::Status), `grpc-timeout`,
//! `grpc-message` percent-encoding and gzip. No HTTP/2 here: the server glue (hyper) hands
//! body bytes in and takes frames and header values out.

mod code;
mod compression;
mod framing;
mod message;
mod timeout;

pub use code::Code;
pub use compression::{accepts, compress_gzip, decompress_gzip, Encoding};
pub use framing::{encode_prefix, GrpcFrameError, Message, MessageDecoder, PREFIX_LEN};
pub use message::{decode_message, encode_message};
pub use timeout::{format_timeout, parse_timeout};
