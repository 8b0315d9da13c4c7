//! corewire's RPC framing served on tokio (`echo_tokio --rpc`): the bench's Echo service
//! answered the way `rpc_corewire server` answers it (the wire crate's codec, a Response
//! with the request's ids and payload, an Error frame for any other service or method), so
//! the per-core RPC comparison runs the same bytes against both runtimes. [`RpcEcho`] is the
//! protocol, without I/O; [`serve`] is the connection glue.

use std::io;

use bytes::BytesMut;
use corewire::Service;
use corewire_wire::frame::{
    FrameDecoder, FrameEncoder, FrameError, FrameKind, FrameLimits, StatusCode,
};
use corewire_wire::rpc::{error_header, response_header};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::corewire_rpc::{Echo, ECHO_METHOD};

/// Bytes asked of each `read`.
const READ_CHUNK: usize = 64 * 1024;
/// Replies queued past this are written before more requests are decoded, so a client that
/// pipelines without reading cannot grow the output without bound.
const MAX_QUEUED_OUT: usize = 1 << 20;

/// One connection's side of the protocol: requests in, replies out.
#[derive(Debug)]
pub struct RpcEcho {
    decoder: FrameDecoder,
    encoder: FrameEncoder,
}

impl Default for RpcEcho {
    fn default() -> Self {
        RpcEcho {
            decoder: FrameDecoder::new(FrameLimits::default()),
            encoder: FrameEncoder::new(FrameLimits::default()),
        }
    }
}

impl RpcEcho {
    /// Decodes the whole frames in `input` and appends their replies to `out`, stopping once
    /// `out` holds `MAX_QUEUED_OUT` bytes (the rest stays in `input`). A broken frame is an
    /// error: the connection must close (the stream cannot be resynchronised).
    pub fn answer(&mut self, input: &mut BytesMut, out: &mut BytesMut) -> Result<(), FrameError> {
        while out.len() < MAX_QUEUED_OUT {
            let Some(frame) = self.decoder.decode(input)? else {
                return Ok(());
            };
            let h = &frame.header;
            let reply = match h.kind {
                FrameKind::Request if h.service_id == Echo::ID && h.method_id == ECHO_METHOD => {
                    response_header(h)
                }
                FrameKind::Request => error_header(h, StatusCode::Unimplemented, "no such method"),
                // Calls are answered as they are read, so there is never one left to cancel;
                // other kinds are a client's only.
                _ => continue,
            };
            let payload = if reply.kind == FrameKind::Response {
                &frame.payload[..]
            } else {
                &[]
            };
            self.encoder.encode_frame(&reply, payload, &[], out)?;
        }
        Ok(())
    }
}

/// Serves one connection until the peer closes it or breaks the framing.
pub async fn serve(mut stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut rpc = RpcEcho::default();
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut out = BytesMut::new();
    loop {
        input.reserve(READ_CHUNK);
        if stream.read_buf(&mut input).await? == 0 {
            return Ok(());
        }
        loop {
            rpc.answer(&mut input, &mut out)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            if out.is_empty() {
                break;
            }
            // All replies of one read leave in one write, as corewire's server batches them.
            stream.write_all(&out).await?;
            out.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corewire_wire::frame::FrameHeader;

    fn call(service: u32, method: u32, id: u64) -> FrameHeader {
        FrameHeader::request(service, method, id)
    }

    fn frame(header: &FrameHeader, payload: &[u8], out: &mut BytesMut) {
        FrameEncoder::new(FrameLimits::default())
            .encode_frame(header, payload, &[], out)
            .unwrap();
    }

    fn decode_all(mut buf: BytesMut) -> Vec<corewire_wire::frame::Frame> {
        let mut d = FrameDecoder::new(FrameLimits::default());
        let mut frames = Vec::new();
        while let Some(f) = d.decode(&mut buf).unwrap() {
            frames.push(f);
        }
        assert!(buf.is_empty(), "only whole frames");
        frames
    }

    #[test]
    fn echoes_each_call_in_order_and_keeps_a_partial_frame() {
        let mut input = BytesMut::new();
        frame(&call(Echo::ID, ECHO_METHOD, 1), b"one", &mut input);
        frame(&call(Echo::ID, ECHO_METHOD, 2), b"two!", &mut input);
        let mut third = BytesMut::new();
        frame(&call(Echo::ID, ECHO_METHOD, 3), b"3", &mut third);
        input.extend_from_slice(&third[..third.len() - 1]);
        let (mut rpc, mut out) = (RpcEcho::default(), BytesMut::new());
        rpc.answer(&mut input, &mut out).unwrap();
        let replies = decode_all(out.split());
        let got: Vec<_> = replies
            .iter()
            .map(|f| (f.header.kind, f.header.correlation_id, &f.payload[..]))
            .collect();
        assert_eq!(
            got,
            [
                (FrameKind::Response, 1, &b"one"[..]),
                (FrameKind::Response, 2, &b"two!"[..])
            ]
        );
        input.extend_from_slice(&third[third.len() - 1..]);
        rpc.answer(&mut input, &mut out).unwrap();
        assert_eq!(decode_all(out)[0].header.correlation_id, 3);
    }

    #[test]
    fn unknown_method_gets_an_error_frame() {
        let mut input = BytesMut::new();
        frame(&call(Echo::ID, ECHO_METHOD + 1, 5), b"x", &mut input);
        let mut out = BytesMut::new();
        RpcEcho::default().answer(&mut input, &mut out).unwrap();
        let reply = &decode_all(out)[0];
        assert_eq!(reply.header.kind, FrameKind::Error);
        assert_eq!(reply.header.status, StatusCode::Unimplemented);
        assert_eq!(reply.header.correlation_id, 5);
    }

    #[test]
    fn broken_framing_is_an_error() {
        let mut input = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
        assert!(RpcEcho::default()
            .answer(&mut input, &mut BytesMut::new())
            .is_err());
    }
}
