//! Sans-I/O RPC session state: which calls are in flight on a connection and
//! how replies are formed. Independent of any transport; time is always passed
//! in by the caller (`now: Instant`), never read here.

mod client_calls;
mod errors;
mod server;
mod server_calls;
mod status;
mod stream;

pub use client_calls::{ClientCalls, Completed};
pub use errors::{ResponseError, WindowFull};
pub use server::{
    check_deadline, error_header, request_deadline, request_header, response_header,
    MAX_ERROR_MESSAGE_LEN,
};
pub use server_calls::{ServerCalls, StartError};
pub use status::Status;
pub use stream::{
    credit_payload, parse_credit, CreditError, ReceiveCredit, SendCredit, STREAM_WINDOW,
};
