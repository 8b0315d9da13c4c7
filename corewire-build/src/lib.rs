//! Code generation for corewire services, from a build script: messages with
//! [`prost`](https://docs.rs/prost), and for each `service` of a `.proto` file a shard-local
//! server trait, a `...Server` wrapper that serves it over gRPC (HTTP/2) and corewire's
//! framing (TCP, RDMA), and a typed `...Client`.
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     corewire_build::compile_protos(&["proto/helloworld.proto"], &["proto"])?;
//!     Ok(())
//! }
//! ```
//!
//! and in the crate, `corewire::include_proto!("helloworld");` (the proto's package), with
//! `corewire` and `prost` as dependencies.
//!
//! # No `protoc`, no network
//!
//! `.proto` files are parsed by [`protox`], a pure-Rust compiler of the protobuf language,
//! into the same descriptors `protoc` produces, and `prost-build` generates the messages from
//! those descriptors. So a build needs neither a `protoc` binary (Debian's is old and
//! `protobuf-compiler` is one more system package to install and keep in step) nor a download
//! of one (builds stay offline and reproducible); `protox` is a Cargo dependency like any
//! other, pinned by `Cargo.lock`. Errors in a `.proto` file are reported with file, line and
//! column, as `protoc` does.
//!
//! # What a service becomes
//!
//! For `service Greeter` in `package helloworld`:
//!
//! - `greeter_server::Greeter`, the trait to implement: `&self` methods returning futures that
//!   need not be `Send` (write them as `async fn`); one instance per shard, made by the
//!   factory given to `Server::builder().service(..)`, keeps its state in `Cell`/`RefCell`.
//!   A unary method takes a `typed::Request<In>` and returns
//!   `Result<typed::Response<Out>, Status>`; a server-streaming method also gets a
//!   `typed::ServerStream<Out>` to send into and returns `Result<(), Status>`.
//! - `greeter_server::GreeterServer<T>`, which implements corewire's raw `Service` for it, so
//!   `Server::builder().service(|_| GreeterServer::new(MyGreeter))` serves it on every
//!   transport, counting calls per method (`MethodStats`).
//! - `greeter_client::GreeterClient<C>`, a method per RPC over any corewire connection.
//!
//! A unary method whose handler never waits can be generated synchronous
//! ([`Builder::sync_methods`]): its trait method is a plain `fn` returning the reply, which
//! the server runs in `Service::call_now`, so its calls cost no future at all.
//!
//! Methods are identified by their full gRPC names (`/helloworld.Greeter/SayHello`). On
//! corewire's framing a method travels as the 32-bit FNV-1a hash of its full name (and the
//! service as that of `helloworld.Greeter`), computed by both ends from the names alone: no
//! set-up exchange per connection, and ids that stay put when methods are added or reordered.
//! Two methods of a service whose names hash alike fail the build here; two services of one
//! server are checked when the server is built.
//!
//! # `bytes` fields: `Vec<u8>` by default, `Bytes` on request
//!
//! A protobuf `bytes` field is generated as prost generates it by default, a `Vec<u8>`: the
//! type tonic's and other prost-based code use, so messages move between them unchanged. A
//! service that carries bulk bytes can have them generated as `bytes::Bytes` instead,
//! through prost-build's own setting:
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! corewire_build::configure()
//!     .prost_config(|c| {
//!         c.bytes(["."]); // every `bytes` field; or name the fields
//!     })
//!     .compile_protos(&["proto/blobs.proto"], &["proto"])?;
//! # Ok(())
//! # }
//! ```
//!
//! A `Bytes` field is decoded as a view of the buffer its message arrived in, where a
//! `Vec<u8>` is an allocation and a copy: decoding and re-encoding a one-field message costs
//! one allocation less and, by callgrind, ~370 instructions instead of ~540 at 64 bytes and
//! ~800 instead of ~1,510 at 4 KiB (corewire's `benches/src/bin/prost_bytes.rs`; a unary
//! call decodes two messages, the request and the reply). It
//! is not the default because the view keeps that whole buffer alive while the field
//! lives: over TCP a receive buffer of up to 64 KiB, shared with the requests that arrived
//! with it, so a service that keeps small fields long (a cache, a store) would hold far more
//! memory than its data; such a service copies what it keeps (`Bytes::copy_from_slice`), or
//! keeps `Vec<u8>`. Changing the generated types would also break code written against the
//! default.
//!
//! Client-streaming and bidirectional methods are not generated yet: the build prints a
//! warning naming them, and a gRPC client calling one gets `UNIMPLEMENTED`.

#![deny(missing_docs)]

mod generator;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use generator::method_id;

/// Why code generation failed.
#[derive(Debug)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Generate messages, servers and clients for `protos` (imports searched in `includes`), into
/// `OUT_DIR`, one `<package>.rs` per protobuf package.
pub fn compile_protos(
    protos: &[impl AsRef<Path>],
    includes: &[impl AsRef<Path>],
) -> Result<(), Error> {
    configure().compile_protos(protos, includes)
}

