//! `#[corewire::main]` and `#[corewire::test]` (here through the runtime crate; users of the
//! `corewire` facade write `#[corewire::test]`).

use std::cell::Cell;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;

use corewire_runtime::{shard_count, shard_id, sleep, spawn_local, submit_to};

#[corewire_runtime::test]
async fn runs_on_shard_zero_of_a_one_shard_runtime() {
    assert_eq!((shard_id(), shard_count()), (0, 1));
    // !Send state held across awaits is fine: the body runs on the shard.
    let seen = Rc::new(Cell::new(0));
    let task = spawn_local({
        let seen = seen.clone();
        async move { seen.set(7) }
    });
    sleep(Duration::from_millis(1)).await;
    task.await.unwrap();
    assert_eq!(seen.get(), 7);
}

#[corewire_runtime::test(shards = 3)]
async fn shards_option_starts_more_shards() {
    assert_eq!(shard_count(), 3);
    let ids = [
        submit_to(1, || async { shard_id() }).await.unwrap(),
        submit_to(2, || async { shard_id() }).await.unwrap(),
    ];
    assert_eq!(ids, [1, 2]);
}

#[corewire_runtime::test]
async fn may_return_a_result() -> Result<(), std::io::Error> {
    sleep(Duration::from_millis(1)).await;
    Ok(())
}

#[corewire_runtime::test]
#[should_panic(expected = "left: 1")]
async fn a_failed_assertion_fails_the_test_with_its_message() {
    sleep(Duration::from_millis(1)).await;
    assert_eq!(1, 2);
}

#[corewire_runtime::test]
#[should_panic(expected = "the test returned an error: \"nope\"")]
async fn an_error_fails_the_test() -> Result<(), &'static str> {
    Err("nope")
}

mod failing_main {
    #[corewire_runtime::main(shards = 2)]
    pub async fn main() -> Result<(), String> {
        assert_eq!(corewire_runtime::shard_count(), 2);
        Err("bad config".into())
    }
}

mod good_main {
    // The explicit form, for crates that reach the runtime under another name.
    #[corewire_runtime::main(crate = "corewire_runtime")]
    pub async fn main() {
        corewire_runtime::sleep(std::time::Duration::from_millis(1)).await;
    }
}

#[test]
fn main_maps_its_outcome_to_the_exit_code() {
    assert_eq!(good_main::main(), ExitCode::SUCCESS);
    assert_eq!(failing_main::main(), ExitCode::FAILURE);
}
