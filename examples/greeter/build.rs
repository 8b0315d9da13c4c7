//! The greeter's services, generated from its `.proto` files.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `Fail` answers at once: generated synchronous (served in `call_now`), beside a
    // streaming method and one that waits.
    corewire_build::configure()
        .sync_methods(["/hellostreams.MultiGreeter/Fail"])
        .compile_protos(
            &["proto/helloworld.proto", "proto/hellostreams.proto"],
            &["proto"],
        )?;
    Ok(())
}