/// A [`Builder`] with the defaults: servers and clients, into `OUT_DIR`.
pub fn configure() -> Builder {
    Builder {
        build_server: true,
        build_client: true,
        sync_methods: Vec::new(),
        out_dir: None,
        prost: prost_build::Config::new(),
    }
}

/// Code generation settings.
pub struct Builder {
    build_server: bool,
    build_client: bool,
    sync_methods: Vec<String>,
    out_dir: Option<PathBuf>,
    prost: prost_build::Config,
}

impl Builder {
    /// Generate server traits and wrappers (default true).
    pub fn build_server(mut self, yes: bool) -> Builder {
        self.build_server = yes;
        self
    }

    /// Generate clients (default true).
    pub fn build_client(mut self, yes: bool) -> Builder {
        self.build_client = yes;
        self
    }

    /// Unary methods, by full gRPC name (`/package.Service/Method`), whose handlers answer at
    /// once, without waiting: their trait methods are plain `fn`s returning the reply
    /// (`Result<typed::Response<Out>, Status>`) instead of futures. The server runs them in
    /// `Service::call_now`, as the raw layer's fast path, on every transport: a call costs no
    /// future (nothing boxed, nothing moved) and no task, and is counted and traced like any
    /// other; a panic fails it as `Internal`. A handler that may have to wait (for I/O,
    /// another shard, a timer) stays `async`. A name that is not a unary method of the
    /// compiled files fails the build.
    pub fn sync_methods(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Builder {
        self.sync_methods.extend(names.into_iter().map(Into::into));
        self
    }

    /// Write here instead of `OUT_DIR`.
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Builder {
        self.out_dir = Some(dir.into());
        self
    }

    /// prost-build's own settings (attributes on types, `bytes` fields, extern paths, ...).
    pub fn prost_config(mut self, f: impl FnOnce(&mut prost_build::Config)) -> Builder {
        f(&mut self.prost);
        self
    }

    /// Generate code for `protos`, looking for imports in `includes`.
    pub fn compile_protos(
        mut self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<(), Error> {
        let mut compiler = protox::Compiler::new(includes.iter().map(AsRef::as_ref))
            .map_err(|e| Error(format!("{e:?}")))?;
        compiler.include_imports(true).include_source_info(true);
        compiler
            .open_files(protos.iter().map(AsRef::as_ref))
            .map_err(|e| Error(format!("{e:?}")))?;
        // Rebuild when any file read changes, imports included.
        for file in compiler.files() {
            if let Some(path) = file.path() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
        let fds = compiler.file_descriptor_set();
        check_method_ids(&fds)?;
        check_sync_methods(&fds, &self.sync_methods)?;
        if let Some(dir) = &self.out_dir {
            self.prost.out_dir(dir);
        }
        self.prost
            .service_generator(Box::new(generator::Generator::new(
                self.build_server,
                self.build_client,
                self.sync_methods,
            )));
        self.prost
            .compile_fds(fds)
            .map_err(|e| Error(format!("generating code: {e}")))
    }
}

/// Every service's methods must hash to distinct ids (they are told apart by id on
/// corewire's framing).
fn check_method_ids(fds: &prost_types::FileDescriptorSet) -> Result<(), Error> {
    for file in &fds.file {
        for service in &file.service {
            let full = full_service_name(file.package(), service.name());
            let mut seen: HashMap<u32, String> = HashMap::new();
            for m in &service.method {
                let name = format!("/{full}/{}", m.name());
                if let Some(other) = seen.insert(method_id(&name), name.clone()) {
                    return Err(Error(format!(
                        "{}: methods {other} and {name} hash to the same id; rename one",
                        file.name()
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Every method named synchronous must be a unary method of the compiled files (a typo would
/// otherwise leave it `async`, silently).
fn check_sync_methods(fds: &prost_types::FileDescriptorSet, names: &[String]) -> Result<(), Error> {
    for name in names {
        let method = fds.file.iter().find_map(|file| {
            file.service.iter().find_map(|service| {
                let full = full_service_name(file.package(), service.name());
                (service.method.iter()).find(|m| format!("/{full}/{}", m.name()) == *name)
            })
        });
        match method {
            None => {
                return Err(Error(format!(
                    "sync_methods: no method {name} (methods are named /package.Service/Method)"
                )))
            }
            Some(m) if m.client_streaming() || m.server_streaming() => {
                return Err(Error(format!(
                    "sync_methods: {name} streams; only unary methods can be synchronous"
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn full_service_name(package: &str, service: &str) -> String {
    if package.is_empty() {
        service.to_owned()
    } else {
        format!("{package}.{service}")
    }
}

#[cfg(test)]
mod tests;
