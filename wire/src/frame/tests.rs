//! Codec tests that need crate internals (hand-built wire headers); the
//! property tests live in `transport/tests/`.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use flatbuffers::FlatBufferBuilder;

use super::header_generated::corewire::wire;
use super::*;

fn sample_header() -> FrameHeader {
    FrameHeader {
        kind: FrameKind::Error,
        service_id: 7,
        method_id: 3,
        correlation_id: 0xdead_beef_0000_0001,
        status: StatusCode::Overloaded,
        deadline: Some(Duration::from_micros(1_500)),
        error_message: Some("queue full".into()),
    }
}

fn encode(header: &FrameHeader, payload: &[u8], attachment: &[u8]) -> BytesMut {
    let mut buf = BytesMut::new();
    FrameEncoder::new(FrameLimits::default())
        .encode_frame(header, payload, attachment, &mut buf)
        .unwrap();
    buf
}

/// Preamble + a header built field by field, bypassing the typed encoder, so
/// tests can put values on the wire that the encoder would never produce.
fn raw_frame(fill: impl FnOnce(&mut wire::WireHeaderArgs<'_>)) -> BytesMut {
    let mut fbb = FlatBufferBuilder::new();
    let mut args = wire::WireHeaderArgs::default();
    fill(&mut args);
    let root = wire::WireHeader::create(&mut fbb, &args);
    fbb.finish(root, None);
    let data = fbb.finished_data();
    let mut buf = BytesMut::new();
    buf.put_slice(&preamble::write(data.len() as u32));
    buf.put_slice(data);
    buf
}

fn decoder() -> FrameDecoder {
    FrameDecoder::new(FrameLimits::default())
}

#[test]
fn roundtrip_all_fields() {
    let header = sample_header();
    let mut buf = encode(&header, b"payload", b"attach");
    let frame = decoder().decode(&mut buf).unwrap().unwrap();
    assert_eq!(frame.header, header);
    assert_eq!(frame.payload, &b"payload"[..]);
    assert_eq!(frame.attachment, &b"attach"[..]);
    assert!(buf.is_empty());
}

#[test]
fn roundtrip_minimal_request() {
    let header = FrameHeader::request(0, 0, 0);
    let mut buf = encode(&header, b"", b"");
    let frame = decoder().decode(&mut buf).unwrap().unwrap();
    assert_eq!(frame.header, header);
    assert!(frame.payload.is_empty() && frame.attachment.is_empty());
}

#[test]
fn preamble_layout() {
    let buf = encode(&FrameHeader::request(1, 2, 3), b"xy", b"");
    assert_eq!(&buf[..4], b"CW\x01\x00");
    let header_len = u32::from_le_bytes(buf[4..8].try_into().unwrap()) as usize;
    assert_eq!(buf.len(), PREAMBLE_LEN + header_len + 2);
    assert_eq!(&buf[buf.len() - 2..], b"xy");
}

#[test]
fn vectored_header_matches_contiguous_encoding() {
    let header = sample_header();
    let mut enc = FrameEncoder::new(FrameLimits::default());
    let head = enc.encode_header(&header, 3, 5).unwrap();
    let mut whole = BytesMut::new();
    enc.encode_frame(&header, b"abc", b"defgh", &mut whole)
        .unwrap();
    let mut joined = head.to_vec();
    joined.extend_from_slice(b"abcdefgh");
    assert_eq!(&whole[..], &joined[..]);
}

#[test]
fn encoded_headers_do_not_alias_each_other() {
    let mut enc = FrameEncoder::new(FrameLimits::default());
    let first = enc
        .encode_header(&FrameHeader::request(1, 1, 1), 0, 0)
        .unwrap();
    let snapshot = first.to_vec();
    for id in 2..100 {
        let next = enc
            .encode_header(&FrameHeader::request(9, 9, id), 10, 0)
            .unwrap();
        assert_ne!(next, first);
    }
    assert_eq!(&first[..], &snapshot[..]);
}

#[test]
fn body_is_split_off_without_copying() {
    let mut buf = encode(&sample_header(), b"0123456789", b"abcdef");
    let body_start = buf.len() - 16;
    let base = buf.as_ptr() as usize;
    let frame = decoder().decode(&mut buf).unwrap().unwrap();
    assert_eq!(frame.payload.as_ptr() as usize, base + body_start);
    assert_eq!(frame.attachment.as_ptr() as usize, base + body_start + 10);
}

#[test]
fn several_frames_in_one_buffer() {
    let mut buf = encode(&FrameHeader::request(1, 1, 1), b"a", b"");
    buf.extend_from_slice(&encode(&FrameHeader::request(2, 2, 2), b"bb", b"c"));
    let mut dec = decoder();
    let one = dec.decode(&mut buf).unwrap().unwrap();
    let two = dec.decode(&mut buf).unwrap().unwrap();
    assert_eq!(
        (one.header.correlation_id, two.header.correlation_id),
        (1, 2)
    );
    assert_eq!(two.attachment, Bytes::from_static(b"c"));
    assert_eq!(dec.decode(&mut buf).unwrap(), None);
}

#[test]
fn every_strict_prefix_needs_more_bytes() {
    let full = encode(&sample_header(), b"payload", b"attachment");
    for cut in 0..full.len() {
        let mut buf = BytesMut::from(&full[..cut]);
        assert_eq!(decoder().decode(&mut buf), Ok(None), "cut at {cut}");
    }
}

#[test]
fn bad_magic_detected_from_first_bytes() {
    let mut buf = BytesMut::from(&b"G"[..]);
    assert_eq!(
        decoder().decode(&mut buf),
        Err(FrameError::BadMagic([b'G', 0]))
    );
    let mut buf = BytesMut::from(&b"C"[..]);
    assert_eq!(decoder().decode(&mut buf), Ok(None));
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
    assert_eq!(
        decoder().decode(&mut buf),
        Err(FrameError::BadMagic(*b"GE"))
    );
}

#[test]
fn unsupported_version_and_flags() {
    let mut buf = encode(&FrameHeader::request(1, 1, 1), b"", b"");
    buf[2] = 2;
    assert_eq!(
        decoder().decode(&mut buf),
        Err(FrameError::UnsupportedVersion(2))
    );
    let mut buf = encode(&FrameHeader::request(1, 1, 1), b"", b"");
    buf[3] = 0x80;
    assert_eq!(
        decoder().decode(&mut buf),
        Err(FrameError::UnsupportedFlags(0x80))
    );
}

#[test]
fn header_version_must_match() {
    let mut buf = raw_frame(|a| a.version = 9);
    assert_eq!(
        decoder().decode(&mut buf),
        Err(FrameError::UnsupportedVersion(9))
    );
}

#[test]
fn oversize_header_rejected_from_preamble_alone() {
    let mut buf = BytesMut::from(&preamble::write(1025)[..]);
    assert_eq!(
        decoder().decode(&mut buf),
        Err(FrameError::HeaderTooLarge {
            len: 1025,
            max: 1024
        })
    );
}

#[test]
fn oversize_body_rejected_before_body_arrives() {
    let mut buf = raw_frame(|a| {
        a.payload_len = u32::MAX;
        a.attachment_len = u32::MAX;
    });
    let err = decoder().decode(&mut buf).unwrap_err();
    assert_eq!(
        err,
        FrameError::FrameTooLarge {
            len: 2 * u64::from(u32::MAX),
            max: FrameLimits::DEFAULT_MAX_BODY_LEN
        }
    );
}

#[test]
fn body_at_the_limit_is_accepted() {
    let limits = FrameLimits {
        max_header_len: 1024,
        max_body_len: 10,
    };
    let mut buf = BytesMut::new();
    FrameEncoder::new(limits)
        .encode_frame(&FrameHeader::request(1, 1, 1), b"12345", b"67890", &mut buf)
        .unwrap();
    assert!(FrameDecoder::new(limits)
        .decode(&mut buf)
        .unwrap()
        .is_some());
}

#[test]
fn unknown_kind_and_status_are_typed_errors() {
    let mut buf = raw_frame(|a| a.kind = wire::FrameKind(42));
    assert_eq!(decoder().decode(&mut buf), Err(FrameError::UnknownKind(42)));
    let mut buf = raw_frame(|a| a.status = wire::StatusCode(200));
    assert_eq!(
        decoder().decode(&mut buf),
        Err(FrameError::UnknownStatus(200))
    );
}

#[test]
fn verifier_rejects_garbage_header() {
    let mut buf = BytesMut::from(&preamble::write(16)[..]);
    buf.put_slice(&[0xff; 16]);
    match decoder().decode(&mut buf) {
        Err(FrameError::InvalidHeader(why)) => assert!(!why.is_empty()),
        other => panic!("expected InvalidHeader, got {other:?}"),
    }
}

#[test]
fn empty_header_is_invalid() {
    let mut buf = BytesMut::from(&preamble::write(0)[..]);
    assert!(matches!(
        decoder().decode(&mut buf),
        Err(FrameError::InvalidHeader(_))
    ));
}

#[test]
fn error_message_must_be_utf8() {
    let mut buf = encode(
        &FrameHeader {
            error_message: Some("abcd".into()),
            ..FrameHeader::request(1, 1, 1)
        },
        b"",
        b"",
    );
    let pos = buf.windows(4).position(|w| w == b"abcd").unwrap();
    buf[pos] = 0xff;
    assert!(matches!(
        decoder().decode(&mut buf),
        Err(FrameError::InvalidHeader(_))
    ));
}

#[test]
fn decoder_stays_failed_after_an_error() {
    let mut dec = decoder();
    let mut bad = BytesMut::from(&b"XX"[..]);
    let err = dec.decode(&mut bad).unwrap_err();
    let mut good = encode(&FrameHeader::request(1, 1, 1), b"", b"");
    assert_eq!(dec.decode(&mut good), Err(err));
}

#[test]
fn encoder_enforces_limits() {
    let limits = FrameLimits {
        max_header_len: 64,
        max_body_len: 4,
    };
    let mut enc = FrameEncoder::new(limits);
    let long = FrameHeader {
        error_message: Some("x".repeat(100)),
        ..FrameHeader::request(1, 1, 1)
    };
    assert!(matches!(
        enc.encode_header(&long, 0, 0),
        Err(FrameError::HeaderTooLarge { max: 64, .. })
    ));
    assert_eq!(
        enc.encode_header(&FrameHeader::request(1, 1, 1), 3, 2),
        Err(FrameError::FrameTooLarge { len: 5, max: 4 })
    );
    // The encoder is still usable after refusing.
    assert!(enc
        .encode_header(&FrameHeader::request(1, 1, 1), 2, 2)
        .is_ok());
}

#[test]
fn deadline_travels_in_whole_microseconds() {
    let header = FrameHeader::request(1, 1, 1).with_deadline(Duration::from_nanos(2_999));
    let mut buf = encode(&header, b"", b"");
    let frame = decoder().decode(&mut buf).unwrap().unwrap();
    assert_eq!(frame.header.deadline, Some(Duration::from_micros(2)));

    let header = FrameHeader::request(1, 1, 1).with_deadline(Duration::MAX);
    let mut buf = encode(&header, b"", b"");
    let frame = decoder().decode(&mut buf).unwrap().unwrap();
    assert_eq!(frame.header.deadline, Some(Duration::from_micros(u64::MAX)));
}

#[test]
fn zero_deadline_is_distinct_from_none() {
    let header = FrameHeader::request(1, 1, 1).with_deadline(Duration::ZERO);
    let mut buf = encode(&header, b"", b"");
    let frame = decoder().decode(&mut buf).unwrap().unwrap();
    assert_eq!(frame.header.deadline, Some(Duration::ZERO));
}

#[test]
fn errors_display_their_cause() {
    let text = FrameError::HeaderTooLarge {
        len: 2000,
        max: 1024,
    }
    .to_string();
    assert!(text.contains("2000") && text.contains("1024"), "{text}");
    let text = FrameError::BadMagic(*b"GE").to_string();
    assert!(text.contains("47") && text.contains("CW"), "{text}");
}

#[test]
fn a_header_taken_alone_leaves_the_body_to_the_transport() {
    let header = sample_header();
    // Only the header and payload are in the stream; the attachment arrives out of band,
    // and the next frame's bytes follow at once.
    let full = encode(&header, b"pay", b"0123456789");
    let mut buf = BytesMut::from(&full[..full.len() - 10]);
    buf.extend_from_slice(&encode(&header, b"next", b"")[..]);
    let mut dec = FrameDecoder::new(FrameLimits::default());
    assert_eq!(dec.decode_header(&mut buf).unwrap(), Some((3, 10)));
    // Asked again before finishing: the same pending frame, nothing more taken.
    let left = buf.len();
    assert_eq!(dec.decode_header(&mut buf).unwrap(), Some((3, 10)));
    assert_eq!(buf.len(), left);
    let payload = buf.split_to(3).freeze();
    assert!(dec
        .finish(payload.clone(), Bytes::from_static(b"short"))
        .is_none());
    let frame = dec
        .finish(payload, Bytes::from_static(b"0123456789"))
        .unwrap();
    assert_eq!(frame.header, header);
    assert_eq!(&frame.attachment[..], b"0123456789");
    // The stream carries on with the next frame.
    let next = dec.decode(&mut buf).unwrap().unwrap();
    assert_eq!(&next.payload[..], b"next");
    assert!(dec.finish(Bytes::new(), Bytes::new()).is_none());
}

/// `in_frame` tells a transport at end-of-stream whether the peer stopped inside a frame,
/// also right after a header, when no byte of the body is buffered.
#[test]
fn in_frame_from_the_header_until_the_body_is_whole() {
    let wire = encode(&sample_header(), b"payload", b"");
    let body_at = wire.len() - b"payload".len();
    let mut dec = decoder();
    let mut buf = BytesMut::from(&wire[..body_at]);
    assert!(!dec.in_frame());
    assert_eq!(dec.decode(&mut buf).unwrap(), None);
    assert!(dec.in_frame() && buf.is_empty());
    buf.extend_from_slice(&wire[body_at..]);
    let frame = dec.decode(&mut buf).unwrap().unwrap();
    assert_eq!(frame.payload, &b"payload"[..]);
    assert!(frame.attachment.is_empty());
    assert!(!dec.in_frame());
}
