//! A stream as the records that recreate it (Redis's `rewriteStreamObject`): its entries as
//! XADDs (an empty stream as `XADD key MAXLEN 0 0-1 x y`), XSETID for the metadata, and per
//! group `XGROUP CREATE ... ENTRIESREAD`, an `XCLAIM ... TIME RETRYCOUNT JUSTID FORCE` per
//! pending entry and `XGROUP CREATECONSUMER` for consumers with nothing pending. What the
//! AOF rewrite writes and DUMP carries.

use bytes::Bytes;

use super::id::StreamId;
use super::model::Stream;
use crate::change::{ChangeSink, WriteOp};

fn b(text: &'static str) -> Bytes {
    Bytes::from_static(text.as_bytes())
}

pub fn emit_stream<S: ChangeSink>(key: &[u8], stream: &Stream, sink: &mut S) {
    let key_bytes = Bytes::copy_from_slice(key);
    let mut any = false;
    for (id, pairs) in stream.range(StreamId::MIN, StreamId::MAX, false) {
        any = true;
        let mut args = Vec::with_capacity(1 + 2 * pairs.len());
        args.push(id.to_bytes());
        args.extend(pairs.into_iter().flat_map(|(f, v)| [f, v]));
        sink.record(WriteOp::Command {
            name: "XADD",
            key,
            args: &args,
        });
    }
    if !any {
        let args = [b("MAXLEN"), b("0"), b("0-1"), b("x"), b("y")];
        sink.record(WriteOp::Command {
            name: "XADD",
            key,
            args: &args,
        });
    }
    let args = [
        stream.last_id.to_bytes(),
        b("ENTRIESADDED"),
        Bytes::from(stream.entries_added.to_string()),
        b("MAXDELETEDID"),
        stream.max_deleted_entry_id.to_bytes(),
    ];
    sink.record(WriteOp::Command {
        name: "XSETID",
        key,
        args: &args,
    });
    for (name, group) in &stream.groups {
        let args = [
            key_bytes.clone(),
            name.clone(),
            group.last_id.to_bytes(),
            b("ENTRIESREAD"),
            Bytes::from(group.entries_read.to_string()),
        ];
        sink.record(WriteOp::Command {
            name: "XGROUP",
            key: b"CREATE",
            args: &args,
        });
        for (id, nack) in &group.pel {
            let args = [
                name.clone(),
                nack.consumer.clone(),
                b("0"),
                id.to_bytes(),
                b("TIME"),
                Bytes::from(nack.delivery_time.to_string()),
                b("RETRYCOUNT"),
                Bytes::from(nack.delivery_count.to_string()),
                b("JUSTID"),
                b("FORCE"),
            ];
            sink.record(WriteOp::Command {
                name: "XCLAIM",
                key,
                args: &args,
            });
        }
        for (consumer, c) in &group.consumers {
            if c.pending.is_empty() {
                let args = [key_bytes.clone(), name.clone(), consumer.clone()];
                sink.record(WriteOp::Command {
                    name: "XGROUP",
                    key: b"CREATECONSUMER",
                    args: &args,
                });
            }
        }
    }
}
