fn main() -> Result<(), Box<dyn std::error::Error>> {
    corewire_build::compile_protos(&["proto/shop/catalog.proto"], &["proto"])?;
    Ok(())
}
