//! gRPC's `helloworld.Greeter` on corewire, plus `hellostreams.MultiGreeter` (a stream of
//! greetings, a slow greeting, failures on request): services generated from `proto/` by
//! `corewire-build` (see `build.rs`), implemented once, served over gRPC (HTTP/2) for any
//! gRPC client and over corewire's framing on TCP and RDMA.
//!
//! `cargo run --release --example greeter -- --grpc 127.0.0.1:50051 --native 127.0.0.1:7100`

use std::cell::Cell;
use std::time::Duration;

use corewire::transport::grpc::Code;
use corewire::typed::{Request, Response, ServerStream};
use corewire::{Server, Status};

/// Generated from gRPC's canonical `helloworld.proto`.
pub mod helloworld {
    corewire::include_proto!("helloworld");
}

/// Generated from `hellostreams.proto`.
pub mod hellostreams {
    corewire::include_proto!("hellostreams");
}

use hellostreams::multi_greeter_server::{MultiGreeter, MultiGreeterServer};
use hellostreams::{FailRequest, ManyHellosRequest, SlowHelloRequest};
use helloworld::greeter_server::{Greeter, GreeterServer};
use helloworld::{HelloReply, HelloRequest};

/// The canonical greeter: "Hello NAME". Metadata `x-echo` is sent back as reply metadata.
/// One instance per shard, counting the greetings it gave (shard-local state in a `Cell`).
#[derive(Debug, Default)]
pub struct HelloGreeter {
    greeted: Cell<u64>,
}

impl HelloGreeter {
    /// Greetings this shard's instance gave.
    pub fn greeted(&self) -> u64 {
        self.greeted.get()
    }
}

impl Greeter for HelloGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        self.greeted.set(self.greeted.get() + 1);
        let mut reply = Response::new(HelloReply {
            message: format!("Hello {}", request.get_ref().name),
        });
        if let Some(echo) = request.metadata().get("x-echo") {
            reply.metadata_mut().insert("x-echo", echo);
        }
        Ok(reply)
    }
}

/// The streaming, slow and failing greetings.
#[derive(Debug, Default)]
pub struct Streams;

impl MultiGreeter for Streams {
    async fn say_hellos(
        &self,
        request: Request<ManyHellosRequest>,
        mut replies: ServerStream<HelloReply>,
    ) -> Result<(), Status> {
        let ManyHellosRequest {
            name,
            count,
            interval_ms,
        } = request.into_inner();
        for i in 0..count {
            if i > 0 && interval_ms > 0 {
                corewire::sleep(Duration::from_millis(interval_ms.into())).await;
            }
            replies
                .send(HelloReply {
                    message: format!("Hello {name} #{i}"),
                })
                .await?;
        }
        Ok(())
    }

    async fn say_hello_slowly(
        &self,
        request: Request<SlowHelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let SlowHelloRequest { name, delay_ms } = request.into_inner();
        corewire::sleep(Duration::from_millis(delay_ms.into())).await;
        Ok(Response::new(HelloReply {
            message: format!("Hello {name}, slowly"),
        }))
    }

    fn fail(&self, request: Request<FailRequest>) -> Result<Response<HelloReply>, Status> {
        let FailRequest { code, message } = request.into_inner();
        let Some(code) = Code::from_value(code) else {
            return Err(Status::BadRequest(format!("no gRPC code {code}")));
        };
        match code.to_status(message) {
            Some(status) => Err(status),
            None => Ok(Response::new(HelloReply {
                message: "Hello, no failure".into(),
            })),
        }
    }
}

/// Both services, one instance of each per shard.
pub fn server() -> Server {
    Server::builder()
        .service(|_shard| GreeterServer::new(HelloGreeter::default()))
        .service(|_shard| MultiGreeterServer::new(Streams))
        .build()
}
