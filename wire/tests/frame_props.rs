//! Property tests for the frame codec: roundtrips under arbitrary input
//! splits, and robustness against arbitrary or corrupted bytes.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire_wire::frame::{
    Frame, FrameDecoder, FrameEncoder, FrameError, FrameHeader, FrameKind, FrameLimits, StatusCode,
    PREAMBLE_LEN,
};
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = FrameKind> {
    prop_oneof![
        Just(FrameKind::Request),
        Just(FrameKind::Response),
        Just(FrameKind::Error),
        Just(FrameKind::Cancel),
        Just(FrameKind::StreamItem),
        Just(FrameKind::Credit),
    ]
}

fn status() -> impl Strategy<Value = StatusCode> {
    prop_oneof![
        Just(StatusCode::Ok),
        Just(StatusCode::UnknownService),
        Just(StatusCode::UnknownMethod),
        Just(StatusCode::BadRequest),
        Just(StatusCode::Internal),
        Just(StatusCode::Overloaded),
        Just(StatusCode::DeadlineExceeded),
        Just(StatusCode::Cancelled),
        Just(StatusCode::Failed),
        Just(StatusCode::NotFound),
        Just(StatusCode::Unavailable),
        Just(StatusCode::Unauthenticated),
        Just(StatusCode::Unimplemented),
    ]
}

fn header() -> impl Strategy<Value = FrameHeader> {
    (
        kind(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        status(),
        // Whole microseconds: the wire's precision, so roundtrips are exact.
        proptest::option::of(any::<u64>().prop_map(Duration::from_micros)),
        proptest::option::of("\\PC{0,40}"),
    )
        .prop_map(
            |(kind, service_id, method_id, correlation_id, status, deadline, error_message)| {
                FrameHeader {
                    kind,
                    service_id,
                    method_id,
                    correlation_id,
                    status,
                    deadline,
                    error_message,
                }
            },
        )
}

type Parts = (FrameHeader, Vec<u8>, Vec<u8>);

fn frame_parts() -> impl Strategy<Value = Parts> {
    (
        header(),
        proptest::collection::vec(any::<u8>(), 0..300),
        proptest::collection::vec(any::<u8>(), 0..300),
    )
}

/// Chunk sizes to feed input with; small sizes dominate so 1-byte feeds and
/// splits inside the preamble and header are common.
fn chunking() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(prop_oneof![4 => 1usize..4, 1 => 1usize..600], 1..64)
}

fn encode_all(parts: &[Parts]) -> Vec<u8> {
    let mut enc = FrameEncoder::new(FrameLimits::default());
    let mut wire = BytesMut::new();
    for (header, payload, attachment) in parts {
        enc.encode_frame(header, payload, attachment, &mut wire)
            .unwrap();
    }
    wire.to_vec()
}

/// Feeds `wire` in chunks (cycling through `chunks`), draining frames after
/// each chunk. Stops at the first error.
fn feed(
    dec: &mut FrameDecoder,
    wire: &[u8],
    chunks: &[usize],
) -> (Vec<Frame>, Option<FrameError>, BytesMut) {
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut pos = 0;
    for &size in chunks.iter().cycle() {
        if pos >= wire.len() {
            break;
        }
        let end = (pos + size).min(wire.len());
        buf.extend_from_slice(&wire[pos..end]);
        pos = end;
        loop {
            match dec.decode(&mut buf) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(err) => return (frames, Some(err), buf),
            }
        }
    }
    (frames, None, buf)
}

