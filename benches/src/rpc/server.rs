//! tonic unary echo server on a tokio multi-thread runtime with N workers; stops on SIGTERM.

use std::fmt;
use std::net::SocketAddr;

use tokio::signal::unix::{signal, SignalKind};
use tonic::{Request, Response, Status};

use super::generated::echo_server::{Echo, EchoServer};
use super::message::EchoMessage;
use crate::frame::MAX_PAYLOAD;

/// Server parameters.
#[derive(Debug, Clone)]
pub struct RpcServerConfig {
    pub addr: SocketAddr,
    pub workers: usize,
}

/// Why the server stopped abnormally.
#[derive(Debug)]
pub enum RpcServerError {
    Io(std::io::Error),
    Transport(tonic::transport::Error),
}

impl fmt::Display for RpcServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcServerError::Io(e) => write!(f, "{e}"),
            RpcServerError::Transport(e) => write!(f, "tonic transport: {e}"),
        }
    }
}

impl std::error::Error for RpcServerError {}

/// Returns each request's message as the response.
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoService;

#[tonic::async_trait]
impl Echo for EchoService {
    async fn echo(&self, request: Request<EchoMessage>) -> Result<Response<EchoMessage>, Status> {
        Ok(Response::new(request.into_inner()))
    }
}

/// Serves until SIGTERM or SIGINT.
pub fn run(cfg: &RpcServerConfig) -> Result<(), RpcServerError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.workers.max(1))
        .enable_all()
        .build()
        .map_err(RpcServerError::Io)?;
    runtime.block_on(async {
        let mut term = signal(SignalKind::terminate()).map_err(RpcServerError::Io)?;
        let mut int = signal(SignalKind::interrupt()).map_err(RpcServerError::Io)?;
        // Same message limit as the raw echo peers (plus protobuf framing).
        let service = EchoServer::new(EchoService)
            .max_decoding_message_size(MAX_PAYLOAD + 64)
            .max_encoding_message_size(MAX_PAYLOAD + 64);
        eprintln!(
            "rpc_tonic: serving on {} (workers={})",
            cfg.addr, cfg.workers
        );
        tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .add_service(service)
            .serve_with_shutdown(cfg.addr, async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            })
            .await
            .map_err(RpcServerError::Transport)
    })
}
