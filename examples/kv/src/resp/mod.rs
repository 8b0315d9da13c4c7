//! RESP2 wire format: an incremental request parser (multibulk arrays and inline commands)
//! and reply encoders.

mod encode;
mod error;
mod inline;
mod parser;
mod reply_parser;
mod whole;

pub(crate) use encode::{decimal, decimal_u64, put_decimal};
pub use encode::{
    write_array_header, write_bulk, write_error, write_integer, write_null_array, write_null_bulk,
    write_simple,
};
pub use error::ProtocolError;
pub use parser::{ParserLimits, RequestParser};
pub use reply_parser::{parse_reply, MalformedReply};
