//! Reading an RDB file as it arrives, in bounded memory: [`IncrementalDecoder`] holds only
//! the bytes of the item being read (and what came after it), so a replica loads a snapshot
//! far larger than any buffer, piece by piece from its spool file.
//!
//! An item cut short by the end of what is held reads as an error from [`Decoder`]; with
//! more input to come that means "wait". To keep a large item from being decoded again for
//! every small piece, it is tried again only once the held bytes have doubled (or the input
//! ended), so the work stays linear. The checksum is kept as items are consumed.

use super::decode::{Decoder, Item, RdbError};
use super::{crc64, opcode, RDB_VERSION};

/// Decodes an RDB file pushed piece by piece.
#[derive(Debug)]
pub struct IncrementalDecoder {
    /// `held[start..]` are the bytes not consumed yet (consumed ones are dropped at the next
    /// push, so consuming many small items costs no copying).
    held: Vec<u8>,
    start: usize,
    /// Where `held[start..]` starts in the file.
    offset: usize,
    /// `None` until the 9-byte header was read.
    version: Option<u16>,
    crc: u64,
    input_ended: bool,
    /// `held`'s length at the last attempt that ran out of bytes (0: none).
    short_at: usize,
    ended: bool,
    /// The largest item accepted (bounds what is held).
    max_item: usize,
}

impl IncrementalDecoder {
    pub fn new(max_item: usize) -> IncrementalDecoder {
        IncrementalDecoder {
            held: Vec::new(),
            start: 0,
            offset: 0,
            version: None,
            crc: 0,
            input_ended: false,
            short_at: 0,
            ended: false,
            max_item,
        }
    }

    /// The file's next bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.held.drain(..self.start);
        self.start = 0;
        self.held.extend_from_slice(bytes);
    }

    /// No more bytes come.
    pub fn end_input(&mut self) {
        self.input_ended = true;
    }

    /// Bytes held now (for the memory bound).
    pub fn held(&self) -> usize {
        self.held.len() - self.start
    }

    /// Bytes of the file consumed (whole items read).
    pub fn offset(&self) -> usize {
        self.offset
    }

    fn live(&self) -> &[u8] {
        &self.held[self.start..]
    }

    /// The next item, `Ok(None)` when more bytes are needed; errors carry the offset in the
    /// file.
    pub fn next_item(&mut self) -> Result<Option<Item>, RdbError> {
        if self.ended {
            return Ok(Some(Item::End));
        }
        let version = match self.version {
            Some(version) => version,
            None => {
                if self.held() < 9 {
                    return self.short(RdbError {
                        offset: 0,
                        message: "not an RDB file (no REDIS magic)".into(),
                    });
                }
                let version = Decoder::new(&self.live()[..9])?.version();
                self.consume(9);
                self.version = Some(version);
                version
            }
        };
        if self.live().first() == Some(&opcode::EOF) {
            return self.end(version);
        }
        if self.short_at != 0 && !self.input_ended && self.held() < self.short_at * 2 {
            return Ok(None);
        }
        let mut decoder = Decoder::part(&self.held[self.start..], version);
        match decoder.next_item() {
            Ok(item) => {
                let used = decoder.offset();
                self.short_at = 0;
                self.consume(used);
                Ok(Some(item))
            }
            Err(error) => {
                let error = RdbError {
                    offset: error.offset + self.offset,
                    message: error.message,
                };
                self.short(error)
            }
        }
    }

    /// An attempt that may have run out of bytes: wait for more while they may come.
    fn short(&mut self, error: RdbError) -> Result<Option<Item>, RdbError> {
        if self.input_ended {
            return Err(error);
        }
        if self.held() > self.max_item {
            return Err(RdbError {
                offset: self.offset,
                message: format!(
                    "{} (or an item larger than {} bytes)",
                    error.message, self.max_item
                ),
            });
        }
        self.short_at = self.held().max(1);
        Ok(None)
    }

    /// `EOF` and the checksum (from version 5), then nothing.
    fn end(&mut self, version: u16) -> Result<Option<Item>, RdbError> {
        let sum_len = if version >= 5 { 8 } else { 0 };
        if self.held() < 1 + sum_len {
            return self.short(RdbError {
                offset: self.offset,
                message: "the file ends inside its checksum".into(),
            });
        }
        let computed = crc64::update(self.crc, &[opcode::EOF]);
        if sum_len == 8 {
            let stored = u64::from_le_bytes(self.live()[1..9].try_into().unwrap_or_default());
            if stored != 0 && stored != computed {
                return Err(RdbError {
                    offset: self.offset + 1,
                    message: format!(
                        "wrong checksum (stored {stored:016x}, computed {computed:016x})"
                    ),
                });
            }
        }
        if self.held() > 1 + sum_len {
            return Err(RdbError {
                offset: self.offset + 1 + sum_len,
                message: "bytes after the checksum".into(),
            });
        }
        if !self.input_ended {
            // Bytes after the checksum would be an error: wait for the end of the input.
            return Ok(None);
        }
        self.ended = true;
        Ok(Some(Item::End))
    }

    fn consume(&mut self, n: usize) {
        self.crc = crc64::update(self.crc, &self.held[self.start..self.start + n]);
        self.start += n;
        self.offset += n;
    }
}

