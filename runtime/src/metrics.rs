//! Prometheus text exposition of every shard's counters, served over HTTP by a task on one of
//! the runtime's own shards (no extra thread, no HTTP library).
//!
//! ```no_run
//! use corewire_runtime::{metrics::MetricsServer, Runtime};
//! let rt = Runtime::builder().shards(2).build().unwrap();
//! let metrics = MetricsServer::serve(&rt, 0, "127.0.0.1:9464".parse().unwrap()).unwrap();
//! // curl http://127.0.0.1:9464/metrics
//! # drop(metrics);
//! ```
//!
//! Every [`ShardStats`](crate::ShardStats) field becomes one metric family named
//! `corewire_<field>` (counters get the `_total` suffix), labelled `shard="N"`, with the
//! field's documentation as its `# HELP` line; `corewire_backend_info{backend="io_uring"}`
//! (or `"epoll"`) says which I/O backend the shards run on. The exporter is bounded: at most
//! [`MAX_CONNECTIONS`] scrapes at once (more wait in the kernel's backlog), requests over
//! 8 KiB or slower than 5 s are closed, and each response is written once and the connection
//! closed.
//!
//! Higher layers add their own families ([`MetricsSource`], [`register_source`]): the service
//! framework's per-method request counts, errors by code and latency histograms come out of
//! the same endpoint.

use std::collections::BTreeMap;
use std::fmt::{Display, Write as _};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::{Mutex, Weak};
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::accept::StopSignal;
use crate::net::{ListenOptions, TcpListener, TcpStream};
use crate::shard::{context, ShardId, ShardStatsSnapshot, StatKind};
use crate::sync::Semaphore;
use crate::{sleep, spawn_local, timeout, Runtime};

/// Scrapes served at once; further connections wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 16;
const MAX_REQUEST: usize = 8 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A running exporter. Dropping it (or [`stop`](MetricsServer::stop)) closes the listener;
/// scrapes in progress finish on their own.
pub struct MetricsServer {
    local: SocketAddr,
    stop: Arc<StopSignal>,
}

impl MetricsServer {
    /// Listen on `addr` from shard `shard` and answer `GET /metrics` with every shard's
    /// counters. Fails if the address cannot be bound or the shard does not exist.
    pub fn serve(rt: &Runtime, shard: ShardId, addr: SocketAddr) -> io::Result<MetricsServer> {
        if shard >= rt.shard_count() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no shard {shard}"),
            ));
        }
        let stop = Arc::new(StopSignal::default());
        let task_stop = stop.clone();
        let local = rt
            .run_on(shard, move || async move {
                let listener = TcpListener::bind(addr, ListenOptions::default())?;
                let local = listener.local_addr();
                spawn_local(async move {
                    task_stop.run_until_stopped(accept_loop(listener)).await;
                });
                Ok::<_, io::Error>(local)
            })
            .map_err(|e| io::Error::other(format!("metrics shard: {e}")))??;
        tracing::info!(%local, shard, "metrics exporter listening");
        Ok(MetricsServer { local, stop })
    }

    /// The address it listens on (the port chosen, if `addr` had port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Close the listener (same as dropping it).
    pub fn stop(self) {}
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.stop();
    }
}

async fn accept_loop(listener: TcpListener) {
    let slots = Rc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = match slots.clone().acquire_owned(1).await {
            Ok(p) => p,
            Err(_) => return,
        };
        match listener.accept().await {
            Ok((stream, _)) => {
                spawn_local(async move {
                    if let Err(e) = serve_one(stream).await {
                        tracing::debug!(error = %e, "metrics scrape failed");
                    }
                    drop(permit);
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning on the error.
                tracing::warn!(error = %e, "metrics exporter accept failed");
                sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn serve_one(stream: TcpStream) -> io::Result<()> {
    let head = match timeout(REQUEST_TIMEOUT, read_head(&stream)).await {
        Ok(head) => head?,
        Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "slow request")),
    };
    let response = match head {
        Some(head) => respond(&head),
        None => http_response("400 Bad Request", "text/plain", "bad request\n".into()),
    };
    stream.send_all(response).await?;
    let _ = stream.shutdown_write();
    Ok(())
}

/// The request line and headers, or `None` if they are too long or the peer closed early.
async fn read_head(stream: &TcpStream) -> io::Result<Option<Bytes>> {
    let mut buf = BytesMut::with_capacity(1024);
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Some(buf.split_to(end).freeze()));
        }
        if buf.len() >= MAX_REQUEST {
            return Ok(None);
        }
        let (res, b) = stream.recv(buf, 1024).await;
        buf = b;
        if res? == 0 {
            return Ok(None);
        }
    }
}

