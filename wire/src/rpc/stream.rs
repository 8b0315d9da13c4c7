//! Flow control of a streamed reply (server streaming) on corewire's framing: credit counted
//! in messages, as in HTTP/2's window but per call and per message.
//!
//! The server may send [`STREAM_WINDOW`] StreamItem frames of a call before it hears anything;
//! each Credit frame from the client allows as many more as it says. The client grants credit
//! only for messages its reader *took* from the call's buffer, so a reader that stops
//! reading stops the server's handler after at most a window of messages, and the client
//! never holds more than a window of one call's messages: memory stays bounded by
//! `STREAM_WINDOW × the frame limit` per stream, whatever the reader does.

use bytes::Bytes;

/// Messages of one stream the server may send before the client grants more.
pub const STREAM_WINDOW: u32 = 16;

/// The server's side: how many messages it may still send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendCredit {
    allowed: u64,
}

impl Default for SendCredit {
    fn default() -> Self {
        SendCredit {
            allowed: u64::from(STREAM_WINDOW),
        }
    }
}

impl SendCredit {
    /// Whether one more message may be sent now.
    pub fn can_send(&self) -> bool {
        self.allowed > 0
    }

    /// One message sent; false (and nothing counted) when there was no credit for it.
    pub fn sent(&mut self) -> bool {
        if self.allowed == 0 {
            return false;
        }
        self.allowed -= 1;
        true
    }

    /// A Credit frame arrived. Credit beyond what the client could ever owe (more than a
    /// window outstanding) is a peer bug: `Err` and nothing granted.
    pub fn grant(&mut self, n: u32) -> Result<(), CreditError> {
        let after = self.allowed + u64::from(n);
        if n == 0 || after > u64::from(STREAM_WINDOW) {
            return Err(CreditError(n));
        }
        self.allowed = after;
        Ok(())
    }
}

/// A Credit frame granting more than the protocol allows (or none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditError(pub u32);

impl std::fmt::Display for CreditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "credit of {} messages exceeds the stream window of {STREAM_WINDOW}",
            self.0
        )
    }
}

impl std::error::Error for CreditError {}

/// The client's side: messages taken by the reader and not yet granted back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiveCredit {
    taken: u32,
}

impl ReceiveCredit {
    /// The reader took one message; `Some(n)`: send a Credit of `n` now (half a window at a
    /// time, so a steady stream costs one Credit frame per eight messages).
    pub fn took(&mut self) -> Option<u32> {
        self.taken += 1;
        if self.taken >= STREAM_WINDOW / 2 {
            return Some(std::mem::take(&mut self.taken));
        }
        None
    }
}

/// The payload of a Credit frame granting `n` messages.
pub fn credit_payload(n: u32) -> Bytes {
    Bytes::copy_from_slice(&n.to_le_bytes())
}

/// The count a Credit frame's payload carries; `None` unless it is exactly four bytes.
pub fn parse_credit(payload: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(payload.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_stops_after_a_window_until_credit_arrives() {
        let mut send = SendCredit::default();
        for _ in 0..STREAM_WINDOW {
            assert!(send.sent());
        }
        assert!(!send.can_send());
        assert!(!send.sent());
        send.grant(3).unwrap();
        assert!(send.sent() && send.sent() && send.sent());
        assert!(!send.can_send());
    }

    #[test]
    fn credit_beyond_the_window_is_refused() {
        let mut send = SendCredit::default();
        assert_eq!(send.grant(1), Err(CreditError(1)));
        assert!(send.sent());
        send.grant(1).unwrap();
        assert_eq!(send.grant(0), Err(CreditError(0)));
        assert_eq!(send.grant(u32::MAX), Err(CreditError(u32::MAX)));
    }

    #[test]
    fn the_client_grants_half_a_window_at_a_time_and_never_more_than_it_took() {
        let mut send = SendCredit::default();
        let mut recv = ReceiveCredit::default();
        let mut delivered = 0u32;
        let mut buffered = 0u32;
        // The server sends while it may; the reader takes one message per round.
        for _ in 0..1000 {
            while send.sent() {
                buffered += 1;
                assert!(
                    buffered <= STREAM_WINDOW,
                    "the client's buffer grew past a window"
                );
            }
            buffered -= 1;
            delivered += 1;
            if let Some(n) = recv.took() {
                assert_eq!(n, STREAM_WINDOW / 2);
                send.grant(n).unwrap();
            }
        }
        assert_eq!(delivered, 1000);
    }

    #[test]
    fn credit_payloads_round_trip_and_bad_ones_are_refused() {
        assert_eq!(parse_credit(&credit_payload(8)), Some(8));
        assert_eq!(parse_credit(b"abc"), None);
        assert_eq!(parse_credit(b"abcde"), None);
    }
}
