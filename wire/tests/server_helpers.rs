use std::time::{Duration, Instant};

use bytes::BytesMut;
use corewire_wire::frame::{
    FrameDecoder, FrameEncoder, FrameHeader, FrameKind, FrameLimits, StatusCode,
};
use corewire_wire::rpc::{
    check_deadline, error_header, request_deadline, request_header, response_header, Status,
    MAX_ERROR_MESSAGE_LEN,
};

fn request() -> FrameHeader {
    FrameHeader::request(4, 9, 77).with_deadline(Duration::from_millis(5))
}

#[test]
fn response_mirrors_request_identity() {
    let resp = response_header(&request());
    assert_eq!(resp.kind, FrameKind::Response);
    assert_eq!(
        (resp.service_id, resp.method_id, resp.correlation_id),
        (4, 9, 77)
    );
    assert_eq!(resp.status, StatusCode::Ok);
    assert_eq!((resp.deadline, resp.error_message), (None, None));
}

#[test]
fn error_header_sets_status_and_message() {
    let err = error_header(&request(), StatusCode::BadRequest, "bad field");
    assert_eq!(err.kind, FrameKind::Error);
    assert_eq!(err.correlation_id, 77);
    assert_eq!(err.status, StatusCode::BadRequest);
    assert_eq!(err.error_message.as_deref(), Some("bad field"));
    assert_eq!(
        error_header(&request(), StatusCode::Internal, "").error_message,
        None
    );
}

#[test]
fn error_header_never_claims_ok() {
    assert_eq!(
        error_header(&request(), StatusCode::Ok, "x").status,
        StatusCode::Internal
    );
}

#[test]
fn long_messages_are_cut_at_a_char_boundary_and_still_encode() {
    // 3-byte chars so the limit falls inside one.
    let msg = "€".repeat(MAX_ERROR_MESSAGE_LEN);
    let header = error_header(&request(), StatusCode::Internal, &msg);
    let kept = header.error_message.as_deref().unwrap();
    assert!(kept.len() <= MAX_ERROR_MESSAGE_LEN && kept.len() > MAX_ERROR_MESSAGE_LEN - 3);
    assert!(kept.chars().all(|c| c == '€'));

    // The default header limit accommodates the longest error message.
    let mut buf = BytesMut::new();
    FrameEncoder::new(FrameLimits::default())
        .encode_frame(&header, b"", b"", &mut buf)
        .unwrap();
    let frame = FrameDecoder::new(FrameLimits::default())
        .decode(&mut buf)
        .unwrap()
        .unwrap();
    assert_eq!(frame.header, header);
}

#[test]
fn deadline_is_anchored_at_receive_time() {
    let received = Instant::now();
    let deadline = request_deadline(&request(), received).unwrap();
    assert_eq!(deadline, received + Duration::from_millis(5));
    assert_eq!(check_deadline(Some(deadline), received), Ok(()));
    assert_eq!(
        check_deadline(Some(deadline), deadline),
        Err(StatusCode::DeadlineExceeded)
    );
    assert_eq!(
        check_deadline(None, deadline + Duration::from_secs(9)),
        Ok(())
    );
    assert_eq!(
        request_deadline(&FrameHeader::request(1, 1, 1), received),
        None
    );
}

#[test]
fn request_header_carries_remaining_budget() {
    let now = Instant::now();
    let header = request_header(1, 2, 3, Some(now + Duration::from_millis(7)), now);
    assert_eq!(header.kind, FrameKind::Request);
    assert_eq!(header.deadline, Some(Duration::from_millis(7)));
    // A deadline already passed travels as a zero budget.
    let header = request_header(1, 2, 3, Some(now), now + Duration::from_secs(1));
    assert_eq!(header.deadline, Some(Duration::ZERO));
    assert_eq!(request_header(1, 2, 3, None, now).deadline, None);
}

#[test]
fn serve_errors_map_to_statuses() {
    let cases = [
        (Status::UnknownService(3), StatusCode::UnknownService),
        (
            Status::UnknownMethod {
                service_id: 3,
                method_id: 8,
            },
            StatusCode::UnknownMethod,
        ),
        (Status::BadRequest("x".into()), StatusCode::BadRequest),
        (Status::Internal("y".into()), StatusCode::Internal),
        (Status::Overloaded, StatusCode::Overloaded),
        (Status::DeadlineExceeded, StatusCode::DeadlineExceeded),
        (Status::Cancelled, StatusCode::Cancelled),
        (Status::Failed("WRONGTYPE".into()), StatusCode::Failed),
    ];
    for (err, status) in cases {
        assert_eq!(err.code(), status);
        let header = err.to_header(&request());
        assert_eq!(header.status, status);
        assert_eq!(header.correlation_id, 77);
        // Only the service's own text travels, not the human-readable prefix.
        assert_eq!(header.error_message.as_deref(), err.detail());
    }
    assert_eq!(
        Status::UnknownMethod {
            service_id: 3,
            method_id: 8
        }
        .to_string(),
        "unknown method 8 of service 3"
    );
}
