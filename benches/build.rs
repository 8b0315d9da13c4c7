//! Generates the tonic service/client stubs for the RPC echo benchmark without protoc: the
//! message is a handwritten prost struct (`src/rpc/message.rs`) and tonic-build's `manual`
//! builder emits only the service glue. corewire's typed echo (the same proto, for the gRPC and
//! typed-call benchmarks) comes from `proto/echo.proto` through corewire-build, with the
//! payload as `Bytes` like the tonic peer's.

fn main() {
    corewire_build::configure()
        .prost_config(|c| {
            c.bytes(["."]);
        })
        .sync_methods(["/corewire.bench.Echo/Echo"])
        .compile_protos(&["proto/echo.proto"], &["proto"])
        .expect("corewire-build");
    let echo = tonic_build::manual::Method::builder()
        .name("echo")
        .route_name("Echo")
        .input_type("crate::rpc::message::EchoMessage")
        .output_type("crate::rpc::message::EchoMessage")
        .codec_path("tonic_prost::ProstCodec")
        .build();
    let service = tonic_build::manual::Service::builder()
        .name("Echo")
        .package("corewire.bench")
        .method(echo)
        .build();
    tonic_build::manual::Builder::new().compile(&[service]);
    println!("cargo:rerun-if-changed=build.rs");
}
