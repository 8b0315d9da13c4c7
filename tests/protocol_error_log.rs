//! A flood of bad connections is counted in full but logged as a sample (issue: one WARN line
//! per bad connection turned a flood into a log flood).

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corewire::runtime::protocol_error::{LOG_LINES_PER_WINDOW, LOG_WINDOW};
use corewire::{service_id, Request, Response, Runtime, Server, Service, Status};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

struct Echo;
impl Service for Echo {
    const ID: u32 = service_id("echo");
    async fn call(&self, req: Request) -> Result<Response, Status> {
        Ok(Response::new(req.payload))
    }
}

/// Counts the protocol-error log lines.
struct CountLines(Arc<AtomicU64>);

impl<S: tracing::Subscriber> Layer<S> for CountLines {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() == "corewire_runtime::protocol_error" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn a_flood_of_bad_connections_is_counted_and_sampled() {
    const BAD: u64 = 300;
    let lines = Arc::new(AtomicU64::new(0));
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(CountLines(lines.clone())),
    )
    .unwrap();
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    let handle = Server::builder()
        .service(|_| Echo)
        .build()
        .serve(
            &rt,
            corewire::TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()),
        )
        .unwrap();
    let addr = handle.local_addr();
    let start = Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..BAD / 4 {
                    let mut s = std::net::TcpStream::connect(addr).unwrap();
                    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let mut sink = Vec::new();
                    s.read_to_end(&mut sink).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let elapsed = start.elapsed();
    assert_eq!(rt.stats()[0].protocol_errors, BAD, "every one is counted");
    let logged = lines.load(Ordering::SeqCst);
    let windows = elapsed.as_secs_f64() / LOG_WINDOW.as_secs_f64();
    let allowed = (windows.floor() as u64 + 1) * u64::from(LOG_LINES_PER_WINDOW);
    assert!(logged >= 1, "nothing was logged");
    assert!(
        logged <= allowed,
        "{logged} lines for {BAD} bad connections in {elapsed:?} (at most {allowed})"
    );
}
