//! Redis's HyperLogLog as the string value Redis stores, byte for byte: the 16-byte header
//! (`HYLL`, the encoding, three reserved bytes, the cached cardinality little endian with its
//! top bit marking it stale), then 16384 six-bit registers, either dense (packed, least
//! significant bits first) or sparse (ZERO / XZERO / VAL run-length opcodes). Elements hash
//! with Redis's endian-neutral MurmurHash64A, and the count is Ertl's estimator, so a value
//! moves between this server and redis-server (GET/SET, DUMP/RESTORE) unchanged.
//!
//! Sans-I/O: values are byte vectors, errors are values; the commands live in
//! `store/hll.rs`.

mod sparse;

pub use sparse::decode as decode_sparse;

/// Header bytes before the registers.
pub const HEADER: usize = 16;
/// Registers (2^14).
pub const REGISTERS: usize = 1 << P;
/// A dense value's exact length.
pub const DENSE_SIZE: usize = HEADER + (REGISTERS * BITS).div_ceil(8);
/// `hll-sparse-max-bytes`'s default.
pub const DEFAULT_SPARSE_MAX_BYTES: usize = 3000;

const P: usize = 14;
const Q: usize = 64 - P;
const BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << BITS) - 1;
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// How a valid HLL value stores its registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

impl Encoding {
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

/// The string is not an HLL (Redis: `WRONGTYPE Key is not a valid HyperLogLog string value.`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotHll;

/// The registers do not decode (Redis: `INVALIDOBJ Corrupted HLL object detected`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// Redis's `isHLLObjectOrReply`: the magic, a known encoding, and a dense value's length.
pub fn validate(value: &[u8]) -> Result<Encoding, NotHll> {
    if value.len() < HEADER || &value[..4] != b"HYLL" {
        return Err(NotHll);
    }
    match value[4] {
        DENSE if value.len() == DENSE_SIZE => Ok(Encoding::Dense),
        SPARSE => Ok(Encoding::Sparse),
        _ => Err(NotHll),
    }
}

/// A new, empty HLL: sparse, all registers in XZERO runs, cached cardinality 0.
pub fn new_sparse() -> Vec<u8> {
    let mut value = vec![0u8; HEADER];
    value[..4].copy_from_slice(b"HYLL");
    value[4] = SPARSE;
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(sparse::XZERO_MAX_LEN);
        value.extend_from_slice(&sparse::xzero(run));
        left -= run;
    }
    value
}

/// Redis's MurmurHash64A, reading 8-byte blocks little endian on every platform.
pub fn murmur64a(data: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = u64::from(seed) ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().unwrap_or_default());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= u64::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register `element` hashes to, and the length of its `0...01` pattern (1..=Q+1).
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, 0xadc8_3b19);
    let index = (hash as usize) & (REGISTERS - 1);
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Dense register `index` of the registers after the header.
pub fn dense_get(registers: &[u8], index: usize) -> u8 {
    let byte = index * BITS / 8;
    let shift = (index * BITS) & 7;
    let b0 = u16::from(registers[byte]);
    let b1 = u16::from(registers.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> shift) | (b1 << (8 - shift))) as u8) & REGISTER_MAX
}

pub fn dense_set(registers: &mut [u8], index: usize, value: u8) {
    let byte = index * BITS / 8;
    let shift = (index * BITS) & 7;
    let v = u16::from(value);
    registers[byte] &= !((u16::from(REGISTER_MAX) << shift) as u8);
    registers[byte] |= (v << shift) as u8;
    if let Some(next) = registers.get_mut(byte + 1) {
        *next &= !(u16::from(REGISTER_MAX) >> (8 - shift)) as u8;
        *next |= (v >> (8 - shift)) as u8;
    }
}

/// Raises register `index` to `count` if lower; whether it changed. A sparse value may turn
/// dense (a count above 32, or past `sparse_max` bytes).
pub fn set(
    value: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max: usize,
) -> Result<bool, Corrupt> {
    if value[4] == DENSE {
        let registers = &mut value[HEADER..];
        if count > dense_get(registers, index) {
            dense_set(registers, index, count);
            return Ok(true);
        }
        return Ok(false);
    }
    match sparse::set(value, index, count, sparse_max)? {
        sparse::SetOutcome::Done(changed) => Ok(changed),
        sparse::SetOutcome::Promote => {
            to_dense(value)?;
            let registers = &mut value[HEADER..];
            dense_set(registers, index, count);
            Ok(true)
        }
    }
}

/// PFADD's add of one element; whether a register changed.
pub fn add(value: &mut Vec<u8>, element: &[u8], sparse_max: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(element);
    set(value, index, count, sparse_max)
}

