fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `Get` answers from the shard's shelf at once: generated synchronous, beside an `async`
    // unary method and a streaming one.
    corewire_build::configure()
        .sync_methods(["/shop.catalog.Catalog/Get"])
        .compile_protos(&["proto/shop/catalog.proto"], &["proto"])?;
    Ok(())
}
