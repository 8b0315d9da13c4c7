//! The greeter's services, generated from its `.proto` files.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    corewire_build::compile_protos(
        &["proto/helloworld.proto", "proto/hellostreams.proto"],
        &["proto"],
    )?;
    Ok(())
}