/// Converts a sparse value to dense (a dense one is left as is); whether it converted.
pub fn to_dense(value: &mut Vec<u8>) -> Result<bool, Corrupt> {
    if value[4] == DENSE {
        return Ok(false);
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HEADER].copy_from_slice(&value[..HEADER]);
    dense[4] = DENSE;
    let mut registers = [0u8; REGISTERS];
    sparse::merge(&mut registers, &value[HEADER..])?;
    for (index, &reg) in registers.iter().enumerate() {
        if reg != 0 {
            dense_set(&mut dense[HEADER..], index, reg);
        }
    }
    *value = dense;
    Ok(true)
}

/// `max[i] = max(max[i], register i)` over a valid HLL value.
pub fn merge(max: &mut [u8; REGISTERS], value: &[u8]) -> Result<(), Corrupt> {
    if value[4] == DENSE {
        for (index, slot) in max.iter_mut().enumerate() {
            *slot = (*slot).max(dense_get(&value[HEADER..], index));
        }
        Ok(())
    } else {
        sparse::merge(max, &value[HEADER..])
    }
}

/// The cached cardinality, unless stale.
pub fn cached(value: &[u8]) -> Option<u64> {
    (value[15] & 0x80 == 0).then(|| u64::from_le_bytes(value[8..16].try_into().unwrap_or_default()))
}

pub fn set_cache(value: &mut [u8], card: u64) {
    value[8..16].copy_from_slice(&card.to_le_bytes());
}

pub fn invalidate_cache(value: &mut [u8]) {
    value[15] |= 0x80;
}

/// The estimated cardinality of a valid HLL value.
pub fn count(value: &[u8]) -> Result<u64, Corrupt> {
    let mut histogram = [0u32; 64];
    if value[4] == DENSE {
        for index in 0..REGISTERS {
            histogram[dense_get(&value[HEADER..], index) as usize] += 1;
        }
    } else {
        sparse::histogram(&value[HEADER..], &mut histogram)?;
    }
    Ok(estimate(&histogram))
}

/// The estimated cardinality of plain registers (one byte each): multi-key PFCOUNT's union.
pub fn count_registers(registers: &[u8; REGISTERS]) -> u64 {
    let mut histogram = [0u32; 64];
    for &reg in registers {
        histogram[(reg & 63) as usize] += 1;
    }
    estimate(&histogram)
}

/// Ertl's estimator ("New cardinality estimation algorithms for HyperLogLog sketches").
fn estimate(histogram: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histogram[Q + 1])) / m);
    for j in (1..=Q).rev() {
        z += f64::from(histogram[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histogram[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if previous == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if previous == z {
            return z / 3.0;
        }
    }
}

/// Every register, as PFDEBUG GETREG lists them (of a dense value).
pub fn dense_registers(value: &[u8]) -> Vec<u8> {
    (0..REGISTERS)
        .map(|i| dense_get(&value[HEADER..], i))
        .collect()
}

/// PFSELFTEST: register access, and the estimate's error on dense and sparse values fed the
/// same elements (`rand` draws the random values). `Err` holds the error reply's text.
pub fn selftest(sparse_max: usize, mut rand: impl FnMut() -> u32) -> Result<(), String> {
    let mut dense = vec![0u8; DENSE_SIZE - HEADER];
    let mut expected = [0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, slot) in expected.iter_mut().enumerate() {
            let r = (rand() as u8) & REGISTER_MAX;
            *slot = r;
            dense_set(&mut dense, i, r);
        }
        for (i, &want) in expected.iter().enumerate() {
            let got = dense_get(&dense, i);
            if got != want {
                return Err(format!(
                    "TESTFAILED Register {i} should be {want} but is {got}"
                ));
            }
        }
    }
    let mut dense = new_sparse();
    to_dense(&mut dense).map_err(|_| "TESTFAILED dense conversion".to_owned())?;
    let mut sparse = new_sparse();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let seed = u64::from(rand()) | (u64::from(rand()) << 32);
    for j in 1..=10_000_000u64 {
        let element = (j ^ seed).to_le_bytes();
        let (index, count) = pattern(&element);
        let _ = set(&mut dense, index, count, sparse_max);
        let _ = set(&mut sparse, index, count, sparse_max);
        if j != checkpoint {
            continue;
        }
        if (j as usize) < sparse_max / 2 && validate(&sparse) != Ok(Encoding::Sparse) {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let estimate = count_of(&dense);
        if estimate != count_of(&sparse) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let abserr = (checkpoint as i64 - estimate as i64).unsigned_abs();
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

fn count_of(value: &[u8]) -> u64 {
    count(value).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