proptest! {
    #[test]
    fn roundtrip_with_arbitrary_splits(
        parts in proptest::collection::vec(frame_parts(), 1..6),
        chunks in chunking(),
    ) {
        let wire = encode_all(&parts);
        let mut dec = FrameDecoder::new(FrameLimits::default());
        let (frames, err, rest) = feed(&mut dec, &wire, &chunks);
        prop_assert_eq!(err, None);
        prop_assert!(rest.is_empty());
        prop_assert_eq!(frames.len(), parts.len());
        for (frame, (header, payload, attachment)) in frames.iter().zip(&parts) {
            prop_assert_eq!(&frame.header, header);
            prop_assert_eq!(&frame.payload[..], &payload[..]);
            prop_assert_eq!(&frame.attachment[..], &attachment[..]);
        }
    }

    #[test]
    fn one_byte_feeds_roundtrip(parts in proptest::collection::vec(frame_parts(), 1..3)) {
        let wire = encode_all(&parts);
        let mut dec = FrameDecoder::new(FrameLimits::default());
        let (frames, err, _) = feed(&mut dec, &wire, &[1]);
        prop_assert_eq!(err, None);
        let headers: Vec<_> = frames.into_iter().map(|f| f.header).collect();
        let expected: Vec<_> = parts.into_iter().map(|p| p.0).collect();
        prop_assert_eq!(headers, expected);
    }

    #[test]
    fn vectored_encoding_decodes_identically(parts in frame_parts()) {
        let (header, payload, attachment) = &parts;
        let mut enc = FrameEncoder::new(FrameLimits::default());
        let head = enc.encode_header(header, payload.len(), attachment.len()).unwrap();
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&head);
        buf.extend_from_slice(payload);
        buf.extend_from_slice(attachment);
        let frame = FrameDecoder::new(FrameLimits::default()).decode(&mut buf).unwrap().unwrap();
        prop_assert_eq!(&frame.header, header);
        prop_assert_eq!(frame.payload, Bytes::from(payload.clone()));
        prop_assert_eq!(frame.attachment, Bytes::from(attachment.clone()));
    }

    #[test]
    fn truncated_frame_waits_for_more(parts in frame_parts(), cut in any::<prop::sample::Index>()) {
        let wire = encode_all(std::slice::from_ref(&parts));
        let cut = cut.index(wire.len());
        let mut buf = BytesMut::from(&wire[..cut]);
        let mut dec = FrameDecoder::new(FrameLimits::default());
        prop_assert_eq!(dec.decode(&mut buf), Ok(None));
        // The rest arrives later: the same decoder completes the frame.
        buf.extend_from_slice(&wire[cut..]);
        let frame = dec.decode(&mut buf).unwrap().unwrap();
        prop_assert_eq!(frame.header, parts.0);
    }

    #[test]
    fn garbage_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        chunks in chunking(),
    ) {
        let mut dec = FrameDecoder::new(FrameLimits::default());
        // Either an error, or frames + a wait for more: both fine, no panic.
        let (frames, err, mut rest) = feed(&mut dec, &bytes, &chunks);
        if bytes.len() >= 2 && bytes[..2] != *b"CW" {
            prop_assert!(frames.is_empty());
            prop_assert!(matches!(err, Some(FrameError::BadMagic(_))));
        }
        if let Some(err) = err {
            // The stream is desynchronised for good: the error sticks.
            prop_assert_eq!(dec.decode(&mut rest), Err(err));
        }
    }

    #[test]
    fn garbage_behind_a_valid_preamble_never_panics(
        header_len in 0u32..1100,
        bytes in proptest::collection::vec(any::<u8>(), 0..1200),
        chunks in chunking(),
    ) {
        let mut wire = b"CW\x01\x00".to_vec();
        wire.extend_from_slice(&header_len.to_le_bytes());
        wire.extend_from_slice(&bytes);
        let mut dec = FrameDecoder::new(FrameLimits::default());
        let (_, err, _) = feed(&mut dec, &wire, &chunks);
        if header_len > 1024 {
            prop_assert_eq!(err, Some(FrameError::HeaderTooLarge { len: header_len as usize, max: 1024 }));
        }
    }

    #[test]
    fn corrupted_frames_never_panic(
        parts in frame_parts(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        chunks in chunking(),
    ) {
        let mut wire = encode_all(std::slice::from_ref(&parts));
        for (at, value) in flips {
            let i = at.index(wire.len());
            wire[i] = value;
        }
        let mut dec = FrameDecoder::new(FrameLimits::default());
        let (frames, _, _) = feed(&mut dec, &wire, &chunks);
        // Whatever decoded must still respect the limits.
        for frame in frames {
            prop_assert!(frame.payload.len() + frame.attachment.len() <= FrameLimits::DEFAULT_MAX_BODY_LEN);
        }
    }

    #[test]
    fn oversize_body_rejected_before_buffering(
        header in header(),
        max_body_len in 0usize..1000,
        payload_len in 0usize..1500,
        attachment_len in 0usize..1500,
    ) {
        let limits = FrameLimits::new(1024, max_body_len);
        let head = FrameEncoder::new(FrameLimits::default())
            .encode_header(&header, payload_len, attachment_len)
            .unwrap();
        // Only preamble + header: the body has not arrived at all.
        let mut buf = BytesMut::from(&head[..]);
        let result = FrameDecoder::new(limits).decode(&mut buf);
        let body = payload_len + attachment_len;
        if body > max_body_len {
            prop_assert_eq!(result, Err(FrameError::FrameTooLarge { len: body as u64, max: max_body_len }));
            // Nothing was consumed or grown towards the oversize body.
            prop_assert_eq!(buf.len(), head.len());
            prop_assert!(buf.capacity() < head.len() + body);
        } else if body == 0 {
            // An empty body is all there: the frame is whole with its header.
            let frame = result.unwrap().expect("a frame with an empty body is complete");
            prop_assert!(frame.payload.is_empty() && frame.attachment.is_empty());
            prop_assert_eq!(buf.len(), 0);
        } else {
            prop_assert_eq!(result, Ok(None));
            prop_assert_eq!(buf.len(), 0, "preamble + header consumed");
        }
    }

    #[test]
    fn oversize_header_rejected_from_preamble(
        header in header(),
        max_header_len in 0usize..200,
    ) {
        let head = FrameEncoder::new(FrameLimits::default()).encode_header(&header, 0, 0).unwrap();
        let header_len = head.len() - PREAMBLE_LEN;
        let limits = FrameLimits::new(max_header_len, 0);
        let mut buf = BytesMut::from(&head[..PREAMBLE_LEN]);
        let result = FrameDecoder::new(limits).decode(&mut buf);
        if header_len > max_header_len {
            prop_assert_eq!(result, Err(FrameError::HeaderTooLarge { len: header_len, max: max_header_len }));
        } else {
            prop_assert_eq!(result, Ok(None));
        }
    }
}
