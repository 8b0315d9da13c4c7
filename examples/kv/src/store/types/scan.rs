//! HSCAN, SSCAN and ZSCAN: a cursor over a collection's dense index.
//!
//! Collections remove by moving their last element into the hole, and add at the end. The
//! cursor therefore walks *downwards*: it is the number of positions still to visit, so an
//! element that stays in the collection for the whole scan is returned at least once (one
//! moved by a removal comes from the part already visited and may be returned twice, as Redis
//! allows), and elements added during the scan may or may not be returned. Small collections
//! come back whole with cursor 0, as Redis's compact encodings do.

use bytes::Bytes;

use super::args::{int, is};
use crate::command::CommandError;
use crate::glob::glob_match;

/// Collections up to this size answer in one reply (Redis's listpack and intset sizes).
const WHOLE_UP_TO: usize = 128;

pub(super) struct ScanArgs {
    cursor: u64,
    pattern: Option<Bytes>,
    count: usize,
}

/// `cursor [MATCH pattern] [COUNT count]` (`a[1..]` of the command).
pub(super) fn parse(a: &[Bytes]) -> Result<ScanArgs, CommandError> {
    let cursor = std::str::from_utf8(&a[1])
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .ok_or_else(|| CommandError::Text("ERR invalid cursor".into()))?;
    let mut args = ScanArgs {
        cursor,
        pattern: None,
        count: 10,
    };
    let mut i = 2;
    while i < a.len() {
        let Some(value) = a.get(i + 1) else {
            return Err(CommandError::Syntax);
        };
        if is(&a[i], "count") {
            let count = int(value)?;
            if count < 1 {
                return Err(CommandError::Syntax);
            }
            args.count = count as usize;
        } else if is(&a[i], "match") {
            args.pattern = Some(value.clone());
        } else {
            return Err(CommandError::Syntax);
        }
        i += 2;
    }
    Ok(args)
}

impl ScanArgs {
    /// Walks a collection of `len` elements: calls `visit(index)` for the positions of this
    /// step and returns the next cursor.
    pub fn walk(&self, len: usize, mut visit: impl FnMut(usize)) -> u64 {
        if len <= WHOLE_UP_TO {
            (0..len).for_each(visit);
            return 0;
        }
        let top = if self.cursor == 0 {
            len
        } else {
            (self.cursor as usize).min(len)
        };
        let bottom = top.saturating_sub(self.count);
        for index in (bottom..top).rev() {
            visit(index);
        }
        bottom as u64
    }

    pub fn matches(&self, element: &[u8]) -> bool {
        self.pattern
            .as_ref()
            .is_none_or(|pattern| glob_match(pattern, element, false))
    }
}

/// The reply: `[cursor, [elements...]]`.
pub(super) fn reply(cursor: u64, items: Vec<crate::reply::Reply>) -> crate::reply::Reply {
    crate::reply::Reply::Array(vec![
        crate::reply::Reply::Bulk(Bytes::from(cursor.to_string())),
        crate::reply::Reply::Array(items),
    ])
}
