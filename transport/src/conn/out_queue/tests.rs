use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

use bytes::BufMut;

use super::*;

struct Flag(AtomicBool);
impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn flag() -> (Arc<Flag>, Waker) {
    let f = Arc::new(Flag(false.into()));
    (f.clone(), Waker::from(f))
}

fn woken(f: &Flag) -> bool {
    f.0.swap(false, Ordering::SeqCst)
}

fn poll_fut<F: Future>(f: Pin<&mut F>, w: &Waker) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(w))
}

fn bytes(n: usize) -> Bytes {
    Bytes::from(vec![0u8; n])
}

/// Admit and queue an `n`-byte frame that fits now, as `push_frame` does.
fn queue_frame(q: &OutQueue, n: usize) {
    let (_f, w) = flag();
    assert_eq!(poll_fut(pin!(q.admit(n)), &w), Poll::Ready(true));
    q.push_admitted([bytes(n)], n);
}

#[test]
fn queued_bytes_never_exceed_the_limit_however_many_wait() {
    let q = OutQueue::new(100);
    queue_frame(&q, 60);
    let (fa, wa) = flag();
    let (fb, wb) = flag();
    let mut a = pin!(q.admit(60));
    let mut b = pin!(q.admit(60));
    assert!(poll_fut(a.as_mut(), &wa).is_pending());
    assert!(poll_fut(b.as_mut(), &wb).is_pending());
    // 60 bytes leave: only the first in line is woken, and it fits.
    q.sent(60);
    assert!(woken(&fa) && !woken(&fb));
    assert_eq!(poll_fut(a.as_mut(), &wa), Poll::Ready(true));
    q.push_admitted([bytes(60)], 60);
    // The next one does not fit yet.
    assert!(poll_fut(b.as_mut(), &wb).is_pending());
    assert_eq!(q.queued_bytes(), 60);
    q.sent(60);
    assert!(woken(&fb));
    assert_eq!(poll_fut(b.as_mut(), &wb), Poll::Ready(true));
}

#[test]
fn an_oversized_frame_goes_alone() {
    let q = OutQueue::new(10);
    queue_frame(&q, 1000);
    let (f, w) = flag();
    let mut small = pin!(q.admit(1));
    assert!(poll_fut(small.as_mut(), &w).is_pending());
    // Its bytes beyond the limit count as leaving first: no room yet.
    q.sent(990);
    assert!(!woken(&f));
    assert!(poll_fut(small.as_mut(), &w).is_pending());
    // 5 of its 10 charged bytes gone: 5 + 1 fits under the limit.
    q.sent(5);
    assert!(woken(&f));
    assert_eq!(poll_fut(small.as_mut(), &w), Poll::Ready(true));
}

#[test]
fn control_frames_take_no_permits_and_hold_none_back() {
    let q = OutQueue::new(100);
    q.push([bytes(30)]);
    queue_frame(&q, 70);
    assert_eq!(q.queued_bytes(), 100);
    assert!(!q.has_room());
    q.sent(100);
    assert!(q.has_room());
    queue_frame(&q, 100);
}

#[test]
fn small_frames_leave_together_and_everything_in_order() {
    use crate::frame::FrameLimits;

    let q = OutQueue::new(1 << 20);
    let encoder = RefCell::new(FrameEncoder::new(FrameLimits::default()));
    let stats = ConnStatsCells::default();
    let (_f, w) = flag();
    let expected = RefCell::new(BytesMut::new());
    let send = |id: u64, payload: Bytes| {
        let header = FrameHeader::request(1, 1, id);
        let mut reference = FrameEncoder::new(FrameLimits::default());
        reference
            .encode_frame(&header, &payload, b"", &mut expected.borrow_mut())
            .unwrap();
        let pushed = q.push_frame(&encoder, &stats, &header, payload, Bytes::new());
        assert!(matches!(poll_fut(pin!(pushed), &w), Poll::Ready(Ok(()))));
    };
    send(1, bytes(64));
    send(2, bytes(64));
    send(3, bytes(OutQueue::COPY_MAX)); // over COPY_MAX with its header: not copied
    q.push([Bytes::from_static(b"control")]);
    expected.borrow_mut().extend_from_slice(b"control");
    send(4, bytes(10));
    let expected = expected.into_inner();
    assert_eq!(q.queued_bytes(), expected.len());
    let batch = match q.poll_next_batch(&mut Context::from_waker(&w), usize::MAX) {
        Poll::Ready(Some(batch)) => batch,
        other => panic!("expected a batch, got {other:?}"),
    };
    // Frames 1 and 2 as one buffer; frame 3's header and payload; the control frame;
    // frame 4.
    let lens: Vec<usize> = batch.iter().map(Bytes::len).collect();
    assert_eq!(lens.len(), 5, "{lens:?}");
    assert_eq!(lens[3], b"control".len());
    assert_eq!(batch.concat(), expected.to_vec());
    q.sent(expected.len());
    assert_eq!(q.queued_bytes(), 0);
    assert!(q.has_room());
}