fn respond(head: &[u8]) -> Bytes {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next().unwrap_or_default(), parts.next());
    match (method, path) {
        (b"GET", Some(b"/metrics" | b"/")) => {
            let snapshots: Vec<ShardStatsSnapshot> = context::current()
                .peers
                .iter()
                .map(|s| s.stats.snapshot())
                .collect();
            let backend = context::with_driver(|d| d.backend());
            let mut text = render(&snapshots);
            text.push_str(&render_backend(backend));
            text.push_str(&render_sources(&context::current().peers));
            http_response("200 OK", "text/plain; version=0.0.4; charset=utf-8", text)
        }
        (b"GET", Some(_)) => http_response("404 Not Found", "text/plain", "try /metrics\n".into()),
        _ => http_response(
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics only\n".into(),
        ),
    }
}

fn http_response(status: &str, content_type: &str, body: String) -> Bytes {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    out.push_str(&body);
    Bytes::from(out)
}

/// The Prometheus text format (version 0.0.4) of `shards`' counters, shard `i` labelled
/// `shard="i"`.
pub fn render(shards: &[ShardStatsSnapshot]) -> String {
    let mut out = String::new();
    for (field, (name, help, kind)) in ShardStatsSnapshot::FIELDS.iter().enumerate() {
        let (metric, ty) = match kind {
            StatKind::Counter => (format!("corewire_{name}_total"), "counter"),
            StatKind::Gauge => (format!("corewire_{name}"), "gauge"),
        };
        let _ = writeln!(out, "# HELP {metric} {}", escape_help(help.trim()));
        let _ = writeln!(out, "# TYPE {metric} {ty}");
        for (shard, snap) in shards.iter().enumerate() {
            let _ = writeln!(
                out,
                "{metric}{{shard=\"{shard}\"}} {}",
                snap.values()[field]
            );
        }
    }
    out
}

/// The info metric naming the backend: `corewire_backend_info{backend="epoll"} 1`.
pub fn render_backend(backend: crate::Backend) -> String {
    format!(
        "# HELP corewire_backend_info The I/O backend the shards run on (io_uring or epoll).\n\
         # TYPE corewire_backend_info gauge\n\
         corewire_backend_info{{backend=\"{backend}\"}} 1\n"
    )
}

fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A label value as the text format wants it (backslash, quote and newline escaped).
pub fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// What a family of metrics is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricType {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets, sum and count.
    Histogram,
}

impl MetricType {
    fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
        }
    }
}

/// Metric families being gathered for one scrape: every sample of a family comes out
/// together under one `# HELP`/`# TYPE`, whichever source and shard added it.
#[derive(Debug, Default)]
pub struct Families {
    families: BTreeMap<String, (String, MetricType, String)>,
}

impl Families {
    /// Add one sample to family `family` (described by `help` and `kind` the first time):
    /// the line `family{suffix}{labels} value`, where `suffix` is `""`, or `_bucket`, `_sum`,
    /// `_count` for a histogram, and `labels` is `k="v",...` (values escaped with
    /// [`escape_label`]).
    pub fn sample(
        &mut self,
        family: &str,
        help: &str,
        kind: MetricType,
        suffix: &str,
        labels: &str,
        value: impl Display,
    ) {
        let entry = self
            .families
            .entry(family.to_owned())
            .or_insert_with(|| (escape_help(help.trim()), kind, String::new()));
        let _ = writeln!(entry.2, "{family}{suffix}{{{labels}}} {value}");
    }

