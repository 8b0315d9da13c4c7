//! A shard's registered buffers: fixed-size chunks carved from a few memory regions that are
//! registered as the pool grows, up to a cap. Connections take their receive buffers from it
//! and borrow send buffers per message.

use corewire_verbs::{Access, MemoryRegion, ProtectionDomain, Sge, VerbsError};

/// Index of one chunk: slab in the high bits, chunk within the slab in the low bits.
pub type ChunkId = u32;

const SLAB_SHIFT: u32 = 16;

pub struct BufferPool {
    pd: ProtectionDomain,
    slabs: Vec<MemoryRegion>,
    free: Vec<ChunkId>,
    chunk_size: usize,
    chunks_per_slab: usize,
    max_slabs: usize,
}

#[derive(Debug)]
pub enum PoolError {
    /// The pool reached its configured size.
    Exhausted { pool_bytes: usize },
    /// Registering more memory failed (usually RLIMIT_MEMLOCK).
    Register(VerbsError),
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolError::Exhausted { pool_bytes } => write!(
                f,
                "RDMA buffer pool exhausted ({pool_bytes} bytes per shard; raise RdmaConfig::pool_bytes)"
            ),
            PoolError::Register(e) => write!(f, "registering RDMA buffers failed: {e}"),
        }
    }
}

impl std::error::Error for PoolError {}

impl BufferPool {
    pub fn new(
        pd: ProtectionDomain,
        chunk_size: usize,
        slab_bytes: usize,
        pool_bytes: usize,
    ) -> BufferPool {
        let chunks_per_slab = (slab_bytes / chunk_size).clamp(1, 1 << SLAB_SHIFT);
        let slab_len = chunks_per_slab * chunk_size;
        BufferPool {
            pd,
            slabs: Vec::new(),
            free: Vec::new(),
            chunk_size,
            chunks_per_slab,
            max_slabs: (pool_bytes / slab_len).max(1),
        }
    }

    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    pub fn free_chunks(&self) -> usize {
        self.free.len()
    }

    pub fn registered_bytes(&self) -> usize {
        self.slabs.len() * self.chunks_per_slab * self.chunk_size
    }

    fn grow(&mut self) -> Result<(), PoolError> {
        if self.slabs.len() >= self.max_slabs {
            return Err(PoolError::Exhausted {
                pool_bytes: self.max_slabs * self.chunks_per_slab * self.chunk_size,
            });
        }
        let mr = MemoryRegion::new(
            &self.pd,
            self.chunks_per_slab * self.chunk_size,
            Access::LOCAL_WRITE,
        )
        .map_err(PoolError::Register)?;
        let slab = self.slabs.len() as u32;
        self.slabs.push(mr);
        self.free.extend(
            (0..self.chunks_per_slab as u32)
                .rev()
                .map(|i| (slab << SLAB_SHIFT) | i),
        );
        Ok(())
    }

    pub fn alloc(&mut self) -> Result<ChunkId, PoolError> {
        if self.free.is_empty() {
            self.grow()?;
        }
        Ok(self.free.pop().expect("grow added chunks"))
    }

    /// Take `n` chunks at once, or none.
    pub fn alloc_n(&mut self, n: usize) -> Result<Vec<ChunkId>, PoolError> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            match self.alloc() {
                Ok(c) => out.push(c),
                Err(e) => {
                    self.free.extend(out);
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    pub fn free(&mut self, chunk: ChunkId) {
        self.free.push(chunk);
    }

    fn position(&self, chunk: ChunkId) -> (usize, usize) {
        let slab = (chunk >> SLAB_SHIFT) as usize;
        let index = (chunk & ((1 << SLAB_SHIFT) - 1)) as usize;
        (slab, index * self.chunk_size)
    }

    fn locate(&self, chunk: ChunkId) -> (&MemoryRegion, usize) {
        let (slab, offset) = self.position(chunk);
        (&self.slabs[slab], offset)
    }

    /// The scatter/gather entry of `len` bytes of `chunk`.
    pub fn sge(&self, chunk: ChunkId, len: usize) -> Sge<'_> {
        let (mr, offset) = self.locate(chunk);
        mr.sge(offset, len.min(self.chunk_size))
            .expect("chunk ranges lie inside their slab")
    }

    /// Copy `data` into `chunk` at `at`.
    pub fn write(&mut self, chunk: ChunkId, at: usize, data: &[u8]) {
        let (slab, offset) = self.position(chunk);
        self.slabs[slab]
            .write_at(offset + at, data)
            .expect("writes stay inside their chunk");
    }

    /// The first `len` bytes of `chunk`.
    pub fn read(&self, chunk: ChunkId, len: usize) -> &[u8] {
        let (mr, offset) = self.locate(chunk);
        mr.read_at(offset, len.min(self.chunk_size))
            .expect("reads stay inside their chunk")
    }
}
