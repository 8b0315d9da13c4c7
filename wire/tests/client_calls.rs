use std::collections::HashMap;
use std::time::{Duration, Instant};

use corewire_wire::frame::{FrameHeader, FrameKind, StatusCode};
use corewire_wire::rpc::{
    error_header, response_header, ClientCalls, ResponseError, Status, WindowFull,
};
use proptest::prelude::*;

fn reply_ok(id: u64) -> FrameHeader {
    response_header(&FrameHeader::request(1, 2, id))
}

fn reply_err(id: u64, status: StatusCode, msg: &str) -> FrameHeader {
    error_header(&FrameHeader::request(1, 2, id), status, msg)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn window_bounds_in_flight_calls_and_returns_the_token() {
    let mut calls = ClientCalls::new(2);
    let a = calls.try_start("a", None).unwrap();
    let b = calls.try_start("b", None).unwrap();
    assert_ne!(a, b);
    assert!(!calls.has_capacity());
    assert_eq!(calls.try_start("c", None), Err(WindowFull("c")));
    assert_eq!(calls.in_flight(), 2);

    let done = calls.complete(&reply_ok(a)).unwrap();
    assert_eq!((done.token, done.result), ("a", Ok(())));
    assert!(calls.try_start("c", None).is_ok());
}

#[test]
fn zero_window_still_allows_one_call() {
    let mut calls = ClientCalls::new(0);
    assert_eq!(calls.window(), 1);
    assert!(calls.try_start((), None).is_ok());
    assert!(calls.try_start((), None).is_err());
}

#[test]
fn correlation_ids_are_unique_among_pending_calls() {
    let mut calls = ClientCalls::new(1000);
    let mut ids: Vec<u64> = (0..1000)
        .map(|i| calls.try_start(i, None).unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 1000);
}

#[test]
fn error_reply_carries_the_typed_status() {
    let mut calls = ClientCalls::new(4);
    let id = calls.try_start((), None).unwrap();
    let done = calls
        .complete(&reply_err(id, StatusCode::UnknownMethod, "no such method"))
        .unwrap();
    assert_eq!(
        done.result,
        Err(Status::UnknownMethod {
            service_id: 1,
            method_id: 2
        })
    );
    assert_eq!(calls.in_flight(), 0);
}

#[test]
fn error_reply_detail_arrives_as_the_service_gave_it() {
    let mut calls = ClientCalls::new(4);
    let id = calls.try_start((), None).unwrap();
    let status = Status::BadRequest("WRONGTYPE Operation against a key".into());
    let header = status.to_header(&FrameHeader::request(1, 2, id));
    assert_eq!(calls.complete(&header).unwrap().result, Err(status));
}

#[test]
fn response_with_non_ok_status_fails_the_call() {
    let mut calls = ClientCalls::new(4);
    let id = calls.try_start((), None).unwrap();
    let header = FrameHeader {
        status: StatusCode::Overloaded,
        ..reply_ok(id)
    };
    assert_eq!(
        calls.complete(&header).unwrap().result,
        Err(Status::Overloaded)
    );
}

#[test]
fn error_frame_with_ok_status_still_fails() {
    let mut calls = ClientCalls::new(4);
    let id = calls.try_start((), None).unwrap();
    let header = FrameHeader {
        kind: FrameKind::Error,
        ..reply_ok(id)
    };
    let result = calls.complete(&header).unwrap().result;
    assert_eq!(result.unwrap_err().code(), StatusCode::Internal);
}

#[test]
fn unknown_correlation_id_is_a_typed_error() {
    let mut calls: ClientCalls<()> = ClientCalls::new(4);
    assert_eq!(
        calls.complete(&reply_ok(99)),
        Err(ResponseError::UnknownCorrelationId(99))
    );
}

#[test]
fn a_late_reply_never_completes_the_next_call() {
    // Window 1: every call takes the same slot; the ended call's id must not match its
    // successor's.
    let mut calls = ClientCalls::new(1);
    let first = calls.try_start("first", None).unwrap();
    assert_eq!(calls.cancel(first), Some("first"));
    let second = calls.try_start("second", None).unwrap();
    assert_ne!(first, second);
    assert_eq!(
        calls.complete(&reply_ok(first)),
        Err(ResponseError::UnknownCorrelationId(first))
    );
    assert!(calls.is_pending(second));
    assert_eq!(calls.complete(&reply_ok(second)).unwrap().token, "second");
}

#[test]
fn duplicate_reply_is_unknown_the_second_time() {
    let mut calls = ClientCalls::new(4);
    let id = calls.try_start((), None).unwrap();
    assert!(calls.complete(&reply_ok(id)).is_ok());
    assert_eq!(
        calls.complete(&reply_ok(id)),
        Err(ResponseError::UnknownCorrelationId(id))
    );
}

#[test]
fn request_or_cancel_frames_are_rejected_and_leave_the_call_pending() {
    let mut calls = ClientCalls::new(4);
    let id = calls.try_start((), None).unwrap();
    assert_eq!(
        calls.complete(&FrameHeader::request(1, 2, id)),
        Err(ResponseError::NotAResponse {
            kind: FrameKind::Request,
            correlation_id: id
        })
    );
    assert!(matches!(
        calls.complete(&FrameHeader::cancel(1, 2, id)),
        Err(ResponseError::NotAResponse { .. })
    ));
    assert!(calls.is_pending(id));
}

#[test]
fn expire_returns_overdue_calls_in_deadline_order() {
    let t0 = Instant::now();
    let mut calls = ClientCalls::new(8);
    let late = calls.try_start("late", Some(t0 + ms(30))).unwrap();
    let early = calls.try_start("early", Some(t0 + ms(10))).unwrap();
    let _never = calls.try_start("never", None).unwrap();
    let mid = calls.try_start("mid", Some(t0 + ms(20))).unwrap();

    assert_eq!(calls.next_deadline(), Some(t0 + ms(10)));
    assert!(calls.expire(t0 + ms(9)).is_empty());

    let expired = calls.expire(t0 + ms(20));
    let ids: Vec<u64> = expired.iter().map(|c| c.correlation_id).collect();
    assert_eq!(ids, vec![early, mid]);
    for c in &expired {
        assert_eq!(c.result, Err(Status::DeadlineExceeded));
    }
    assert_eq!(calls.next_deadline(), Some(t0 + ms(30)));
    assert_eq!(calls.in_flight(), 2);

    // A reply that arrives after expiry no longer matches anything.
    assert_eq!(
        calls.complete(&reply_ok(early)),
        Err(ResponseError::UnknownCorrelationId(early))
    );
    assert!(calls.is_pending(late));
}

#[test]
fn deadline_in_the_past_expires_on_next_check() {
    let t0 = Instant::now();
    let mut calls = ClientCalls::new(2);
    let id = calls.try_start((), Some(t0)).unwrap();
    assert_eq!(calls.expire(t0)[0].correlation_id, id);
}

#[test]
fn completed_calls_leave_the_deadline_index() {
    let t0 = Instant::now();
    let mut calls = ClientCalls::new(2);
    let id = calls.try_start((), Some(t0 + ms(5))).unwrap();
    calls.complete(&reply_ok(id)).unwrap();
    assert_eq!(calls.next_deadline(), None);
    assert!(calls.expire(t0 + ms(100)).is_empty());
}

#[test]
fn cancel_forgets_the_call() {
    let t0 = Instant::now();
    let mut calls = ClientCalls::new(2);
    let id = calls.try_start("tok", Some(t0 + ms(5))).unwrap();
    assert_eq!(calls.cancel(id), Some("tok"));
    assert_eq!(calls.cancel(id), None);
    assert_eq!(calls.next_deadline(), None);
    assert_eq!(
        calls.complete(&reply_ok(id)),
        Err(ResponseError::UnknownCorrelationId(id))
    );
}

#[test]
fn fail_all_resolves_every_pending_call() {
    let t0 = Instant::now();
    let mut calls = ClientCalls::new(8);
    let ids: Vec<u64> = (0..5)
        .map(|i| {
            calls
                .try_start(i, (i % 2 == 0).then(|| t0 + ms(i)))
                .unwrap()
        })
        .collect();
    let reason = Status::Cancelled;
    let failed = calls.fail_all(reason.clone());
    assert_eq!(
        failed.iter().map(|c| c.correlation_id).collect::<Vec<_>>(),
        ids
    );
    assert!(failed.iter().all(|c| c.result == Err(reason.clone())));
    assert_eq!(calls.in_flight(), 0);
    assert_eq!(calls.next_deadline(), None);
    assert!(calls.expire(t0 + ms(1000)).is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    Start { deadline_ms: Option<u64> },
    Reply { pick: prop::sample::Index, ok: bool },
    Cancel { pick: prop::sample::Index },
    Advance { ms: u64 },
    StrayReply { id: u64 },
    FailAll,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => proptest::option::of(0u64..50).prop_map(|deadline_ms| Op::Start { deadline_ms }),
        3 => (any::<prop::sample::Index>(), any::<bool>()).prop_map(|(pick, ok)| Op::Reply { pick, ok }),
        1 => any::<prop::sample::Index>().prop_map(|pick| Op::Cancel { pick }),
        2 => (0u64..20).prop_map(|ms| Op::Advance { ms }),
        1 => (1_000_000u64..2_000_000).prop_map(|id| Op::StrayReply { id }),
        1 => Just(Op::FailAll),
    ]
}

proptest! {
    /// Model check: every started call is resolved exactly once (reply,
    /// expiry, cancel or fail_all), the window is never exceeded, and
    /// `next_deadline` is the earliest deadline still pending.
    #[test]
    fn every_call_resolves_exactly_once(window in 1usize..6, ops in proptest::collection::vec(op(), 1..80)) {
        let t0 = Instant::now();
        let mut now = t0;
        let mut calls = ClientCalls::new(window);
        // Model: id -> (token, deadline) for calls we believe are pending.
        let mut model: HashMap<u64, (u32, Option<Instant>)> = HashMap::new();
        let mut resolved: HashMap<u32, u32> = HashMap::new();
        let mut next_token = 0u32;

        for op in ops {
            match op {
                Op::Start { deadline_ms } => {
                    let token = next_token;
                    next_token += 1;
                    let deadline = deadline_ms.map(|d| now + ms(d));
                    match calls.try_start(token, deadline) {
                        Ok(id) => {
                            prop_assert!(model.len() < window);
                            prop_assert!(model.insert(id, (token, deadline)).is_none());
                        }
                        Err(WindowFull(back)) => {
                            prop_assert_eq!(back, token);
                            prop_assert_eq!(model.len(), window);
                        }
                    }
                }
                Op::Reply { pick, ok } => {
                    if model.is_empty() { continue; }
                    let mut ids: Vec<u64> = model.keys().copied().collect();
                    ids.sort_unstable();
                    let id = ids[pick.index(ids.len())];
                    let header = if ok { reply_ok(id) } else { reply_err(id, StatusCode::Internal, "boom") };
                    let done = calls.complete(&header).unwrap();
                    prop_assert_eq!(done.result.is_ok(), ok);
                    let (token, _) = model.remove(&id).unwrap();
                    prop_assert_eq!(done.token, token);
                    *resolved.entry(token).or_default() += 1;
                }
                Op::Cancel { pick } => {
                    if model.is_empty() { continue; }
                    let mut ids: Vec<u64> = model.keys().copied().collect();
                    ids.sort_unstable();
                    let id = ids[pick.index(ids.len())];
                    let (token, _) = model.remove(&id).unwrap();
                    prop_assert_eq!(calls.cancel(id), Some(token));
                    *resolved.entry(token).or_default() += 1;
                }
                Op::Advance { ms: step } => {
                    now += ms(step);
                    for done in calls.expire(now) {
                        let (token, deadline) = model.remove(&done.correlation_id).unwrap();
                        prop_assert!(deadline.is_some_and(|d| d <= now));
                        prop_assert_eq!(done.token, token);
                        *resolved.entry(token).or_default() += 1;
                    }
                    prop_assert!(model.values().all(|(_, d)| d.is_none_or(|d| d > now)));
                }
                Op::StrayReply { id } => {
                    // A reply to an id that is not pending (never issued, or ended).
                    if model.contains_key(&id) { continue; }
                    prop_assert_eq!(calls.complete(&reply_ok(id)), Err(ResponseError::UnknownCorrelationId(id)));
                }
                Op::FailAll => {
                    for done in calls.fail_all(Status::Cancelled) {
                        let (token, _) = model.remove(&done.correlation_id).unwrap();
                        prop_assert_eq!(done.token, token);
                        *resolved.entry(token).or_default() += 1;
                    }
                    prop_assert!(model.is_empty());
                }
            }
            prop_assert_eq!(calls.in_flight(), model.len());
            prop_assert!(calls.in_flight() <= window);
            prop_assert_eq!(calls.next_deadline(), model.values().filter_map(|(_, d)| *d).min());
        }
        prop_assert!(resolved.values().all(|&n| n == 1));
        // Whatever is left resolves on disconnect.
        let left = model.len();
        prop_assert_eq!(calls.fail_all(Status::Cancelled).len(), left);
    }
}