#[test]
fn staged_frames_give_their_permits_back() {
    use crate::frame::FrameLimits;

    // A queue that holds ten small frames: a thousand pass through it one by one, so
    // every sent byte must have given its permit back.
    let q = OutQueue::new(1000);
    let encoder = RefCell::new(FrameEncoder::new(FrameLimits::default()));
    let stats = ConnStatsCells::default();
    let (_f, w) = flag();
    for id in 0..1000 {
        let header = FrameHeader::request(1, 1, id);
        let pushed = q.push_frame(&encoder, &stats, &header, bytes(20), Bytes::new());
        assert!(
            matches!(poll_fut(pin!(pushed), &w), Poll::Ready(Ok(()))),
            "frame {id} not admitted"
        );
        let batch = match q.poll_next_batch(&mut Context::from_waker(&w), usize::MAX) {
            Poll::Ready(Some(batch)) => batch,
            other => panic!("expected a batch, got {other:?}"),
        };
        q.sent(batch.iter().map(Bytes::len).sum());
    }
    assert_eq!(q.queued_bytes(), 0);
}

fn batch_of(q: &OutQueue) -> Vec<Bytes> {
    let (_f, w) = flag();
    match q.poll_next_batch(&mut Context::from_waker(&w), usize::MAX) {
        Poll::Ready(Some(batch)) => batch,
        other => panic!("expected a batch, got {other:?}"),
    }
}

#[test]
fn frames_written_in_place_are_whole_and_in_order() {
    use crate::frame::FrameLimits;

    let q = OutQueue::new(1 << 20);
    let encoder = RefCell::new(FrameEncoder::new(FrameLimits::default()));
    let stats = ConnStatsCells::default();
    let (_f, w) = flag();
    let mut reference = FrameEncoder::new(FrameLimits::default());
    let mut expected = BytesMut::new();
    for (id, size) in [64, 4096, 10, OutQueue::IN_PLACE_STAGE_MAX + 1, 3]
        .into_iter()
        .enumerate()
    {
        let header = FrameHeader::request(1, 1, id as u64);
        let payload = vec![id as u8; size];
        reference
            .encode_frame(&header, &payload, b"meta", &mut expected)
            .unwrap();
        if id == 2 {
            // Queued by reference between frames written in place.
            let pushed = q.push_frame(&encoder, &stats, &header, payload.into(), "meta".into());
            assert!(matches!(poll_fut(pin!(pushed), &w), Poll::Ready(Ok(()))));
            continue;
        }
        let queued = q.try_push_frame_with(&encoder, &stats, &header, size, b"meta", |buf| {
            assert_eq!(buf.written(), 0, "the payload's buffer holds nothing else");
            buf.put_slice(&payload);
        });
        assert!(queued.unwrap(), "frame {id} admitted");
    }
    assert_eq!(q.queued_bytes(), expected.len());
    assert_eq!(stats.snapshot(0).bytes_out as usize, expected.len());
    let batch = batch_of(&q);
    assert_eq!(batch.concat(), expected.to_vec());
    q.sent(expected.len());
    assert_eq!(q.queued_bytes(), 0);
    assert!(q.has_room());
}

