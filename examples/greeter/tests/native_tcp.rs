//! The generated corewire client calls the greeter over corewire's framing on TCP; the server
//! counts the cancelled calls like gRPC's.

mod common;

use corewire::ClientOptions;

const SLOWLY: &str = "/hellostreams.MultiGreeter/SayHelloSlowly";
const SAY_HELLOS: &str = "/hellostreams.MultiGreeter/SayHellos";

#[test]
fn the_generated_client_over_tcp() {
    let g = common::start();
    let addr = g.native;
    g.rt.run_on(0, move || async move {
        let client = corewire::Client::connect_tcp(addr, ClientOptions::default())
            .await
            .unwrap();
        common::typed_calls(client).await;
    })
    .unwrap();
    // The late call ended at its deadline (the server's timer or the client's cancel, which
    // ever came first), the dropped call and the dropped stream were cancelled.
    assert_eq!(
        common::wait_for_count(g.metrics, SAY_HELLOS, "CANCELLED", 1),
        1
    );
    assert_eq!(common::wait_for_count(g.metrics, SLOWLY, "ALL", 2), 2);
    let text = common::scrape(g.metrics);
    assert_eq!(
        common::count(&text, SLOWLY, "DEADLINE_EXCEEDED")
            + common::count(&text, SLOWLY, "CANCELLED"),
        2,
        "{text}"
    );
    assert_eq!(
        common::count(&text, "/helloworld.Greeter/SayHello", "ALL"),
        2
    );
}
