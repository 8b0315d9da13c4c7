//! `header_codec` held to the flatbuffers generated code: what the builder writes reads back
//! the same by hand, what the hand writer writes passes the generated verifier and reads back
//! the same there, and damaged bytes are refused the way the verifier refuses them, never
//! with a panic.

use std::time::Duration;

use flatbuffers::{FlatBufferBuilder, VerifierOptions};
use proptest::prelude::*;

use super::header::{BodyLens, FrameHeader, FrameKind, StatusCode};
use super::header_codec;
use super::header_generated::corewire::wire;
use super::FrameError;

const KINDS: [FrameKind; 6] = [
    FrameKind::Request,
    FrameKind::Response,
    FrameKind::Error,
    FrameKind::Cancel,
    FrameKind::StreamItem,
    FrameKind::Credit,
];

fn arb_header() -> impl Strategy<Value = (FrameHeader, u32, u32)> {
    (
        (
            0..KINDS.len(),
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            0..19u8,
        ),
        proptest::option::of(any::<u64>()),
        proptest::option::of(".{0,40}"),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |((kind, service_id, method_id, correlation_id, status), deadline, message, p, a)| {
                let header = FrameHeader {
                    kind: KINDS[kind],
                    service_id,
                    method_id,
                    correlation_id,
                    status: StatusCode::from_code(status).unwrap(),
                    deadline: deadline.map(Duration::from_micros),
                    error_message: message,
                };
                (header, p, a)
            },
        )
}

/// The generated builder's bytes for a header (`force_defaults` writes every scalar).
fn built(header: &FrameHeader, payload: u32, attachment: u32, force_defaults: bool) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::new();
    fbb.force_defaults(force_defaults);
    let error_message = header
        .error_message
        .as_deref()
        .map(|m| fbb.create_string(m));
    let args = wire::WireHeaderArgs {
        version: super::VERSION,
        kind: wire::FrameKind(header.kind.code()),
        service_id: header.service_id,
        method_id: header.method_id,
        correlation_id: header.correlation_id,
        status: wire::StatusCode(header.status.code()),
        payload_len: payload,
        attachment_len: attachment,
        deadline_us: header.deadline.map(|d| d.as_micros() as u64),
        error_message,
    };
    let root = wire::WireHeader::create(&mut fbb, &args);
    fbb.finish(root, None);
    fbb.finished_data().to_vec()
}

fn written(header: &FrameHeader, payload: u32, attachment: u32) -> Vec<u8> {
    let mut out = Vec::new();
    header_codec::write(header, payload, attachment, &mut out);
    assert_eq!(out.len(), header_codec::encoded_len(header));
    out
}

/// The verifier options the decoder used before `header_codec`.
fn verifier() -> VerifierOptions {
    VerifierOptions {
        max_depth: 2,
        max_tables: 1,
        max_apparent_size: 1 << 20,
        ignore_missing_null_terminator: false,
    }
}

/// What the generated code makes of `bytes`: verified, then read through its accessors.
fn oracle(bytes: &[u8]) -> Option<(FrameHeader, BodyLens)> {
    let w = flatbuffers::root_with_opts::<wire::WireHeader>(&verifier(), bytes).ok()?;
    let header = FrameHeader {
        kind: FrameKind::from_code(w.kind().0)?,
        service_id: w.service_id(),
        method_id: w.method_id(),
        correlation_id: w.correlation_id(),
        status: StatusCode::from_code(w.status().0)?,
        deadline: w.deadline_us().map(Duration::from_micros),
        error_message: w.error_message().map(str::to_owned),
    };
    (w.version() == super::VERSION).then_some(())?;
    let lens = BodyLens {
        payload: w.payload_len(),
        attachment: w.attachment_len(),
    };
    Some((header, lens))
}

proptest! {
    #[test]
    fn reads_what_the_generated_builder_writes(
        (header, p, a) in arb_header(),
        force in any::<bool>(),
    ) {
        let bytes = built(&header, p, a, force);
        let (read, lens) = header_codec::read(&bytes).unwrap();
        prop_assert_eq!(read, header);
        prop_assert_eq!(lens, BodyLens { payload: p, attachment: a });
    }

    #[test]
    fn the_generated_code_reads_what_it_writes((header, p, a) in arb_header()) {
        let bytes = written(&header, p, a);
        let expected = (header.clone(), BodyLens { payload: p, attachment: a });
        prop_assert_eq!(oracle(&bytes), Some(expected.clone()));
        prop_assert_eq!(header_codec::read(&bytes).unwrap(), expected);
    }

    /// Any damage: the hand reader accepts exactly what the verifier accepts (and reads the
    /// same values) and refuses the rest; it never panics.
    #[test]
    fn damaged_headers_are_judged_like_the_verifier(
        (header, p, a) in arb_header(),
        builder in any::<bool>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let mut bytes = if builder { built(&header, p, a, false) } else { written(&header, p, a) };
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        let ours = header_codec::read(&bytes);
        match oracle(&bytes) {
            Some(theirs) => prop_assert_eq!(ours, Ok(theirs)),
            // Refused there: refused here too, unless only the version, kind or status is
            // unknown (a typed error here, a `None` from `oracle`).
            None => prop_assert!(ours.is_err(), "accepted what the verifier refuses: {ours:?}"),
        }
    }
}

proptest! {
    /// The shortcut for the writer's own layouts reads what following the offsets reads,
    /// also when the bytes after the prefix are damaged.
    #[test]
    fn the_fixed_layout_shortcut_agrees_with_the_general_reader(
        (header, p, a) in arb_header(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    ) {
        let mut bytes = written(&FrameHeader { error_message: None, ..header }, p, a);
        for (at, value) in flips {
            let i = 32 + at.index(bytes.len() - 32);
            bytes[i] = value;
        }
        prop_assert_eq!(header_codec::read(&bytes), header_codec::read_any(&bytes));
    }
}

#[test]
fn status_and_kind_codes_are_the_schemas() {
    for code in 0..=u8::MAX {
        let status = StatusCode::from_code(code);
        let known = wire::StatusCode(code).variant_name().is_some();
        assert_eq!(status.is_some(), known, "status {code}");
        if let Some(s) = status {
            assert_eq!(s.code(), code);
            assert_eq!(
                Some(format!("{:?}", s).as_str()),
                wire::StatusCode(code).variant_name()
            );
        }
        let kind = FrameKind::from_code(code);
        assert_eq!(
            kind.is_some(),
            wire::FrameKind(code).variant_name().is_some()
        );
        if let Some(k) = kind {
            assert_eq!(k.code(), code);
            assert_eq!(
                Some(format!("{:?}", k).as_str()),
                wire::FrameKind(code).variant_name()
            );
        }
    }
}

#[test]
fn the_common_header_is_64_bytes() {
    let header = FrameHeader::request(1, 2, 3);
    assert_eq!(written(&header, 64, 0).len(), 64);
    let with_deadline = header.with_deadline(Duration::from_millis(5));
    assert_eq!(written(&with_deadline, 64, 0).len(), 72);
}

#[test]
fn refusals_name_the_problem() {
    let mut bytes = written(&FrameHeader::request(1, 2, 3), 0, 0);
    bytes[..4].copy_from_slice(&4096u32.to_le_bytes()); // the table past the end
    match header_codec::read(&bytes) {
        Err(FrameError::InvalidHeader(why)) => assert!(why.contains("out of bounds"), "{why}"),
        other => panic!("expected InvalidHeader, got {other:?}"),
    }
}
