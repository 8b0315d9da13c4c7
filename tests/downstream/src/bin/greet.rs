//! `greet ADDR NAME`: calls the greeter at ADDR and prints its answer.

use corewire::{Client, Service as _};
use corewire_downstream::Greeter;

#[corewire::main(shards = 2)]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(name)) = (args.next(), args.next()) else {
        return Err("usage: greet ADDR NAME".into());
    };
    let addr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    let client = Client::connect_tcp(addr, Default::default())
        .await
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let reply = client
        .call(Greeter::ID, Greeter::GREET, name.into_bytes().into())
        .await
        .map_err(|e| format!("calling the greeter: {e}"))?;
    println!("{}", String::from_utf8_lossy(&reply));
    Ok(())
}
