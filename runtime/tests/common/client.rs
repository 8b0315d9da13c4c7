//! Clients of the echo fixture: blocking ones on plain threads (the tests' "outside world")
//! and async helpers for clients running on a shard.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire_runtime::net::TcpStream as ShardStream;

use super::echo::PREFIX_LEN;

/// Upper bound on any single blocking read or write: a hung test fails instead of hanging.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// `payload` with its length prefix.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Deterministic bytes that differ with `seed` and position, so shifted or mixed-up data
/// shows up as a mismatch.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A blocking client speaking the echo framing.
pub struct FramedClient {
    pub stream: TcpStream,
}

impl FramedClient {
    pub fn connect(addr: SocketAddr) -> io::Result<FramedClient> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(FramedClient { stream })
    }

    pub fn send_frame(&mut self, payload: &[u8]) -> io::Result<()> {
        self.stream.write_all(&frame(payload))
    }

    pub fn read_frame(&mut self) -> io::Result<Vec<u8>> {
        let mut prefix = [0u8; PREFIX_LEN];
        self.stream.read_exact(&mut prefix)?;
        let mut payload = vec![0u8; u32::from_le_bytes(prefix) as usize];
        self.stream.read_exact(&mut payload)?;
        Ok(payload)
    }

    /// One round trip; errors if the echo differs from what was sent.
    pub fn echo(&mut self, payload: &[u8]) -> io::Result<()> {
        self.send_frame(payload)?;
        let got = self.read_frame()?;
        if got != payload {
            return Err(io::Error::other(format!(
                "echo mismatch: sent {} bytes, got {} bytes back",
                payload.len(),
                got.len()
            )));
        }
        Ok(())
    }

    /// Read until the server closes. Returns how many bytes arrived first; a reset counts as
    /// a close (the server may close with our bytes still unread, which the kernel turns
    /// into RST).
    pub fn read_until_closed(&mut self) -> io::Result<usize> {
        let mut total = 0;
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Ok(total),
                Ok(n) => total += n,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(total),
                Err(e) => return Err(e),
            }
        }
    }

    pub fn shutdown_write(&self) -> io::Result<()> {
        self.stream.shutdown(Shutdown::Write)
    }
}

/// Read one echo frame on a shard. `buf` carries bytes across calls (pipelined replies).
pub async fn read_frame_on_shard(stream: &ShardStream, buf: &mut BytesMut) -> io::Result<Bytes> {
    loop {
        if buf.len() >= PREFIX_LEN {
            let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if buf.len() >= PREFIX_LEN + len {
                let mut whole = buf.split_to(PREFIX_LEN + len);
                return Ok(whole.split_off(PREFIX_LEN).freeze());
            }
            buf.reserve(PREFIX_LEN + len - buf.len());
        }
        let (res, b) = stream.recv(std::mem::take(buf), 64 * 1024).await;
        *buf = b;
        if res? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
}

/// One round trip from a shard.
pub async fn echo_on_shard(
    stream: &ShardStream,
    buf: &mut BytesMut,
    payload: &[u8],
) -> io::Result<()> {
    stream.send_all(Bytes::from(frame(payload))).await?;
    let got = read_frame_on_shard(stream, buf).await?;
    if got != payload {
        return Err(io::Error::other(format!(
            "echo mismatch: sent {} bytes, got {} bytes back",
            payload.len(),
            got.len()
        )));
    }
    Ok(())
}
