//! Message compression: gzip, the one encoding every gRPC implementation speaks.
//! Decompression is bounded: a message that inflates past the limit is refused, so a small
//! compressed message cannot make the server allocate without end (a zip bomb).

use std::io::{Read, Write};

use bytes::Bytes;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

/// A `grpc-encoding` this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Encoding {
    /// No compression.
    Identity,
    /// gzip (RFC 1952).
    Gzip,
}

impl Encoding {
    /// The encoding a `grpc-encoding` value names; `None` for one not supported here.
    pub fn parse(value: &[u8]) -> Option<Encoding> {
        match value.trim_ascii() {
            b"identity" => Some(Encoding::Identity),
            b"gzip" => Some(Encoding::Gzip),
            _ => None,
        }
    }

    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
        }
    }

    /// What a server sends as its `grpc-accept-encoding`.
    pub const ACCEPTED: &'static str = "gzip,identity";
}

/// Whether a `grpc-accept-encoding` list names `encoding`.
pub fn accepts(accept_encoding: &[u8], encoding: Encoding) -> bool {
    accept_encoding
        .split(|&b| b == b',')
        .any(|e| Encoding::parse(e) == Some(encoding))
}

/// `data` gzip-compressed.
pub fn compress_gzip(data: &[u8]) -> Bytes {
    let mut out = GzEncoder::new(Vec::with_capacity(data.len() / 2 + 32), Compression::fast());
    out.write_all(data)
        .and_then(|()| out.try_finish())
        .expect("compressing into a Vec cannot fail");
    Bytes::from(out.finish().expect("finished above"))
}

/// `data` gunzipped; `Err` when it is not gzip or inflates past `limit` bytes.
pub fn decompress_gzip(data: &[u8], limit: usize) -> Result<Bytes, String> {
    let mut out = Vec::with_capacity((data.len() * 2).min(limit));
    let read = GzDecoder::new(data)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("bad gzip message: {e}"))?;
    if read > limit {
        return Err(format!(
            "gzip message inflates past the limit of {limit} bytes"
        ));
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_round_trips() {
        let data = b"hello hello hello hello hello".repeat(20);
        let packed = compress_gzip(&data);
        assert!(packed.len() < data.len());
        assert_eq!(
            &decompress_gzip(&packed, data.len()).unwrap()[..],
            &data[..]
        );
    }

    #[test]
    fn a_bomb_and_garbage_are_refused() {
        let bomb = compress_gzip(&vec![0u8; 1 << 20]);
        assert!(bomb.len() < 16 << 10);
        assert!(decompress_gzip(&bomb, 64 << 10)
            .unwrap_err()
            .contains("limit"));
        assert!(decompress_gzip(b"not gzip at all", 1024).is_err());
    }

    #[test]
    fn accept_lists_are_parsed() {
        assert!(accepts(b"identity,deflate,gzip", Encoding::Gzip));
        assert!(accepts(b"gzip", Encoding::Gzip));
        assert!(accepts(b" identity , gzip ", Encoding::Gzip));
        assert!(!accepts(b"identity,deflate", Encoding::Gzip));
        assert!(!accepts(b"", Encoding::Gzip));
        assert_eq!(Encoding::parse(b"snappy"), None);
    }
}