    /// The text format of every family.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, (help, kind, lines)) in &self.families {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {}", kind.as_str());
            out.push_str(lines);
        }
        out
    }
}

/// Metrics a higher layer keeps (readable from any thread: atomics, usually written by one
/// shard alone), exported with the shard counters.
pub trait MetricsSource: Send + Sync {
    /// Add this source's samples.
    fn collect(&self, out: &mut Families);
}

/// Export `source` from the current shard's runtime for as long as it lives (a weak
/// reference is kept: dropping the last `Arc` unregisters it). Off a shard, nothing happens.
pub fn register_source(source: Weak<dyn MetricsSource>) {
    if let Some(ctx) = context::try_current() {
        let mut sources = lock(&ctx.remote.metric_sources);
        sources.retain(|s| s.strong_count() > 0);
        sources.push(source);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every live source of `shards`, rendered.
fn render_sources(shards: &[Arc<crate::shard::ShardRemote>]) -> String {
    let mut families = Families::default();
    for shard in shards {
        let sources: Vec<_> = lock(&shard.metric_sources)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for source in sources {
            source.collect(&mut families);
        }
    }
    families.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_is_rendered_with_help_and_type() {
        let a = ShardStatsSnapshot {
            tasks_polled: 5,
            ..Default::default()
        };
        let b = ShardStatsSnapshot {
            tasks_live: 2,
            ..Default::default()
        };
        let text = render(&[a, b]);
        assert!(text.contains("# TYPE corewire_tasks_polled_total counter\n"));
        assert!(text.contains("corewire_tasks_polled_total{shard=\"0\"} 5\n"));
        assert!(text.contains("corewire_tasks_polled_total{shard=\"1\"} 0\n"));
        assert!(text.contains("# TYPE corewire_tasks_live gauge\n"));
        assert!(text.contains("corewire_tasks_live{shard=\"1\"} 2\n"));
        for (name, help, _) in ShardStatsSnapshot::FIELDS {
            assert!(!help.trim().is_empty(), "{name} is undocumented");
            assert!(text.contains(help.trim()), "{name}'s help is missing");
        }
        // Each family: HELP, TYPE, one line per shard.
        assert_eq!(text.lines().count(), ShardStatsSnapshot::FIELDS.len() * 4);
    }

    #[test]
    fn the_backend_is_a_label() {
        let text = render_backend(crate::Backend::Epoll);
        assert!(text.contains("# TYPE corewire_backend_info gauge\n"));
        assert!(text.ends_with("corewire_backend_info{backend=\"epoll\"} 1\n"));
    }

    #[test]
    fn families_group_samples_from_every_source() {
        let mut f = Families::default();
        f.sample("x_total", "X.", MetricType::Counter, "", "shard=\"0\"", 1);
        f.sample(
            "a_seconds",
            "A.",
            MetricType::Histogram,
            "_count",
            "shard=\"0\"",
            2,
        );
        f.sample("x_total", "X.", MetricType::Counter, "", "shard=\"1\"", 3);
        assert_eq!(
            f.render(),
            "# HELP a_seconds A.\n# TYPE a_seconds histogram\na_seconds_count{shard=\"0\"} 2\n\
             # HELP x_total X.\n# TYPE x_total counter\nx_total{shard=\"0\"} 1\n\
             x_total{shard=\"1\"} 3\n"
        );
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn bad_requests_get_errors() {
        let not_found = respond(b"GET /other HTTP/1.1\r\nHost: x");
        assert!(not_found.starts_with(b"HTTP/1.1 404"));
        let post = respond(b"POST /metrics HTTP/1.1");
        assert!(post.starts_with(b"HTTP/1.1 405"));
        let garbage = respond(b"\x00\xff");
        assert!(garbage.starts_with(b"HTTP/1.1 405"));
    }
}
