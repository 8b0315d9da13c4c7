//! Property tests for the RESP request parser.

use bytes::{Bytes, BytesMut};
use corewire_kv::resp::{ParserLimits, ProtocolError, RequestParser};
use proptest::prelude::*;

type Request = Vec<Vec<u8>>;

fn encode_multibulk(request: &Request) -> Vec<u8> {
    let mut out = format!("*{}\r\n", request.len()).into_bytes();
    for arg in request {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Feeds `chunks` one at a time, parsing after each; returns every request and the final
/// parse result.
fn parse_chunks(chunks: &[&[u8]]) -> (Vec<Request>, Result<(), ProtocolError>) {
    let mut parser = RequestParser::default();
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match parser.parse(&mut buf) {
                Ok(Some(args)) => requests.push(args.iter().map(|a| a.to_vec()).collect()),
                Ok(None) => break,
                Err(e) => return (requests, Err(e)),
            }
        }
    }
    (requests, Ok(()))
}

fn request_strategy() -> impl Strategy<Value = Request> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6)
}

/// Inline commands: tokens without whitespace or quotes.
fn inline_strategy() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("[a-zA-Z0-9:_.-]{1,12}", 1..5)
}

proptest! {
    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..512), split in 0usize..512) {
        let split = split.min(data.len());
        let _ = parse_chunks(&[&data[..split], &data[split..]]);
        // Tight limits exercise the limit paths too.
        let limits = ParserLimits { max_bulk_len: 8, max_array_len: 4, max_inline_len: 16 };
        let mut parser = RequestParser::new(limits);
        let mut buf = BytesMut::from(&data[..]);
        while let Ok(Some(_)) = parser.parse(&mut buf) {}
    }

    #[test]
    fn random_bytes_after_a_star_never_panic(data in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut input = b"*3\r\n$3\r\nSET\r\n".to_vec();
        input.extend_from_slice(&data);
        let _ = parse_chunks(&[&input]);
    }

    #[test]
    fn splitting_does_not_change_the_result(
        requests in prop::collection::vec(request_strategy(), 1..5),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let stream: Vec<u8> = requests.iter().flat_map(encode_multibulk).collect();
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for point in points {
            chunks.push(&stream[start..point]);
            start = point;
        }
        chunks.push(&stream[start..]);
        let (whole, whole_result) = parse_chunks(&[&stream]);
        let (split, split_result) = parse_chunks(&chunks);
        prop_assert_eq!(whole_result, Ok(()));
        prop_assert_eq!(split_result, Ok(()));
        prop_assert_eq!(&whole, &requests);
        prop_assert_eq!(split, requests);
    }

    #[test]
    fn inline_commands_split_anywhere(
        commands in prop::collection::vec(inline_strategy(), 1..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let stream: Vec<u8> = commands
            .iter()
            .flat_map(|words| format!("{}\r\n", words.join(" ")).into_bytes())
            .collect();
        let cut = cut.index(stream.len() + 1);
        let (parsed, result) = parse_chunks(&[&stream[..cut], &stream[cut..]]);
        prop_assert_eq!(result, Ok(()));
        let expected: Vec<Request> = commands
            .iter()
            .map(|words| words.iter().map(|w| w.as_bytes().to_vec()).collect())
            .collect();
        prop_assert_eq!(parsed, expected);
    }

    #[test]
    fn truncated_requests_need_more_input(request in request_strategy(), cut in any::<prop::sample::Index>()) {
        let encoded = encode_multibulk(&request);
        let cut = cut.index(encoded.len());
        let mut parser = RequestParser::default();
        let mut buf = BytesMut::from(&encoded[..cut]);
        prop_assert_eq!(parser.parse(&mut buf), Ok(None));
        buf.extend_from_slice(&encoded[cut..]);
        let parsed = parser.parse(&mut buf).unwrap().unwrap();
        prop_assert_eq!(parsed.iter().map(|a| a.to_vec()).collect::<Request>(), request);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn quoted_inline_arguments_round_trip(args in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..16), 1..4)) {
        // Quote every argument with \xHH escapes, which sdssplitargs decodes exactly.
        let line: String = args
            .iter()
            .map(|arg| {
                let escaped: String = arg.iter().map(|b| format!("\\x{b:02x}")).collect();
                format!("\"{escaped}\"")
            })
            .collect::<Vec<_>>()
            .join(" ");
        let mut buf = BytesMut::from(format!("{line}\r\n").as_bytes());
        let parsed = RequestParser::default().parse(&mut buf).unwrap().unwrap();
        let expected: Vec<Bytes> = args.into_iter().map(Bytes::from).collect();
        prop_assert_eq!(parsed, expected);
    }
}
