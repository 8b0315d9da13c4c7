//! HELLO: switches the connection between RESP2 and RESP3 (see `resp3.rs`), optionally
//! authenticating and naming it first, and answers the server's handshake map.

use bytes::Bytes;

use super::resp3::{Encoding, Shape};
use super::Session;
use crate::command::{ClientRequest, Hello};
use crate::info::COMPATIBLE_REDIS_VERSION;
use crate::reply::Reply;

impl Session {
    /// Whether replies are RESP3.
    pub fn is_resp3(&self) -> bool {
        self.resp3
    }

    /// How a reply of `shape` goes out on this connection now.
    pub(super) fn encoding(&self, shape: Shape) -> Encoding {
        if self.resp3 {
            Encoding::Resp3(shape)
        } else {
            Encoding::Resp2
        }
    }

    /// Runs HELLO (request `seq`) in Redis 7.0's order: AUTH, then the authentication
    /// check, then SETNAME, then the switch; the reply is written in the new protocol.
    pub(super) fn hello(&mut self, hello: Hello, seq: u64) -> Reply {
        if let Some((username, password)) = hello.auth {
            let reply = self.auth_hello(username, &password);
            if reply.is_error() {
                return reply;
            }
        }
        if !self.authenticated {
            return Reply::error(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise \
                 the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the \
                 client and select the RESP protocol version at the same time",
            );
        }
        if let Some(name) = hello.setname {
            match ClientRequest::set_name(name) {
                Ok(request) => {
                    self.identity.run(request);
                }
                Err(error) => return error.into(),
            }
        }
        if let Some(protocol) = hello.protocol {
            self.resp3 = protocol == 3;
        }
        let encoding = self.encoding(Shape::Map);
        self.replies.set_encoding(seq, encoding);
        let mode = if self.cluster.is_some() {
            "cluster"
        } else {
            "standalone"
        };
        let bulk = |s: &'static str| Reply::Bulk(Bytes::from_static(s.as_bytes()));
        Reply::Array(vec![
            bulk("server"),
            bulk("redis"),
            bulk("version"),
            bulk(COMPATIBLE_REDIS_VERSION),
            bulk("proto"),
            Reply::Integer(if self.resp3 { 3 } else { 2 }),
            bulk("id"),
            Reply::Integer(self.identity.id() as i64),
            bulk("mode"),
            bulk(mode),
            bulk("role"),
            bulk("master"),
            bulk("modules"),
            Reply::Array(Vec::new()),
        ])
    }

    /// HELLO's AUTH: as AUTH with a username.
    fn auth_hello(&mut self, username: Bytes, password: &[u8]) -> Reply {
        self.auth(Some(username), password)
    }
}