const _: () = assert!(RDB_VERSION >= 5);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb::{Decoder, RdbWriter};

    /// A file with functions, a few keys and a big string.
    fn file() -> Vec<u8> {
        let mut out = Vec::new();
        RdbWriter::header(&mut out, 0, 0);
        RdbWriter::function(
            &mut out,
            b"#!lua name=x\nredis.register_function('f', function() return 1 end)",
        );
        RdbWriter::select_db(&mut out, 0, 3, 0);
        for (key, value) in [
            ("a", "1".repeat(10)),
            ("b", "xyz".repeat(50_000)),
            ("c", "end".into()),
        ] {
            out.push(0); // a string
            crate::rdb::encode::write_string(&mut out, key.as_bytes(), false);
            crate::rdb::encode::write_string(&mut out, value.as_bytes(), false);
        }
        let crc = crc64::crc64(&out);
        RdbWriter::finish(&mut out, crc);
        out
    }

    fn items_whole(bytes: &[u8]) -> Vec<Item> {
        let mut d = Decoder::new(bytes).unwrap();
        let mut items = Vec::new();
        loop {
            let item = d.next_item().unwrap();
            let end = item == Item::End;
            items.push(item);
            if end {
                return items;
            }
        }
    }

    fn items_in_pieces(bytes: &[u8], piece: usize) -> Result<(Vec<Item>, usize), RdbError> {
        let mut d = IncrementalDecoder::new(1 << 20);
        let mut items = Vec::new();
        let mut most = 0;
        let mut chunks = bytes.chunks(piece);
        loop {
            match d.next_item()? {
                Some(Item::End) => {
                    items.push(Item::End);
                    return Ok((items, most));
                }
                Some(item) => items.push(item),
                None => match chunks.next() {
                    Some(chunk) => {
                        d.push(chunk);
                        most = most.max(d.held());
                    }
                    None => d.end_input(),
                },
            }
        }
    }

    #[test]
    fn pieces_give_the_items_of_the_whole_file() {
        let bytes = file();
        let whole = items_whole(&bytes);
        for piece in [1, 7, 4096, 1 << 20] {
            let (items, most) = items_in_pieces(&bytes, piece).unwrap();
            assert_eq!(items, whole, "{piece}");
            // What is held is about the big value, not the file.
            assert!(most <= 2 * 150_100 + piece, "{piece}: {most}");
        }
    }

    #[test]
    fn damage_and_truncation_are_errors() {
        let mut bytes = file();
        let n = bytes.len();
        bytes[n - 3] ^= 1;
        let error = items_in_pieces(&bytes, 1000).unwrap_err();
        assert!(error.message.contains("wrong checksum"), "{error}");
        let bytes = file();
        let error = items_in_pieces(&bytes[..n - 100], 1000).unwrap_err();
        assert!(error.message.contains("end of file"), "{error}");
        let mut extra = file();
        extra.push(0);
        let error = items_in_pieces(&extra, 1000).unwrap_err();
        assert!(
            error.message.contains("bytes after the checksum"),
            "{error}"
        );
        let mut d = IncrementalDecoder::new(100);
        d.push(&bytes[..1000]);
        let mut error = None;
        for _ in 0..10 {
            if let Err(e) = d.next_item() {
                error = Some(e);
                break;
            }
        }
        assert!(error.unwrap().message.contains("larger than 100 bytes"));
    }
}