#[test]
fn staging_buffers_take_turns_while_the_writer_holds_a_batch() {
    use crate::frame::FrameLimits;

    let q = OutQueue::new(1 << 20);
    let encoder = RefCell::new(FrameEncoder::new(FrameLimits::default()));
    let stats = ConnStatsCells::default();
    let header = FrameHeader::request(1, 1, 1);
    // One frame per batch; the writer holds each batch until the next one is staged (an
    // asynchronous send in flight), then it is sent.
    let mut starts = Vec::new();
    let mut frame = 0;
    let mut in_flight: Option<Vec<Bytes>> = None;
    // Allocations of a staging buffer's size made as batches are sent: a staging buffer
    // freed rather than kept would be handed to one of these, and the next one staged in a
    // buffer not seen before.
    let mut others = Vec::new();
    for _ in 0..16 {
        let queued = q.try_push_frame_with(&encoder, &stats, &header, 4096, b"", |buf| {
            buf.put_bytes(9, 4096)
        });
        assert!(queued.unwrap());
        let batch = batch_of(&q);
        frame = batch.iter().map(Bytes::len).sum::<usize>();
        starts.push(batch[0].as_ptr() as usize);
        if let Some(sent) = in_flight.replace(batch) {
            q.sent(sent.iter().map(Bytes::len).sum());
            drop(sent);
            others.push(Vec::<u8>::with_capacity(4 * frame));
        }
    }
    // Each staging buffer holds a few frames (`grow_stage`'s room): the buffers seen, by
    // where their first frame starts.
    let room = 4 * frame;
    let mut buffers: Vec<usize> = Vec::new();
    for &start in &starts {
        if !buffers.iter().any(|&b| start >= b && start < b + room) {
            buffers.push(start);
        }
    }
    assert_eq!(buffers.len(), 2, "two buffers take turns: {starts:x?}");
    drop(in_flight);
}

#[test]
fn a_frame_written_in_place_waits_for_nobody_and_overtakes_nobody() {
    use crate::frame::FrameLimits;

    let q = OutQueue::new(100);
    let encoder = RefCell::new(FrameEncoder::new(FrameLimits::default()));
    let stats = ConnStatsCells::default();
    let header = FrameHeader::request(1, 1, 1);
    let try_push = |len: usize| {
        let mut called = false;
        let queued = q.try_push_frame_with(&encoder, &stats, &header, len, b"", |buf| {
            called = true;
            buf.put_bytes(1, len);
        });
        (queued.unwrap(), called)
    };
    // Over the limit with what is queued: not admitted, `write` not called.
    queue_frame(&q, 90);
    assert_eq!(try_push(20), (false, false));
    q.sent(90);
    assert_eq!(try_push(20), (true, true));
    let frame = q.queued_bytes();
    assert!(frame > 20 && frame <= 100, "{frame}");
    // Someone waits in line: a frame that would fit still does not go first.
    let (_fa, wa) = flag();
    let mut waiting = pin!(q.admit(100));
    assert!(poll_fut(waiting.as_mut(), &wa).is_pending());
    assert_eq!(try_push(0), (false, false));
    q.sent(frame);
    assert_eq!(poll_fut(waiting.as_mut(), &wa), Poll::Ready(true));
    q.close();
    assert!(matches!(
        q.try_push_frame_with(&encoder, &stats, &header, 1, b"", |_| ()),
        Err(TransportError::Closed)
    ));
}

