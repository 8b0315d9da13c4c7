//! Named servers: each is a server command template and, optionally, the client command
//! template to load it with (for servers that do not speak raw echo, e.g. gRPC). Built-ins can
//! be overridden and new ones added from the command line, which is how corewire plugs in.

use std::collections::BTreeMap;

use super::template::Vars;

/// A server and (optionally) its own closed-loop client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerDef {
    pub server: String,
    /// Client for closed-loop workloads; `None` means the raw-echo `loadgen`. Probe and
    /// accept-storm workloads always use `loadgen`.
    pub client: Option<String>,
}

/// Closed-loop client flags shared by `loadgen` and any plugged-in client: a client template
/// should accept these and print loadgen's JSON keys (qps, p50_us, …, server_cpu_us_per_req).
pub const CLOSED_LOOP_FLAGS: &str = "--addr {addr} --conns {conns} --depth {depth} --size {size} \
     --duration-ms {duration_ms} --warmup-ms {warmup_ms} --threads {threads} --server-pid {server_pid}";

/// Server templates by name.
#[derive(Debug, Clone)]
pub struct Catalog {
    defs: BTreeMap<String, ServerDef>,
}

impl Catalog {
    /// The built-in servers: the peers in this crate and corewire's expected binaries.
    pub fn builtin() -> Catalog {
        let mut defs = BTreeMap::new();
        let mut add = |name: &str, server: &str, client: Option<String>| {
            defs.insert(
                name.to_string(),
                ServerDef {
                    server: server.to_string(),
                    client,
                },
            );
        };
        add(
            "tokio",
            "{bin}/echo_tokio --addr {addr} --workers {workers} --accept {accept}",
            None,
        );
        add(
            "glommio",
            "{bin}/echo_glommio --addr {addr} --shards {shards}",
            None,
        );
        add(
            "corewire",
            "{corewire_echo} --addr {addr} --shards {shards}{accept_flag}{budget_flag}",
            None,
        );
        add(
            "tonic",
            "{bin}/rpc_tonic server --addr {addr} --workers {workers}",
            Some(format!("{{bin}}/rpc_tonic client {CLOSED_LOOP_FLAGS}")),
        );
        add(
            "corewire-rpc",
            "{corewire_rpc_server} --addr {addr} --shards {shards}",
            Some(format!("{{corewire_rpc_client}} {CLOSED_LOOP_FLAGS}")),
        );
        Catalog { defs }
    }

    /// Defines or replaces `name`'s server template (keeping its client, if any).
    pub fn set_server(&mut self, name: &str, template: &str) {
        self.defs
            .entry(name.to_string())
            .and_modify(|d| d.server = template.to_string())
            .or_insert_with(|| ServerDef {
                server: template.to_string(),
                client: None,
            });
    }

    /// Sets `name`'s client template; the server must be defined (built in or by
    /// `set_server`). Returns false if it is not.
    pub fn set_client(&mut self, name: &str, template: &str) -> bool {
        match self.defs.get_mut(name) {
            Some(d) => {
                d.client = Some(template.to_string());
                true
            }
            None => false,
        }
    }

    /// The definition of `name`.
    pub fn get(&self, name: &str) -> Option<&ServerDef> {
        self.defs.get(name)
    }

    /// All definitions, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &ServerDef)> {
        self.defs.iter()
    }
}

/// Variables every template can use besides the per-run ones: `bin` (this crate's release
/// binaries) and the paths where corewire's example binaries are expected.
pub fn default_vars(bin_dir: &str) -> Vars {
    [
        ("bin", bin_dir),
        ("corewire_echo", "target/release/examples/echo_server"),
        ("corewire_rpc_server", "target/release/examples/rpc_server"),
        ("corewire_rpc_client", "target/release/examples/rpc_client"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_and_additions() {
        let mut c = Catalog::builtin();
        assert!(c.get("tonic").unwrap().client.is_some());
        assert!(c.get("tokio").unwrap().client.is_none());
        c.set_server("tonic", "other --addr {addr}");
        assert_eq!(c.get("tonic").unwrap().server, "other --addr {addr}");
        assert!(c.get("tonic").unwrap().client.is_some());
        assert!(!c.set_client("nope", "x"));
        c.set_server("nope", "srv {addr}");
        assert!(c.set_client("nope", "cli {addr}"));
        assert_eq!(c.get("nope").unwrap().client.as_deref(), Some("cli {addr}"));
    }
}
