//! The sparse encoding's opcodes, one byte each except XZERO:
//! `00xxxxxx` ZERO (1..=64 zero registers), `01xxxxxx yyyyyyyy` XZERO (1..=16384 zero
//! registers), `1vvvvvxx` VAL (1..=4 registers of value 1..=32). Register updates split and
//! merge opcodes exactly as Redis's `hllSparseSet`, so both servers build the same bytes.

use super::{Corrupt, HEADER, REGISTERS};

pub(super) const XZERO_MAX_LEN: usize = 16384;
const ZERO_MAX_LEN: usize = 64;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;

fn is_zero(op: u8) -> bool {
    op & 0xc0 == 0
}

fn is_xzero(op: u8) -> bool {
    op & 0xc0 == 0x40
}

fn is_val(op: u8) -> bool {
    op & 0x80 != 0
}

fn zero_len(op: u8) -> usize {
    usize::from(op & 0x3f) + 1
}

fn xzero_len(op: u8, next: u8) -> usize {
    ((usize::from(op & 0x3f) << 8) | usize::from(next)) + 1
}

fn val_value(op: u8) -> u8 {
    ((op >> 2) & 0x1f) + 1
}

fn val_len(op: u8) -> usize {
    usize::from(op & 0x3) + 1
}

fn val(value: u8, len: usize) -> u8 {
    ((value - 1) << 2) | (len as u8 - 1) | 0x80
}

fn zero(len: usize) -> u8 {
    (len - 1) as u8
}

pub(super) fn xzero(len: usize) -> [u8; 2] {
    let l = len - 1;
    [((l >> 8) as u8) | 0x40, (l & 0xff) as u8]
}

/// Zero run of `len` as ZERO or XZERO, appended to `out`.
fn push_zeros(out: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        out.extend_from_slice(&xzero(len));
    } else {
        out.push(zero(len));
    }
}

/// One decoded opcode: its byte length, registers covered, and value (0 for zero runs).
fn opcode(ops: &[u8], at: usize) -> (usize, usize, u8) {
    let op = ops[at];
    if is_zero(op) {
        (1, zero_len(op), 0)
    } else if is_xzero(op) {
        (2, xzero_len(op, ops.get(at + 1).copied().unwrap_or(0)), 0)
    } else {
        (1, val_len(op), val_value(op))
    }
}

/// `max[i] = max(max[i], register i)`; the runs must cover exactly every register.
pub(super) fn merge(max: &mut [u8; REGISTERS], ops: &[u8]) -> Result<(), Corrupt> {
    let (mut at, mut index) = (0, 0);
    while at < ops.len() {
        let (len, run, value) = opcode(ops, at);
        if value != 0 {
            if index + run > REGISTERS {
                break;
            }
            for slot in &mut max[index..index + run] {
                *slot = (*slot).max(value);
            }
        }
        index += run;
        at += len;
    }
    if index == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// Adds each run to the histogram of register values.
pub(super) fn histogram(ops: &[u8], histogram: &mut [u32; 64]) -> Result<(), Corrupt> {
    let (mut at, mut index) = (0, 0);
    while at < ops.len() {
        let (len, run, value) = opcode(ops, at);
        index += run;
        histogram[usize::from(value)] += run as u32;
        at += len;
    }
    if index == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// PFDEBUG DECODE's text: `z:len`, `Z:len`, `v:value,len` separated by spaces.
pub fn decode(value: &[u8]) -> String {
    let ops = &value[HEADER..];
    let mut parts = Vec::new();
    let mut at = 0;
    while at < ops.len() {
        let op = ops[at];
        let (len, run, value) = opcode(ops, at);
        parts.push(if is_zero(op) {
            format!("z:{run}")
        } else if is_xzero(op) {
            format!("Z:{run}")
        } else {
            format!("v:{value},{run}")
        });
        at += len;
    }
    parts.join(" ")
}

pub(super) enum SetOutcome {
    /// Updated in place (or not needed): whether a register changed.
    Done(bool),
    /// The value must turn dense first.
    Promote,
}

/// Redis's `hllSparseSet` on a whole sparse value (header included).
pub(super) fn set(
    value: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max: usize,
) -> Result<SetOutcome, Corrupt> {
    if count > VAL_MAX_VALUE {
        return Ok(SetOutcome::Promote);
    }
    // Step 1: the opcode covering `index`.
    let end = value.len();
    let mut p = HEADER;
    let mut first = 0;
    let mut prev = None;
    let mut span = 0;
    while p < end {
        let (len, run, _) = opcode(value, p);
        span = run;
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += len;
        first += span;
    }
    if span == 0 || p >= end {
        return Err(Corrupt);
    }
    let op = value[p];
    let (oplen, runlen, _) = opcode(value, p);
    let mut end = end;
    // Step 2: cases A to D.
    let mut updated_in_place = false;
    if is_val(op) {
        if val_value(op) >= count {
            return Ok(SetOutcome::Done(false));
        }
        if runlen == 1 {
            value[p] = val(count, 1);
            updated_in_place = true;
        }
    } else if is_zero(op) && runlen == 1 {
        value[p] = val(count, 1);
        updated_in_place = true;
    }
    if !updated_in_place {
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        if is_val(op) {
            let current = val_value(op);
            if index != first {
                seq.push(val(current, index - first));
            }
            seq.push(val(count, 1));
            if index != last {
                seq.push(val(current, last - index));
            }
        } else {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        }
        // Step 3: the new sequence replaces the opcode.
        let grows = seq.len() > oplen;
        if grows && value.len() + seq.len() - oplen > sparse_max {
            return Ok(SetOutcome::Promote);
        }
        value.splice(p..p + oplen, seq.iter().copied());
        end = value.len();
    }
    // Step 4: merge adjacent VAL opcodes of one value, up to 5 opcodes from the previous.
    let mut p = prev.unwrap_or(HEADER);
    let mut scan = 5;
    while p < end && scan > 0 {
        scan -= 1;
        let op = value[p];
        if is_xzero(op) {
            p += 2;
            continue;
        }
        if is_zero(op) {
            p += 1;
            continue;
        }
        if p + 1 < end && is_val(value[p + 1]) {
            let (v1, v2) = (val_value(op), val_value(value[p + 1]));
            if v1 == v2 {
                let len = val_len(op) + val_len(value[p + 1]);
                if len <= VAL_MAX_LEN {
                    value[p + 1] = val(v1, len);
                    value.remove(p);
                    end -= 1;
                    continue;
                }
            }
        }
        p += 1;
    }
    super::invalidate_cache(value);
    Ok(SetOutcome::Done(true))
}
