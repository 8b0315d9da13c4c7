//! A shard's registered buffers: fixed-size chunks carved from a few memory regions that are
//! registered as the pool grows, up to a cap. Connections take their receive buffers from it
//! and borrow send buffers per message.
//!
//! Receive buffers are pinned for as long as a connection lives, so they may never take the
//! whole pool: `send_reserve` chunks always stay for sends. Send chunks come back as soon as
//! their SEND completes (the peer had a posted buffer for it: credits guarantee that), so a
//! sender that finds the pool empty can always wait for one instead of failing.

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
    /// Chunks held as receive buffers.
    recv_in_use: usize,
    /// Chunks lent to sends in flight.
    send_in_use: usize,
    /// Chunks receive buffers may never take.
    send_reserve: usize,
}

/// Why the shard's buffer pool had no room.
#[derive(Debug)]
#[non_exhaustive]
pub enum PoolError {
    /// The pool reached its configured size.
    Exhausted {
        /// The pool's size per shard.
        pool_bytes: usize,
    },
    /// No room for a connection's receive buffers: the rest is held by other connections'
    /// receive buffers or kept for sends.
    NoRoomForReceives {
        /// Chunks the connection needs.
        wanted: u32,
        /// Chunks held as receive buffers.
        recv_in_use: u32,
        /// Chunks kept for sends.
        send_reserve: u32,
        /// Chunks in the pool.
        capacity: u32,
        /// Bytes per chunk.
        chunk_size: u32,
    },
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
            PoolError::NoRoomForReceives {
                wanted,
                recv_in_use,
                send_reserve,
                capacity,
                chunk_size,
            } => write!(
                f,
                "RDMA buffer pool full: {wanted} receive buffers wanted, {recv_in_use} of \
                 {capacity} chunks of {chunk_size} B already hold other connections' receive \
                 buffers and {send_reserve} are kept for sends (raise RdmaConfig::pool_bytes)"
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
        send_reserve: usize,
    ) -> BufferPool {
        let chunks_per_slab = (slab_bytes / chunk_size).clamp(1, 1 << SLAB_SHIFT);
        let slab_len = chunks_per_slab * chunk_size;
        let max_slabs = (pool_bytes / slab_len).max(1);
        let capacity = max_slabs * chunks_per_slab;
        BufferPool {
            pd,
            slabs: Vec::new(),
            free: Vec::new(),
            chunk_size,
            chunks_per_slab,
            max_slabs,
            recv_in_use: 0,
            send_in_use: 0,
            send_reserve: send_reserve.clamp(1, capacity),
        }
    }

    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    pub fn free_chunks(&self) -> usize {
        self.free.len()
    }

    /// Chunks the pool may hold once fully grown.
    pub fn capacity(&self) -> usize {
        self.max_slabs * self.chunks_per_slab
    }

    pub fn registered_bytes(&self) -> usize {
        self.slabs.len() * self.chunks_per_slab * self.chunk_size
    }

    pub fn recv_in_use(&self) -> usize {
        self.recv_in_use
    }

    pub fn send_in_use(&self) -> usize {
        self.send_in_use
    }

    fn grow(&mut self) -> Result<(), PoolError> {
        if self.slabs.len() >= self.max_slabs {
            return Err(PoolError::Exhausted {
                pool_bytes: self.capacity() * self.chunk_size,
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

    fn take(&mut self) -> Result<ChunkId, PoolError> {
        if self.free.is_empty() {
            self.grow()?;
        }
        Ok(self.free.pop().expect("grow added chunks"))
    }

    /// A buffer for one SEND, given back with [`free_send`](Self::free_send) when it
    /// completes. `Exhausted` means every chunk is in use: wait for a send to complete.
    pub fn alloc_send(&mut self) -> Result<ChunkId, PoolError> {
        let c = self.take()?;
        self.send_in_use += 1;
        Ok(c)
    }

    /// `n` receive buffers at once, or none; never from the send reserve.
    pub fn alloc_recv(&mut self, n: usize) -> Result<Vec<ChunkId>, PoolError> {
        if self.recv_in_use + n + self.send_reserve > self.capacity() {
            let small = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            return Err(PoolError::NoRoomForReceives {
                wanted: small(n),
                recv_in_use: small(self.recv_in_use),
                send_reserve: small(self.send_reserve),
                capacity: small(self.capacity()),
                chunk_size: small(self.chunk_size),
            });
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            match self.take() {
                Ok(c) => out.push(c),
                Err(e) => {
                    self.free.extend(out);
                    return Err(e);
                }
            }
        }
        self.recv_in_use += n;
        Ok(out)
    }

    pub fn free_send(&mut self, chunk: ChunkId) {
        debug_assert!(self.send_in_use > 0);
        self.send_in_use = self.send_in_use.saturating_sub(1);
        self.free.push(chunk);
    }

    pub fn free_recv(&mut self, chunk: ChunkId) {
        debug_assert!(self.recv_in_use > 0);
        self.recv_in_use = self.recv_in_use.saturating_sub(1);
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
