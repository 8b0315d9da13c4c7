//! A RESP2/RESP3 reply as the differential tests see it: every type kept distinct, doubles and
//! big numbers as their wire text (formatting is part of what is compared).

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum V {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    /// `$-1`
    NullBulk,
    /// `*-1`
    NullArray,
    /// RESP3 `_`
    Null,
    Array(Vec<V>),
    /// RESP3 `%`: key, value, key, value...
    Map(Vec<V>),
    /// RESP3 `~`
    Set(Vec<V>),
    /// RESP3 `>`
    Push(Vec<V>),
    /// RESP3 `,` with its text
    Double(Vec<u8>),
    /// RESP3 `#`
    Bool(bool),
    /// RESP3 `=`: format and text
    Verbatim(Vec<u8>),
    /// RESP3 `(`
    BigNumber(Vec<u8>),
}

impl V {
    pub fn bulk(s: &str) -> V {
        V::Bulk(s.as_bytes().to_vec())
    }

    pub fn ok() -> V {
        V::Simple(b"OK".to_vec())
    }

    /// The elements of an aggregate (array, set, push, map flattened).
    pub fn items(&self) -> Option<&[V]> {
        match self {
            V::Array(items) | V::Set(items) | V::Push(items) | V::Map(items) => Some(items),
            _ => None,
        }
    }

    /// An aggregate read as key/value pairs (a map, or a flat array of pairs).
    pub fn pairs(&self) -> Option<Vec<(V, V)>> {
        let items = self.items()?;
        if items.len() % 2 != 0 {
            return None;
        }
        Some(
            items
                .chunks(2)
                .map(|pair| (pair[0].clone(), pair[1].clone()))
                .collect(),
        )
    }

    /// The type tag, for comparing the shape of replies whose content is unordered.
    pub fn kind(&self) -> u8 {
        match self {
            V::Simple(_) => b'+',
            V::Error(_) => b'-',
            V::Int(_) => b':',
            V::Bulk(_) => b'$',
            V::NullBulk => b'0',
            V::NullArray => b'1',
            V::Null => b'_',
            V::Array(_) => b'*',
            V::Map(_) => b'%',
            V::Set(_) => b'~',
            V::Push(_) => b'>',
            V::Double(_) => b',',
            V::Bool(_) => b'#',
            V::Verbatim(_) => b'=',
            V::BigNumber(_) => b'(',
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            V::Int(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            V::Bulk(b) | V::Simple(b) | V::Verbatim(b) => Some(b),
            _ => None,
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, V::Error(_))
    }

    /// A readable one-line rendering (bytes escaped, long values shortened).
    pub fn show(&self) -> String {
        let list = |open: &str, items: &[V]| {
            let shown: Vec<String> = items.iter().take(40).map(V::show).collect();
            let more = if items.len() > 40 {
                format!(", ... {} more", items.len() - 40)
            } else {
                String::new()
            };
            format!("{open}{}{more}]", shown.join(", "))
        };
        match self {
            V::Simple(s) => format!("+{}", show_bytes(s)),
            V::Error(s) => format!("-{}", show_bytes(s)),
            V::Int(n) => format!(":{n}"),
            V::Bulk(b) => format!("\"{}\"", show_bytes(b)),
            V::NullBulk => "$-1".into(),
            V::NullArray => "*-1".into(),
            V::Null => "_".into(),
            V::Array(items) => list("[", items),
            V::Map(items) => list("%[", items),
            V::Set(items) => list("~[", items),
            V::Push(items) => list(">[", items),
            V::Double(d) => format!(",{}", show_bytes(d)),
            V::Bool(b) => format!("#{b}"),
            V::Verbatim(b) => format!("={}", show_bytes(b)),
            V::BigNumber(b) => format!("({}", show_bytes(b)),
        }
    }
}

pub fn show_bytes(bytes: &[u8]) -> String {
    let mut out = String::new();
    for &b in bytes.iter().take(120) {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            0x20..=0x7e => out.push(b as char),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if bytes.len() > 120 {
        out.push_str(&format!("...({} bytes)", bytes.len()));
    }
    out
}

/// One reply from the front of `buf` and the bytes it used, or `None` if incomplete.
pub fn parse(buf: &[u8]) -> Option<(V, usize)> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = &buf[1..line_end];
    let rest = line_end + 2;
    let number = |line: &[u8]| -> i64 {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad RESP length {:?}", show_bytes(line)))
    };
    let aggregate = |count: i64, per: usize| -> Option<(Vec<V>, usize)> {
        let mut items = Vec::new();
        let mut used = rest;
        for _ in 0..count as usize * per {
            let (item, n) = parse(&buf[used..])?;
            items.push(item);
            used += n;
        }
        Some((items, used))
    };
    let blob = |len: i64| -> Option<(Vec<u8>, usize)> {
        let len = len as usize;
        if buf.len() < rest + len + 2 {
            return None;
        }
        Some((buf[rest..rest + len].to_vec(), rest + len + 2))
    };
    match buf.first()? {
        b'+' => Some((V::Simple(line.to_vec()), rest)),
        b'-' => Some((V::Error(line.to_vec()), rest)),
        b':' => Some((V::Int(number(line)), rest)),
        b',' => Some((V::Double(line.to_vec()), rest)),
        b'(' => Some((V::BigNumber(line.to_vec()), rest)),
        b'#' => Some((V::Bool(line == b"t"), rest)),
        b'_' => Some((V::Null, rest)),
        b'$' => {
            let len = number(line);
            if len < 0 {
                return Some((V::NullBulk, rest));
            }
            blob(len).map(|(b, n)| (V::Bulk(b), n))
        }
        b'=' => blob(number(line)).map(|(b, n)| (V::Verbatim(b), n)),
        b'*' => {
            let count = number(line);
            if count < 0 {
                return Some((V::NullArray, rest));
            }
            aggregate(count, 1).map(|(items, n)| (V::Array(items), n))
        }
        b'~' => aggregate(number(line), 1).map(|(items, n)| (V::Set(items), n)),
        b'>' => aggregate(number(line), 1).map(|(items, n)| (V::Push(items), n)),
        b'%' => aggregate(number(line), 2).map(|(items, n)| (V::Map(items), n)),
        other => panic!(
            "not a RESP reply: byte {other:#x} in {:?}",
            show_bytes(&buf[..buf.len().min(200)])
        ),
    }
}
