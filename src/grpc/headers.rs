//! Metadata to and from HTTP/2 headers, and the headers and trailers of a gRPC reply.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use corewire_transport::grpc::{encode_message, Code, Encoding};
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::HeaderMap;

use crate::typed::{InvalidMetadata, Metadata};
use crate::Status;

/// gRPC's base64 for `-bin` values: sent unpadded, accepted either way.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// gRPC's header names, made once: a name given as a string is parsed at every use.
pub(super) const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");
pub(super) const GRPC_ACCEPT_ENCODING: HeaderName = HeaderName::from_static("grpc-accept-encoding");
pub(super) const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");

/// Headers that belong to HTTP or gRPC itself, not to the call's metadata.
fn reserved(name: &str) -> bool {
    name.starts_with("grpc-")
        || matches!(
            name,
            "content-type" | "te" | "content-length" | "accept-encoding" | "host" | "connection"
        )
}

/// The custom metadata of a request's headers, as the attachment that carries it to the
/// service ([`Metadata::encode`]'s format), written straight from the headers: no `Metadata`
/// in between, no allocation per entry (a gRPC client sends at least `user-agent`).
pub(super) fn metadata_attachment(headers: &HeaderMap) -> Result<Bytes, InvalidMetadata> {
    let mut out = BytesMut::new();
    for (name, value) in headers {
        let name = name.as_str();
        if reserved(name) {
            continue;
        }
        if name.ends_with("-bin") {
            let value = BASE64
                .decode(value.as_bytes())
                .map_err(|e| InvalidMetadata(format!("metadata {name}: {e}")))?;
            Metadata::encode_received(&mut out, name, &value)?;
        } else {
            Metadata::encode_received(&mut out, name, value.as_bytes())?;
        }
    }
    Ok(out.freeze())
}

/// The custom metadata of a request's headers.
#[cfg(test)]
fn metadata_from(headers: &HeaderMap) -> Result<Metadata, InvalidMetadata> {
    Ok(Metadata::decode(&metadata_attachment(headers)?).expect("an attachment just encoded"))
}

/// `meta` added to `headers`. Metadata keys and text values are valid header names and
/// values by construction.
pub(super) fn add_metadata(headers: &mut HeaderMap, meta: &Metadata) {
    for (key, value) in meta.iter() {
        let Ok(name) = HeaderName::from_bytes(key.as_bytes()) else {
            continue;
        };
        let value = if key.ends_with("-bin") {
            HeaderValue::from_str(&BASE64.encode(value))
        } else {
            HeaderValue::from_bytes(value)
        };
        if let Ok(value) = value {
            headers.append(name, value);
        }
    }
}

/// The headers of a reply that carries messages.
pub(super) fn reply_headers(encoding: Encoding, meta: &Metadata) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(2 + meta.len());
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    if encoding == Encoding::Gzip {
        headers.insert(GRPC_ENCODING, HeaderValue::from_static("gzip"));
    }
    add_metadata(&mut headers, meta);
    headers
}

/// The status of a call's end into `headers` (trailers, or the headers of a trailers-only
/// reply).
pub(super) fn add_status(headers: &mut HeaderMap, result: &Result<(), Status>) {
    let code = match result {
        Ok(()) => Code::Ok,
        Err(status) => Code::of(status),
    };
    headers.insert(
        GRPC_STATUS,
        HeaderValue::from_static(code.as_header_value()),
    );
    if let Err(status) = result {
        let text = encode_message(&Code::message_of(status));
        if let Ok(value) = HeaderValue::from_str(&text) {
            headers.insert(GRPC_MESSAGE, value);
        }
    }
}

/// The trailers that end a reply.
pub(super) fn trailers(result: &Result<(), Status>) -> HeaderMap {
    let mut t = HeaderMap::with_capacity(2);
    add_status(&mut t, result);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_crosses_headers_both_ways() {
        let mut meta = Metadata::new();
        meta.insert("x-user", "alice")
            .insert_bin("token-bin", vec![0u8, 1, 254, 255]);
        let mut headers = reply_headers(Encoding::Identity, &meta);
        assert_eq!(headers["token-bin"], "AAH+/w");
        headers.insert("grpc-timeout", HeaderValue::from_static("1S"));
        headers.insert("te", HeaderValue::from_static("trailers"));
        let back = metadata_from(&headers).unwrap();
        assert_eq!(back, meta);
        // Padded base64 is accepted too.
        let mut padded = HeaderMap::new();
        padded.insert("token-bin", HeaderValue::from_static("AAH+/w=="));
        assert_eq!(
            metadata_from(&padded).unwrap().get_bin("token-bin"),
            Some(&[0u8, 1, 254, 255][..])
        );
        padded.insert("bad-bin", HeaderValue::from_static("***"));
        assert!(metadata_from(&padded).is_err());
        // What the service is handed: the attachment, entries in order, none for HTTP's
        // and gRPC's own headers.
        let mut plain = HeaderMap::new();
        plain.insert("te", HeaderValue::from_static("trailers"));
        assert!(metadata_attachment(&plain).unwrap().is_empty());
        plain.insert("user-agent", HeaderValue::from_static("grpc-x/1"));
        plain.insert("token-bin", HeaderValue::from_static("AAH+/w"));
        let mut expected = Metadata::new();
        expected
            .insert("user-agent", "grpc-x/1")
            .insert_bin("token-bin", vec![0u8, 1, 254, 255]);
        assert_eq!(metadata_attachment(&plain).unwrap(), expected.encode());
        let mut bad = HeaderMap::new();
        bad.insert("x-text", HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
        assert!(
            metadata_attachment(&bad).is_err(),
            "text values are printable ASCII"
        );
    }

    #[test]
    fn statuses_become_trailers_with_their_message() {
        let t = trailers(&Err(Status::NotFound("no user 50% done".into())));
        assert_eq!(t["grpc-status"], "5");
        assert_eq!(t["grpc-message"], "no user 50%25 done");
        let ok = trailers(&Ok(()));
        assert_eq!(ok["grpc-status"], "0");
        assert!(ok.get("grpc-message").is_none());
        let late = trailers(&Err(Status::DeadlineExceeded));
        assert_eq!(late["grpc-status"], "4");
        assert_eq!(late["grpc-message"], "deadline exceeded");
    }
}
