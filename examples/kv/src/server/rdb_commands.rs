//! The save commands and triggers, on shard 0: SAVE, BGSAVE [SCHEDULE], LASTSAVE,
//! SHUTDOWN [SAVE|NOSAVE], the save after FLUSHALL, the save when the process stops, and
//! the save points (`save SECONDS CHANGES ...`). Each runs a save of `rdb_save.rs`.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use corewire::runtime::{sleep, spawn_local};

use super::rdb_save::{changes_here, on_all, reset_changes_here, save, save_points, SaveError};
use super::shard::{self, now_ms, Shard};
use super::shared::ServerShared;
use super::sink::Origin;
use crate::introspect::Request;
use crate::reply::Reply;

/// After a failed automatic save, the next waits this long (Redis's
/// `CONFIG_BGSAVE_RETRY_DELAY`).
const RETRY_DELAY_MS: u64 = 5_000;
/// How often shard 0 checks the save points.
const CRON_PERIOD: Duration = Duration::from_millis(100);

/// Whether shard 0 answers `request` here.
pub(crate) fn handles(request: &Request) -> bool {
    matches!(
        request,
        Request::Save
            | Request::BgSave { .. }
            | Request::LastSave
            | Request::Shutdown { abort: false, .. }
    )
}

/// SAVE, BGSAVE [SCHEDULE], LASTSAVE and SHUTDOWN on shard 0. `None`: the reply comes later.
pub(crate) fn run(shard: &Shard, origin: Origin, request: Request) -> Option<Reply> {
    let shared = shard.shared.clone();
    let shards = shard.count;
    match request {
        Request::LastSave => Some(Reply::Integer(
            shared.rdb.last_save_s.load(Ordering::Relaxed) as i64,
        )),
        Request::Save => {
            if shared.rdb.lock().in_progress {
                return Some(Reply::error("ERR Background save already in progress"));
            }
            spawn_local(async move {
                // An AOF rewrite holds the snapshot: SAVE waits for it (Redis's SAVE blocks).
                let reply = match save_waiting(shared, shards).await {
                    Ok(()) => Reply::ok(),
                    Err(_) => Reply::error("ERR"),
                };
                shard::current().deliver(origin, reply);
            });
            None
        }
        Request::BgSave { schedule } => {
            if shared.rdb.lock().in_progress {
                return Some(Reply::error("ERR Background save already in progress"));
            }
            spawn_local(async move {
                let _ = save(shared.clone(), shards, move |began| {
                    let reply = match began {
                        Ok(()) => Reply::simple("Background saving started"),
                        Err(SaveError::InProgress) => {
                            Reply::error("ERR Background save already in progress")
                        }
                        Err(_) if schedule => {
                            shared.rdb.lock().scheduled = true;
                            Reply::simple("Background saving scheduled")
                        }
                        Err(_) => Reply::error(
                            "ERR Another child process is active (AOF?): can't BGSAVE right now. \
                             Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
                        ),
                    };
                    shard::current().deliver(origin, reply);
                })
                .await;
            });
            None
        }
        Request::Shutdown {
            abort: false,
            save: wanted,
        } => {
            if !shared.stop.is_owned() {
                return Some(Reply::error(
                    "ERR SHUTDOWN: this server is embedded in a process that did not ask \
                     to be told; stop it from there",
                ));
            }
            let save_it = wanted.unwrap_or_else(|| !save_points(&shared).is_empty());
            if !save_it {
                shared.rdb.lock().shutdown_handled = true;
                tracing::info!("SHUTDOWN: stopping without saving (the AOF is flushed first)");
                shared.stop.request();
                return Some(Reply::NullBulk);
            }
            spawn_local(async move {
                let reply = match save_waiting(shared.clone(), shards).await {
                    Ok(()) => {
                        shared.rdb.lock().shutdown_handled = true;
                        tracing::info!("SHUTDOWN: saved; stopping (the AOF is flushed first)");
                        shared.stop.request();
                        Reply::NullBulk
                    }
                    Err(_) => Reply::error("ERR Errors trying to SHUTDOWN. Check logs."),
                };
                shard::current().deliver(origin, reply);
            });
            None
        }
        other => Some(Reply::error(format!(
            "ERR internal error: {} is not a save request",
            other.name()
        ))),
    }
}

/// A save that first waits for one in progress to end (shutdown, FLUSHALL).
async fn save_waiting(shared: Arc<ServerShared>, shards: usize) -> Result<(), SaveError> {
    loop {
        match save(shared.clone(), shards, |_| {}).await {
            Err(SaveError::InProgress | SaveError::RewriteRunning) => {
                sleep(Duration::from_millis(10)).await
            }
            other => return other,
        }
    }
}

/// After this shard's part of FLUSHALL. With save points set, its changes count from zero
/// again (Redis saves the emptied dataset then, resetting the counter), and the last shard
/// to flush saves the empty dataset in the background.
pub(crate) fn after_flushall_part(shard: &Shard) {
    let shared = shard.shared.clone();
    if save_points(&shared).is_empty() {
        return;
    }
    reset_changes_here(0);
    let parts = shared.rdb.flush_parts.fetch_add(1, Ordering::Relaxed) + 1;
    if !parts.is_multiple_of(shard.count as u64) {
        return;
    }
    let shards = shard.count;
    spawn_local(async move {
        if let Err(error) = save_waiting(shared, shards).await {
            tracing::error!(?error, "the save after FLUSHALL failed");
        }
    });
}

/// The process is stopping (a signal, or SHUTDOWN from the owner): saves if save points are
/// set and SHUTDOWN did not already settle it. Runs on shard 0.
pub(crate) async fn save_on_stop(shared: Arc<ServerShared>, shards: usize) {
    if shared.rdb.shutdown_handled() || save_points(&shared).is_empty() {
        return;
    }
    match save_waiting(shared, shards).await {
        Ok(()) => tracing::info!("saved the dataset before stopping"),
        Err(error) => tracing::error!(?error, "the save before stopping failed"),
    }
}

/// Shard 0's timer: starts a background save when a save point is reached (`save SECONDS
/// CHANGES`: at least CHANGES writes and more than SECONDS since the last save), or when a
/// scheduled BGSAVE can run.
pub(crate) async fn run_save_points(shard: Rc<Shard>) {
    let shared = shard.shared.clone();
    let shards = shard.count;
    let all: Vec<usize> = (0..shards).collect();
    loop {
        sleep(CRON_PERIOD).await;
        let (busy, scheduled, last_failed, last_try_ms) = {
            let state = shared.rdb.lock();
            (
                state.in_progress,
                state.scheduled,
                state.last_failed,
                state.last_try_ms,
            )
        };
        if busy {
            continue;
        }
        let now = now_ms();
        let mut due = scheduled;
        if !due {
            let points = save_points(&shared);
            if points.is_empty() {
                continue;
            }
            if last_failed && now.saturating_sub(last_try_ms) <= RETRY_DELAY_MS {
                continue;
            }
            let changes: u64 = on_all(&all, changes_here).await.into_iter().flatten().sum();
            let since = (now / 1000).saturating_sub(shared.rdb.last_save_s.load(Ordering::Relaxed));
            due = points
                .iter()
                .any(|&(seconds, needed)| changes >= needed && since > seconds);
            if due {
                tracing::info!(changes, seconds = since, "save point reached: saving");
            }
        }
        if due {
            let result = save(shared.clone(), shards, |_| {}).await;
            if scheduled && !matches!(result, Err(SaveError::RewriteRunning)) {
                shared.rdb.lock().scheduled = false;
            }
        }
    }
}
