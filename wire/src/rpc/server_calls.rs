//! The server side of one connection's calls: which requests are running, and the window that
//! bounds them. A request counts from the moment it is read until its reply is queued, so the
//! window bounds the requests *and* the replies a connection holds in memory.

use std::collections::HashMap;
use std::fmt;

/// Why a request cannot start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartError {
    /// A request with this correlation id is still running: the peer broke the protocol.
    DuplicateId(u64),
    /// The window is full. A server stops reading before this can happen; reaching it means
    /// the glue forgot to wait.
    WindowFull,
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::DuplicateId(id) => {
                write!(f, "request id {id} reused while that request is running")
            }
            StartError::WindowFull => f.write_str("too many requests running on the connection"),
        }
    }
}

impl std::error::Error for StartError {}

/// Running requests of one connection by correlation id, each with a token (e.g. the handle
/// that cancels it).
#[derive(Debug)]
pub struct ServerCalls<T> {
    running: HashMap<u64, T>,
    window: usize,
}

impl<T> ServerCalls<T> {
    /// At most `window` requests at once (at least one).
    pub fn new(window: usize) -> ServerCalls<T> {
        ServerCalls {
            running: HashMap::new(),
            window: window.max(1),
        }
    }

    /// Most requests running at once.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Requests running now.
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// Whether no request is running.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// No request may start now: stop reading until one finishes.
    pub fn is_full(&self) -> bool {
        self.running.len() >= self.window
    }

    /// Whether request `id` may start (checked before doing any work for it).
    pub fn check(&self, id: u64) -> Result<(), StartError> {
        if self.running.contains_key(&id) {
            Err(StartError::DuplicateId(id))
        } else if self.is_full() {
            Err(StartError::WindowFull)
        } else {
            Ok(())
        }
    }

    /// Starts request `id` with the caller's `token` (see [`ServerCalls::check`]).
    pub fn start(&mut self, id: u64, token: T) -> Result<(), StartError> {
        self.check(id)?;
        self.running.insert(id, token);
        Ok(())
    }

    /// The token of running request `id`.
    pub fn get(&self, id: u64) -> Option<&T> {
        self.running.get(&id)
    }

    /// Request `id` finished (its reply is queued) or was cancelled: its token, if it was
    /// running.
    pub fn finish(&mut self, id: u64) -> Option<T> {
        self.running.remove(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_bounds_running_requests() {
        let mut calls = ServerCalls::new(2);
        calls.start(1, ()).unwrap();
        assert!(!calls.is_full());
        calls.start(2, ()).unwrap();
        assert!(calls.is_full());
        assert_eq!(calls.start(3, ()), Err(StartError::WindowFull));
        assert_eq!(calls.finish(1), Some(()));
        assert!(!calls.is_full());
        calls.start(3, ()).unwrap();
    }

    #[test]
    fn a_running_id_cannot_be_reused() {
        let mut calls = ServerCalls::new(8);
        calls.start(7, "a").unwrap();
        assert_eq!(calls.check(7), Err(StartError::DuplicateId(7)));
        assert_eq!(calls.finish(7), Some("a"));
        assert_eq!(calls.finish(7), None);
        calls.start(7, "b").unwrap();
    }
}
