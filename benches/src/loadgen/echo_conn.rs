//! Drives one pipelined raw-echo connection on a tokio current-thread runtime until the
//! timeline ends, using readiness + non-blocking reads/writes so that reading never waits on a
//! write that the server cannot drain (no deadlock at any depth or size).

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::rc::Rc;

use tokio::io::Interest;
use tokio::net::TcpStream;

use super::harness::{GroupStats, Timeline};
use crate::pipeline::{Pipeline, PipelineError};

/// Why a connection stopped before the end of the run.
#[derive(Debug)]
pub enum DriveError {
    Io(io::Error),
    /// The server closed the connection.
    Closed,
    /// The server's echo did not match the request.
    Protocol(PipelineError),
}

impl fmt::Display for DriveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriveError::Io(e) => write!(f, "i/o error: {e}"),
            DriveError::Closed => write!(f, "server closed the connection"),
            DriveError::Protocol(e) => write!(f, "bad echo: {e}"),
        }
    }
}

impl std::error::Error for DriveError {}

impl From<io::Error> for DriveError {
    fn from(e: io::Error) -> Self {
        DriveError::Io(e)
    }
}

/// Shape of one connection's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnSpec {
    /// Index of the stats group the connection reports into.
    pub group: usize,
    pub size: usize,
    pub depth: usize,
}

/// Runs `spec` on `stream` until the timeline ends; completions inside the measured window are
/// recorded in `stats[spec.group]`.
pub async fn drive(
    stream: TcpStream,
    spec: ConnSpec,
    timeline: Timeline,
    stats: Rc<Vec<RefCell<GroupStats>>>,
) -> Result<(), DriveError> {
    let end = tokio::time::Instant::from_std(timeline.end());
    match tokio::time::timeout_at(end, pump(&stream, spec, timeline, &stats)).await {
        // The window ended with requests in flight: that is the normal way to stop.
        Err(_elapsed) => Ok(()),
        Ok(result) => result,
    }
}

async fn pump(
    stream: &TcpStream,
    spec: ConnSpec,
    timeline: Timeline,
    stats: &[RefCell<GroupStats>],
) -> Result<(), DriveError> {
    let mut pipe = Pipeline::new(spec.size, spec.depth);
    loop {
        pipe.refill(timeline.now_ns());
        let interest = if pipe.output().is_empty() {
            Interest::READABLE
        } else {
            Interest::READABLE | Interest::WRITABLE
        };
        let ready = stream.ready(interest).await?;
        if ready.is_writable() && !pipe.output().is_empty() {
            match stream.try_write(pipe.output()) {
                Ok(n) => pipe.wrote(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
        }
        if ready.is_readable() {
            match stream.try_read(pipe.read_space()) {
                Ok(0) => return Err(DriveError::Closed),
                Ok(n) => {
                    let now = timeline.now_ns();
                    let in_window = timeline.in_window(now);
                    let mut group = stats[spec.group].borrow_mut();
                    pipe.received(n, now, |latency| {
                        if in_window {
                            group.record(latency, spec.size);
                        }
                    })
                    .map_err(DriveError::Protocol)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