#[test]
fn a_failed_write_queues_nothing_and_gives_its_permits_back() {
    use crate::frame::FrameLimits;

    let q = OutQueue::new(1 << 20);
    let encoder = RefCell::new(FrameEncoder::new(FrameLimits::default()));
    let stats = ConnStatsCells::default();
    let header = FrameHeader::request(1, 1, 1);
    let (_f, w) = flag();
    // One good frame first: a failed one must leave it as it was.
    let pushed = q.push_frame(&encoder, &stats, &header, bytes(8), Bytes::new());
    assert!(matches!(poll_fut(pin!(pushed), &w), Poll::Ready(Ok(()))));
    let good = q.queued_bytes();
    for size in [100, OutQueue::IN_PLACE_STAGE_MAX * 2] {
        // Too short.
        let short = q.try_push_frame_with(&encoder, &stats, &header, size, b"x", |buf| {
            buf.put_bytes(0, size - 1);
        });
        assert!(short.is_err());
        // A panic halfway.
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            q.try_push_frame_with(&encoder, &stats, &header, size, b"", |buf| {
                buf.put_bytes(0, size / 2);
                panic!("the encoder panics");
            })
        }));
        assert!(panicked.is_err());
        assert_eq!(q.queued_bytes(), good);
    }
    // The same after a large `Bytes` went into the queue by reference.
    let big = bytes(PayloadBuf::BY_REFERENCE_MIN);
    let short = q.try_push_frame_with(&encoder, &stats, &header, big.len() + 2, b"", |buf| {
        buf.put_u8(1);
        buf.put(big.clone());
    });
    assert!(short.is_err());
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        q.try_push_frame_with(&encoder, &stats, &header, big.len() + 2, b"", |buf| {
            buf.put(big.clone());
            panic!("the encoder panics");
        })
    }));
    assert!(panicked.is_err());
    assert_eq!(q.queued_bytes(), good);
    assert_eq!(q.admission.available_permits(), q.limit() - good);
    let batch = batch_of(&q);
    assert_eq!(batch.iter().map(Bytes::len).sum::<usize>(), good);
    q.sent(good);
    assert_eq!(q.admission.available_permits(), q.limit());
}

#[test]
fn newcomers_do_not_jump_the_line() {
    let q = OutQueue::new(100);
    queue_frame(&q, 50);
    let (_fa, wa) = flag();
    let mut big = pin!(q.admit(80));
    assert!(poll_fut(big.as_mut(), &wa).is_pending());
    // A small frame would fit, but someone is waiting: it queues behind.
    let mut small = pin!(q.admit(10));
    assert!(poll_fut(small.as_mut(), &wa).is_pending());
    assert!(!q.has_room());
}

#[test]
fn a_dropped_waiter_hands_its_turn_on() {
    let q = OutQueue::new(100);
    queue_frame(&q, 100);
    let (_fa, wa) = flag();
    let (fb, wb) = flag();
    let mut a = Box::pin(q.admit(60));
    let mut b = pin!(q.admit(50));
    assert!(poll_fut(a.as_mut(), &wa).is_pending());
    assert!(poll_fut(b.as_mut(), &wb).is_pending());
    q.sent(50);
    assert!(!woken(&fb));
    drop(a);
    assert!(woken(&fb));
    assert_eq!(poll_fut(b.as_mut(), &wb), Poll::Ready(true));
    assert!(!q.admission.has_waiters());
}

#[test]
fn room_waiters_wake_when_the_line_is_empty_and_under_the_limit() {
    let q = OutQueue::new(100);
    queue_frame(&q, 100);
    let (f, w) = flag();
    let mut room = pin!(q.wait_for_room());
    assert!(poll_fut(room.as_mut(), &w).is_pending());
    q.sent(1);
    assert!(woken(&f));
    assert_eq!(poll_fut(room.as_mut(), &w), Poll::Ready(true));
}

#[test]
fn a_dropped_room_waiter_does_not_keep_the_others_asleep() {
    let q = OutQueue::new(10);
    queue_frame(&q, 10);
    let (fa, wa) = flag();
    let (fb, wb) = flag();
    let mut a = Box::pin(q.wait_for_room());
    let mut b = pin!(q.wait_for_room());
    assert!(poll_fut(a.as_mut(), &wa).is_pending());
    assert!(poll_fut(b.as_mut(), &wb).is_pending());
    drop(a);
    q.sent(10);
    assert!(!woken(&fa) && woken(&fb));
    assert_eq!(poll_fut(b.as_mut(), &wb), Poll::Ready(true));
}

