//! The service part of the generated code (prost-build writes the messages).

use std::fmt::Write as _;

use prost_build::{Method, Service, ServiceGenerator};

/// The id corewire's framing gives a service or method name: 32-bit FNV-1a, the same
/// function as `corewire::service_id`.
pub fn method_id(name: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for &b in name.as_bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

pub(crate) struct Generator {
    server: bool,
    client: bool,
    /// Full names (`/package.Service/Method`) of the unary methods generated synchronous.
    sync: Vec<String>,
}

impl Generator {
    pub(crate) fn new(server: bool, client: bool, sync: Vec<String>) -> Generator {
        Generator {
            server,
            client,
            sync,
        }
    }

    /// Whether `method` of `service` is generated synchronous (a plain `fn`, served in
    /// `call_now`).
    fn is_sync(&self, service: &Service, method: &Method) -> bool {
        let name = format!("/{}/{}", full_name(service), method.proto_name);
        !method.server_streaming && self.sync.contains(&name)
    }
}

/// `GreeterService` → `greeter_service`.
fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.char_indices() {
        if c.is_ascii_uppercase() {
            if i != 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn doc(comments: &prost_build::Comments, buf: &mut String) {
    comments.append_with_indent(0, buf);
}

/// The methods this generator serves: unary and server-streaming (the others are reported
/// and left out).
fn supported(service: &Service) -> Vec<&Method> {
    let full = full_name(service);
    service
        .methods
        .iter()
        .filter(|m| {
            if m.client_streaming {
                println!(
                    "cargo:warning=corewire-build: /{full}/{} streams requests, which corewire \
                     does not generate yet: left out (gRPC callers get UNIMPLEMENTED)",
                    m.proto_name
                );
                return false;
            }
            true
        })
        .collect()
}

fn full_name(service: &Service) -> String {
    if service.package.is_empty() {
        service.proto_name.clone()
    } else {
        format!("{}.{}", service.package, service.proto_name)
    }
}

/// What makes the reply `r` of the `j`th of `n` methods one type for all of them: nothing for
/// one method, else a `.map` into `Either`s nested (`Left(r)`, `Right(Left(r))`, ...,
/// `Right(Right(r))`).
fn either(j: usize, n: usize) -> String {
    if n < 2 {
        return String::new();
    }
    let rights = j.min(n - 1);
    let mut out = "::corewire::typed::Either::Right(".repeat(rights);
    if j + 1 < n {
        out.push_str("::corewire::typed::Either::Left(r)");
    } else {
        out.push('r');
    }
    out.push_str(&")".repeat(rights));
    format!(".map(|r| {out})")
}

/// `const METHODS` for `service`.
fn methods_table(service: &Service, methods: &[&Method], buf: &mut String) {
    let full = full_name(service);
    let _ = writeln!(
        buf,
        "/// The full name of the service.\npub const SERVICE_NAME: &str = {full:?};"
    );
    let _ = writeln!(
        buf,
        "/// Its methods, in the order of the `.proto` file.\npub const METHODS: &[::corewire::service::MethodInfo] = &["
    );
    for m in methods {
        let kind = if m.server_streaming {
            "ServerStreaming"
        } else {
            "Unary"
        };
        let _ = writeln!(
            buf,
            "::corewire::service::MethodInfo::new(\"/{full}/{}\", ::corewire::service::MethodKind::{kind}),",
            m.proto_name
        );
    }
    buf.push_str("];\n");
}

/// `pub mod {module} {`, documented by `about`, with the method table, then the service's own
/// comments (and an empty doc line after them) for the item that follows.
fn open_module(
    about: &str,
    module: &str,
    service: &Service,
    methods: &[&Method],
    buf: &mut String,
) {
    let _ = writeln!(buf, "/// {about}\npub mod {module} {{");
    buf.push_str(
        "#![allow(unused_variables, dead_code, missing_docs, clippy::wildcard_imports, \
         clippy::let_unit_value, clippy::manual_async_fn)]\n",
    );
    methods_table(service, methods, buf);
    let before = buf.len();
    doc(&service.comments, buf);
    if buf.len() > before {
        buf.push_str("///\n");
    }
}

impl Generator {
    fn server(&self, service: &Service, methods: &[&Method], buf: &mut String) {
        let trait_name = &service.name;
        let module = format!("{}_server", snake(&service.name));
        let full = full_name(service);
        let about = format!(
            "The server side of `{full}`: implement [`{module}::{trait_name}`] and serve \
             [`{module}::{trait_name}Server`]."
        );
        open_module(&about, &module, service, methods, buf);
        let _ = writeln!(
            buf,
            "/// One instance runs on each shard (made by the factory given to \
             `Server::builder().service`), so its state can live in `Cell`/`RefCell`; its \
             futures need not be `Send`.\npub trait {trait_name}: 'static {{"
        );
        for m in methods {
            let before = buf.len();
            doc(&m.comments, buf);
            let documented = buf.len() > before;
            if m.server_streaming {
                let _ = writeln!(
                    buf,
                    "fn {}(&self, request: ::corewire::typed::Request<super::{}>, replies: \
                     ::corewire::typed::ServerStream<super::{}>) -> impl \
                     ::core::future::Future<Output = ::core::result::Result<(), \
                     ::corewire::Status>>;",
                    m.name, m.input_type, m.output_type
                );
            } else if self.is_sync(service, m) {
                if documented {
                    buf.push_str("///\n");
                }
                let _ = writeln!(
                    buf,
                    "/// Synchronous: answers at once, run in the server's `call_now` (no \
                     future).\nfn {}(&self, request: ::corewire::typed::Request<super::{}>) -> \
                     ::core::result::Result<::corewire::typed::Response<super::{}>, \
                     ::corewire::Status>;",
                    m.name, m.input_type, m.output_type
                );
            } else {
                let _ = writeln!(
                    buf,
                    "fn {}(&self, request: ::corewire::typed::Request<super::{}>) -> impl \
                     ::core::future::Future<Output = \
                     ::core::result::Result<::corewire::typed::Response<super::{}>, \
                     ::corewire::Status>>;",
                    m.name, m.input_type, m.output_type
                );
            }
        }
        buf.push_str("}\n");
        let _ = writeln!(
            buf,
            "/// Serves a [`{trait_name}`] as a corewire service (gRPC, TCP and RDMA alike), \
             counting its calls per method.\npub struct {trait_name}Server<T> {{ inner: T, \
             stats: ::corewire::typed::MethodStats }}"
        );
        let _ = writeln!(
            buf,
            "impl<T: {trait_name}> {trait_name}Server<T> {{\n\
             /// Serve `inner` (call this in the factory: the counters belong to the shard it \
             runs on).\n\
             pub fn new(inner: T) -> Self {{ {trait_name}Server {{ inner, stats: \
             ::corewire::typed::MethodStats::new(METHODS) }} }}\n\
             /// The implementation.\n\
             pub fn get_ref(&self) -> &T {{ &self.inner }}\n\
             /// The per-method counters of this instance.\n\
             pub fn stats(&self) -> &::corewire::typed::MethodStats {{ &self.stats }}\n}}"
        );
        let _ = writeln!(
            buf,
            "impl<T: {trait_name}> ::corewire::Service for {trait_name}Server<T> {{\n\
             const ID: u32 = ::corewire::service_id(SERVICE_NAME);\n\
             const NAME: &'static str = SERVICE_NAME;\n\
             const METHODS: &'static [::corewire::service::MethodInfo] = METHODS;"
        );
        // The unary methods served by `call`'s future (the others are synchronous).
        let futures: Vec<(usize, &Method)> = (methods.iter().copied().enumerate())
            .filter(|(_, m)| !m.server_streaming && !self.is_sync(service, m))
            .collect();
        let unknown = "::core::result::Result::Err(::corewire::Status::UnknownMethod { \
                       service_id: <Self as ::corewire::Service>::ID, method_id: method })";
        match (methods, futures.as_slice()) {
            ([_], [(_, only)]) => {
                // One unary method: the call is its future, with no layer choosing the method
                // (each would copy the future once more per call).
                let _ = writeln!(
                    buf,
                    "fn call(&self, request: ::corewire::Request) -> impl \
                     ::core::future::Future<Output = ::core::result::Result<::corewire::Response, \
                     ::corewire::Status>> {{\n\
                     ::corewire::typed::encoded(::corewire::typed::only_unary::<Self, _, _, \
                     _>(&self.stats, request, |r| self.inner.{0}(r)))\n}}\n\
                     fn call_in_place(&self, request: ::corewire::Request) -> impl \
                     ::core::future::Future<Output = ::core::result::Result<impl \
                     ::corewire::EncodeReply + use<T>, ::corewire::Status>> {{\n\
                     ::corewire::typed::only_unary::<Self, _, _, _>(&self.stats, request, |r| \
                     self.inner.{0}(r))\n}}",
                    only.name
                );
            }
            (_, []) => {
                // Every unary method answers in `call_now`: what reaches `call` is unknown.
                let _ = writeln!(
                    buf,
                    "fn call(&self, request: ::corewire::Request) -> impl \
                     ::core::future::Future<Output = ::core::result::Result<::corewire::Response, \
                     ::corewire::Status>> {{\nlet method = request.method;\n\
                     ::core::future::ready({unknown})\n}}"
                );
            }
            _ => {
                buf.push_str(
                    "async fn call(&self, request: ::corewire::Request) -> \
                     ::core::result::Result<::corewire::Response, ::corewire::Status> {\n\
                     match request.method {\n",
                );
                for (i, m) in &futures {
                    let _ = writeln!(
                        buf,
                        "m if m == METHODS[{i}].id => \
                         ::corewire::typed::encoded(::corewire::typed::unary(&self.stats, {i}, \
                         request, |r| self.inner.{}(r))).await,",
                        m.name
                    );
                }
                let _ = writeln!(buf, "method => {unknown},\n}}\n}}");
                // The server's path: each method's typed reply, in one type for all of them
                // (`Either`, nested), encoded where it is sent.
                buf.push_str(
                    "fn call_in_place(&self, request: ::corewire::Request) -> impl \
                     ::core::future::Future<Output = ::core::result::Result<impl \
                     ::corewire::EncodeReply + use<T>, ::corewire::Status>> {\nasync move {\n\
                     match request.method {\n",
                );
                for (j, (i, m)) in futures.iter().enumerate() {
                    let _ = writeln!(
                        buf,
                        "m if m == METHODS[{i}].id => ::corewire::typed::unary(&self.stats, \
                         {i}, request, |r| self.inner.{}(r)).await{},",
                        m.name,
                        either(j, futures.len())
                    );
                }
                let _ = writeln!(buf, "method => {unknown},\n}}\n}}\n}}");
            }
        }
        let sync: Vec<(usize, &Method)> = (methods.iter().copied().enumerate())
            .filter(|(_, m)| self.is_sync(service, m))
            .collect();
        if !sync.is_empty() {
            buf.push_str(
                "fn call_now(&self, request: ::corewire::Request, reply: ::corewire::ReplyTo<'_>) \
                 -> ::corewire::CallNow {\n\
                 match request.method {\n",
            );
            for (i, m) in &sync {
                let _ = writeln!(
                    buf,
                    "m if m == METHODS[{i}].id => ::corewire::typed::unary_now(&self.stats, \
                     {i}, request, reply, |r| self.inner.{}(r)),",
                    m.name
                );
            }
            buf.push_str("_ => ::corewire::CallNow::Later(request),\n}\n}\n");
        }
        if methods.iter().any(|m| m.server_streaming) {
            buf.push_str(
                "async fn call_streaming(&self, request: ::corewire::Request, replies: \
                 ::corewire::service::Replies) -> ::core::result::Result<(), \
                 ::corewire::Status> {\nmatch request.method {\n",
            );
            for (i, m) in methods.iter().enumerate() {
                if m.server_streaming {
                    let _ = writeln!(
                        buf,
                        "m if m == METHODS[{i}].id => \
                         ::corewire::typed::server_streaming(&self.stats, {i}, request, \
                         replies, |r, s| self.inner.{}(r, s)).await,",
                        m.name
                    );
                }
            }
            buf.push_str(
                "method => ::core::result::Result::Err(::corewire::Status::UnknownMethod { \
                 service_id: <Self as ::corewire::Service>::ID, method_id: method }),\n}\n}\n",
            );
        }
        buf.push_str("}\n}\n");
    }

    fn client(&self, service: &Service, methods: &[&Method], buf: &mut String) {
        let name = format!("{}Client", service.name);
        let module = format!("{}_client", snake(&service.name));
        let full = full_name(service);
        let about = format!("The client side of `{full}`: [`{module}::{name}`].");
        open_module(&about, &module, service, methods, buf);
        let _ = writeln!(
            buf,
            "/// Calls over one corewire connection (TCP, RDMA or any other), pipelined. \
             Give a call a deadline with `Request::with_timeout`; drop its future (or its \
             stream) to cancel it on the server.\n\
             pub struct {name}<C: ::corewire::transport::Connection = \
             ::corewire::transport::tcp::TcpConnection> {{ client: ::corewire::Client<C> }}\n\
             impl<C: ::corewire::transport::Connection> ::core::clone::Clone for {name}<C> {{ \
             fn clone(&self) -> Self {{ {name} {{ client: self.client.clone() }} }} }}\n\
             impl {name}<::corewire::transport::tcp::TcpConnection> {{\n\
             /// Connect over TCP from the current shard.\n\
             pub async fn connect_tcp(addr: ::std::net::SocketAddr, options: \
             ::corewire::ClientOptions) -> ::core::result::Result<Self, \
             ::corewire::ClientError> {{ \
             ::core::result::Result::Ok(Self::from_client(::corewire::Client::connect_tcp(addr, \
             options).await?)) }}\n}}\n\
             impl {name}<::corewire::transport::rdma::RdmaConnection> {{\n\
             /// Connect over RDMA from the current shard (the RDMA transport installed \
             first).\n\
             pub async fn connect_rdma(addr: ::std::net::SocketAddr, options: \
             ::corewire::ClientOptions) -> ::core::result::Result<Self, \
             ::corewire::ClientError> {{ \
             ::core::result::Result::Ok(Self::from_client(::corewire::Client::connect_rdma(addr, \
             options).await?)) }}\n}}\n\
             impl<C: ::corewire::transport::Connection> {name}<C> {{\n\
             const SERVICE_ID: u32 = ::corewire::service_id(SERVICE_NAME);\n\
             /// Calls over `client`'s connection.\n\
             pub fn from_client(client: ::corewire::Client<C>) -> Self {{ {name} {{ client }} \
             }}\n\
             /// The untyped client underneath.\n\
             pub fn raw_client(&self) -> &::corewire::Client<C> {{ &self.client }}"
        );
        for (i, m) in methods.iter().enumerate() {
            doc(&m.comments, buf);
            if m.server_streaming {
                let _ = writeln!(
                    buf,
                    "pub async fn {}(&self, request: impl \
                     ::corewire::typed::IntoRequest<super::{}>) -> \
                     ::core::result::Result<::corewire::typed::Streaming<C, super::{}>, \
                     ::corewire::ClientError> {{ \
                     ::corewire::typed::streaming_call(&self.client, Self::SERVICE_ID, \
                     METHODS[{i}].id, request.into_request()).await }}",
                    m.name, m.input_type, m.output_type
                );
            } else {
                // The call's own future, no `async` layer around it (each would copy it).
                let _ = writeln!(
                    buf,
                    "pub fn {}(&self, request: impl \
                     ::corewire::typed::IntoRequest<super::{}>) -> impl \
                     ::core::future::Future<Output = \
                     ::core::result::Result<::corewire::typed::Response<super::{}>, \
                     ::corewire::ClientError>> + '_ {{ \
                     ::corewire::typed::unary_call(&self.client, Self::SERVICE_ID, \
                     METHODS[{i}].id, request.into_request()) }}",
                    m.name, m.input_type, m.output_type
                );
            }
        }
        buf.push_str("}\n}\n");
    }
}

impl ServiceGenerator for Generator {
    fn generate(&mut self, service: Service, buf: &mut String) {
        let methods = supported(&service);
        if self.server {
            self.server(&service, &methods, buf);
        }
        if self.client {
            self.client(&service, &methods, buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_methods_reply_has_its_own_place_in_the_nested_eithers() {
        let short = |j, n| either(j, n).replace("::corewire::typed::Either::", "");
        assert_eq!(short(0, 1), "");
        assert_eq!(short(0, 2), ".map(|r| Left(r))");
        assert_eq!(short(1, 2), ".map(|r| Right(r))");
        assert_eq!(short(0, 3), ".map(|r| Left(r))");
        assert_eq!(short(1, 3), ".map(|r| Right(Left(r)))");
        assert_eq!(short(2, 3), ".map(|r| Right(Right(r)))");
    }

    #[test]
    fn ids_are_fnv1a() {
        assert_eq!(method_id(""), 0x811c_9dc5);
        assert_eq!(method_id("a"), 0xe40c_292c);
        assert_eq!(method_id("foobar"), 0xbf9c_f968);
    }

    #[test]
    fn service_names_become_snake_case_modules() {
        assert_eq!(snake("Greeter"), "greeter");
        assert_eq!(snake("RouteGuide"), "route_guide");
    }
}
