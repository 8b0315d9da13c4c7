use std::fmt;

/// Malformed client input. The connection cannot be resynchronised after one of these: the
/// glue replies `-ERR <Display>` and closes (this is what Redis does too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// `*<n>` where `n` is not a number or exceeds [`super::ParserLimits::max_array_len`].
    InvalidMultibulkLength,
    /// `$<n>` where `n` is not a number, negative, or exceeds the bulk limit.
    InvalidBulkLength,
    /// An array element did not start with `$`.
    ExpectedBulk { got: u8 },
    /// No CRLF after a `*` header within the inline limit.
    TooBigMultibulkCount,
    /// No CRLF after a `$` header within the inline limit.
    TooBigBulkCount,
    /// An inline command line longer than [`super::ParserLimits::max_inline_len`].
    TooBigInlineRequest,
    /// An inline command with an unterminated quote, or a closing quote not followed by space.
    UnbalancedQuotes,
    /// A header line ended in `\r` followed by something other than `\n`.
    MissingLineFeed,
    /// Bulk data was not followed by CRLF (the client and we disagree about lengths).
    MissingBulkTerminator,
    /// Before authentication: an array of more than 10 elements.
    UnauthenticatedMultibulk,
    /// Before authentication: a bulk string longer than 16 KiB.
    UnauthenticatedBulk,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Protocol error: ")?;
        match self {
            ProtocolError::InvalidMultibulkLength => f.write_str("invalid multibulk length"),
            ProtocolError::InvalidBulkLength => f.write_str("invalid bulk length"),
            ProtocolError::ExpectedBulk { got } if got.is_ascii_graphic() || *got == b' ' => {
                write!(f, "expected '$', got '{}'", *got as char)
            }
            ProtocolError::ExpectedBulk { got } => write!(f, "expected '$', got '\\x{got:02x}'"),
            ProtocolError::TooBigMultibulkCount => f.write_str("too big mbulk count string"),
            ProtocolError::TooBigBulkCount => f.write_str("too big bulk count string"),
            ProtocolError::TooBigInlineRequest => f.write_str("too big inline request"),
            ProtocolError::UnbalancedQuotes => f.write_str("unbalanced quotes in request"),
            ProtocolError::MissingLineFeed => f.write_str("expected '\\n' after '\\r'"),
            ProtocolError::MissingBulkTerminator => f.write_str("expected CRLF after bulk data"),
            ProtocolError::UnauthenticatedMultibulk => {
                f.write_str("unauthenticated multibulk length")
            }
            ProtocolError::UnauthenticatedBulk => f.write_str("unauthenticated bulk length"),
        }
    }
}

impl std::error::Error for ProtocolError {}
