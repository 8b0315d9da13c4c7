//! corewire's RPC framing for the open-loop client, without I/O: unary calls of the bench's
//! Echo service ([`crate::corewire_rpc::Echo`]) as whole frames, and the check that a reply
//! is the Response to the request it should answer. The frames are the wire crate's, encoded
//! and decoded by its own codec, so any server of that framing can be driven.

use bytes::{Bytes, BytesMut};
use corewire::Service;
use corewire_wire::frame::{
    FrameDecoder, FrameEncoder, FrameHeader, FrameKind, FrameLimits, PREAMBLE_LEN,
};

use super::replies::BadReply;
use crate::corewire_rpc::{Echo, ECHO_METHOD};

/// Appends the Request frame of call `id`: Echo's method with a `size`-byte payload, no
/// deadline (the load measures serving, not timing out).
pub fn write_request(id: u64, size: usize, out: &mut Vec<u8>) {
    let header = FrameHeader::request(Echo::ID, ECHO_METHOD, id);
    let payload: Vec<u8> = (0..size).map(|b| (b % 251) as u8).collect();
    let mut frame = BytesMut::new();
    FrameEncoder::new(FrameLimits::default())
        .encode_frame(&header, &payload, &[], &mut frame)
        .expect("benchmark payloads are at most MAX_PAYLOAD, the default frame body limit");
    out.extend_from_slice(&frame);
}

/// The length of the frame at the start of `buf` if it is whole (`None`: not yet). It must
/// be the Response to call `id` carrying `size` payload bytes; anything else (an Error frame,
/// another call's reply, a broken frame) fails the run.
pub fn reply(buf: &[u8], id: u64, size: usize) -> Result<Option<usize>, BadReply> {
    let limits = FrameLimits::default();
    let head_len = if buf.len() < PREAMBLE_LEN {
        buf.len()
    } else {
        let declared = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
        // The decoder refuses an oversized header itself; the copy stays small either way.
        buf.len()
            .min(PREAMBLE_LEN + declared.min(limits.max_header_len + 1))
    };
    // The decoder works on its own buffer: a copy of the preamble and header only (tens of
    // bytes), so the connection's input is never split.
    let mut head = BytesMut::from(&buf[..head_len]);
    let mut decoder = FrameDecoder::new(limits);
    let bad = |e: corewire_wire::frame::FrameError| BadReply(format!("bad RPC frame: {e}"));
    let Some((payload_len, attachment_len)) = decoder.decode_header(&mut head).map_err(bad)? else {
        return Ok(None);
    };
    let body = head_len - head.len();
    let end = body + payload_len + attachment_len;
    if buf.len() < end {
        return Ok(None);
    }
    let frame = decoder
        .finish(
            Bytes::copy_from_slice(&buf[body..body + payload_len]),
            Bytes::copy_from_slice(&buf[body + payload_len..end]),
        )
        .ok_or_else(|| BadReply("RPC frame body does not match its header".into()))?;
    let h = &frame.header;
    if h.kind == FrameKind::Error {
        return Err(BadReply(format!(
            "call {} failed: {} {}",
            h.correlation_id,
            h.status,
            h.error_message.as_deref().unwrap_or("")
        )));
    }
    if h.kind != FrameKind::Response || h.correlation_id != id {
        return Err(BadReply(format!(
            "expected the Response to call {id}, got {:?} for call {}",
            h.kind, h.correlation_id
        )));
    }
    if frame.payload.len() != size {
        return Err(BadReply(format!(
            "call {id}: echo of {} bytes, sent {size}",
            frame.payload.len()
        )));
    }
    Ok(Some(end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use corewire_wire::frame::StatusCode;
    use corewire_wire::rpc::{error_header, response_header};

    /// The server's side: the reply frame to `request` with `payload`.
    fn answer(request: &FrameHeader, payload: &[u8]) -> Vec<u8> {
        let mut out = BytesMut::new();
        FrameEncoder::new(FrameLimits::default())
            .encode_frame(&response_header(request), payload, &[], &mut out)
            .unwrap();
        out.to_vec()
    }

    #[test]
    fn request_is_a_call_of_echo_with_the_id_and_payload() {
        let mut out = Vec::new();
        write_request(7, 5, &mut out);
        let mut buf = BytesMut::from(&out[..]);
        let frame = FrameDecoder::new(FrameLimits::default())
            .decode(&mut buf)
            .unwrap()
            .unwrap();
        assert!(buf.is_empty(), "one whole frame");
        assert_eq!(frame.header, FrameHeader::request(Echo::ID, ECHO_METHOD, 7));
        assert_eq!(&frame.payload[..], &[0, 1, 2, 3, 4]);
    }

    #[test]
    fn reply_is_whole_only_with_its_body() {
        let frame = answer(&FrameHeader::request(Echo::ID, ECHO_METHOD, 3), b"abcd");
        for cut in 0..frame.len() {
            assert_eq!(reply(&frame[..cut], 3, 4), Ok(None), "cut at {cut}");
        }
        let mut two = frame.clone();
        two.extend_from_slice(&frame);
        assert_eq!(reply(&two, 3, 4), Ok(Some(frame.len())));
    }

    #[test]
    fn reply_to_another_call_or_of_another_size_fails() {
        let frame = answer(&FrameHeader::request(Echo::ID, ECHO_METHOD, 3), b"abcd");
        assert!(reply(&frame, 4, 4).unwrap_err().0.contains("call 4"));
        assert!(reply(&frame, 3, 5).unwrap_err().0.contains("4 bytes"));
    }

    #[test]
    fn error_frame_and_garbage_fail() {
        let request = FrameHeader::request(Echo::ID, ECHO_METHOD, 9);
        let mut err = BytesMut::new();
        FrameEncoder::new(FrameLimits::default())
            .encode_frame(
                &error_header(&request, StatusCode::Unimplemented, "no such service"),
                &[],
                &[],
                &mut err,
            )
            .unwrap();
        let msg = reply(&err, 9, 4).unwrap_err().0;
        assert!(msg.contains("no such service"), "{msg}");
        assert!(reply(b"+OK\r\n", 0, 4).is_err(), "not the RPC framing");
    }
}
