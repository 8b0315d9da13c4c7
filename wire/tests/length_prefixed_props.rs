use bytes::{Bytes, BytesMut};
use corewire_wire::length_prefixed::{
    encode, LengthPrefixedDecoder, LengthPrefixedError, PREFIX_LEN,
};
use proptest::prelude::*;

proptest! {
    #[test]
    fn roundtrip_with_arbitrary_splits(
        messages in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..10),
        chunks in proptest::collection::vec(1usize..50, 1..20),
    ) {
        let mut wire = BytesMut::new();
        for m in &messages {
            encode(m, &mut wire).unwrap();
        }
        let mut dec = LengthPrefixedDecoder::new(200);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut pos = 0;
        for &size in chunks.iter().cycle() {
            if pos >= wire.len() {
                break;
            }
            let end = (pos + size).min(wire.len());
            buf.extend_from_slice(&wire[pos..end]);
            pos = end;
            while let Some(msg) = dec.decode(&mut buf).unwrap() {
                out.push(msg);
            }
        }
        let expected: Vec<Bytes> = messages.into_iter().map(Bytes::from).collect();
        prop_assert_eq!(out, expected);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn oversize_rejected_before_body(len in any::<u32>(), max in 0usize..100_000) {
        let mut buf = BytesMut::from(&len.to_le_bytes()[..]);
        let result = LengthPrefixedDecoder::new(max).decode(&mut buf);
        if len as usize > max {
            prop_assert_eq!(result, Err(LengthPrefixedError::MessageTooLarge { len: u64::from(len), max }));
            prop_assert_eq!(buf.len(), PREFIX_LEN);
        } else if len == 0 {
            prop_assert_eq!(result, Ok(Some(Bytes::new())));
        } else {
            prop_assert_eq!(result, Ok(None));
        }
    }
}