#[test]
fn the_writer_stays_registered_between_polls() {
    // The in-memory connection polls `poll_next_batch` without keeping a future.
    let q = OutQueue::new(100);
    let (fw, w) = flag();
    let mut cx = Context::from_waker(&w);
    assert!(q.poll_next_batch(&mut cx, 8).is_pending());
    q.push([bytes(5)]);
    assert!(woken(&fw));
    match q.poll_next_batch(&mut cx, 8) {
        Poll::Ready(Some(batch)) => assert_eq!(batch.len(), 1),
        other => panic!(
            "expected the pushed buffer, got {:?}",
            other.map(|b| b.map(|b| b.len()))
        ),
    }
}

#[test]
fn close_releases_every_waiter() {
    let q = OutQueue::new(10);
    queue_frame(&q, 10);
    let (f, w) = flag();
    let (fr, wr) = flag();
    let (fw, ww) = flag();
    let mut a = pin!(q.admit(5));
    let mut room = pin!(q.wait_for_room());
    assert!(poll_fut(a.as_mut(), &w).is_pending());
    assert!(poll_fut(room.as_mut(), &wr).is_pending());
    let mut writer = pin!(q.next_batch(8));
    assert!(poll_fut(writer.as_mut(), &ww).is_ready()); // the queued frame
    assert!(poll_fut(pin!(q.next_batch(8)), &ww).is_pending());
    q.close();
    assert!(woken(&f) && woken(&fr) && woken(&fw));
    assert_eq!(poll_fut(a.as_mut(), &w), Poll::Ready(false));
    assert_eq!(poll_fut(room.as_mut(), &wr), Poll::Ready(false));
    assert_eq!(poll_fut(pin!(q.next_batch(8)), &ww), Poll::Ready(None));
}

/// A large `Bytes` put into a payload written in place is queued by reference (as
/// `push_frame` keeps its payload), in order between the frame's other bytes; smaller ones,
/// other `Buf`s and a queue that copies every byte anyway (`without_copies`) copy.
#[test]
fn large_bytes_in_a_payload_written_in_place_are_queued_by_reference() {
    use crate::frame::FrameLimits;

    let min = PayloadBuf::BY_REFERENCE_MIN;
    let big = Bytes::from((0..min + 7).map(|i| i as u8).collect::<Vec<_>>());
    let small = Bytes::from(vec![3u8; min - 1]);
    for copies in [true, false] {
        let q = if copies {
            OutQueue::new(1 << 20)
        } else {
            OutQueue::without_copies(1 << 20)
        };
        let encoder = RefCell::new(FrameEncoder::new(FrameLimits::default()));
        let stats = ConnStatsCells::default();
        let mut reference = FrameEncoder::new(FrameLimits::default());
        let mut expected = BytesMut::new();
        let (_f, w) = flag();
        // A frame staged before: it stays first.
        let header = FrameHeader::request(1, 1, 1);
        let pushed = q.push_frame(&encoder, &stats, &header, bytes(8), Bytes::new());
        assert!(matches!(poll_fut(pin!(pushed), &w), Poll::Ready(Ok(()))));
        reference
            .encode_frame(&header, &[0u8; 8], b"", &mut expected)
            .unwrap();
        let header = FrameHeader::request(1, 1, 2);
        let mut payload = vec![1u8];
        payload.extend_from_slice(&big);
        payload.extend_from_slice(&small);
        payload.extend_from_slice(&big[..min]);
        payload.push(2);
        reference
            .encode_frame(&header, &payload, b"meta", &mut expected)
            .unwrap();
        let queued =
            q.try_push_frame_with(&encoder, &stats, &header, payload.len(), b"meta", |buf| {
                buf.put_u8(1);
                buf.put(big.clone());
                buf.put(small.clone());
                buf.put(&big[..min]);
                buf.put_u8(2);
            });
        assert!(queued.unwrap());
        assert_eq!(q.queued_bytes(), expected.len());
        let batch = batch_of(&q);
        assert_eq!(batch.concat(), expected.to_vec());
        let by_reference = batch.iter().any(|b| b.as_ptr() == big.as_ptr());
        assert_eq!(
            by_reference, copies,
            "queued by reference iff the queue sends vectored"
        );
        q.sent(expected.len());
    }
}
