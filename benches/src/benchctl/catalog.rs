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
    /// Client for the fairness probe workload; `None` means `loadgen --probe`.
    pub probe_client: Option<String>,
}

/// Closed-loop client flags shared by `loadgen` and any plugged-in client: a client template
/// should accept these and print loadgen's JSON keys (qps, p50_us, …, server_cpu_us_per_req).
pub const CLOSED_LOOP_FLAGS: &str = "--addr {addr} --conns {conns} --depth {depth} --size {size} \
     --duration-ms {duration_ms} --warmup-ms {warmup_ms} --threads {threads} --server-pid {server_pid}";

/// Fairness-probe client flags shared by `loadgen --probe` and a plugged-in probe client.
pub const PROBE_FLAGS: &str = "--addr {addr} --hot-conns {hot_conns} --hot-depth {hot_depth} \
     --size {size} --probe-size {probe_size} --duration-ms {duration_ms} \
     --warmup-ms {warmup_ms} --threads {threads} --server-pid {server_pid}";

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
                    probe_client: None,
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
        // Per-core peers: one thread each, pinned by benchctl's `--server-cpus`.
        add(
            "tokio-ct",
            "{bin}/echo_tokio --addr {addr} --current-thread",
            None,
        );
        add("monoio", "{bin}/echo_monoio --addr {addr}", None);
        // The scaling suite's peers with as many threads as corewire has shards.
        add(
            "tokio-mt",
            "{bin}/echo_tokio --addr {addr} --workers {workers}",
            None,
        );
        add(
            "monoio-mt",
            "{bin}/echo_monoio --addr {addr} --threads {workers}",
            None,
        );
        // Unpinned so taskset decides its CPU (glommio's own placement ignores the mask).
        add(
            "glommio-1",
            "{bin}/echo_glommio --addr {addr} --shards 1 --no-pin",
            None,
        );
        add("floor", "{bin}/echo_floor --addr {addr}", None);
        add(
            "corewire",
            "{corewire_echo} --addr {addr} --shards {shards}{accept_flag}{budget_flag}",
            None,
        );
        // The same server on its epoll backend (the operator's override), next to tokio's
        // current-thread runtime, which uses epoll too.
        add(
            "corewire-epoll",
            "env COREWIRE_BACKEND=epoll {corewire_echo} --addr {addr} --shards {shards}\
             {accept_flag}{budget_flag}",
            None,
        );
        // The same raw echo server under a second name, so the rpc suite's table can show
        // what the RPC framework costs over it.
        add(
            "corewire-raw",
            "{corewire_echo} --addr {addr} --shards {shards}{accept_flag}{budget_flag}",
            None,
        );
        add(
            "tonic",
            "{bin}/rpc_tonic server --addr {addr} --workers {workers}",
            Some(format!("{{bin}}/rpc_tonic client {CLOSED_LOOP_FLAGS}")),
        );
        // `{probe_listener_flag}` gives the fairness probe its own listener (so the server's
        // head-of-line counts for it are the probe's alone); empty for other workloads.
        add(
            "corewire-rpc",
            "{corewire_rpc_server} --addr {addr} --shards {shards}{budget_flag}{handler_flags}\
             {probe_listener_flag}",
            Some(format!("{{corewire_rpc_client}} {CLOSED_LOOP_FLAGS}")),
        );
        // The same echo generated from proto/echo.proto (the typed layer over the raw one),
        // called with its generated client.
        add(
            "corewire-typed",
            "{corewire_rpc_server} --typed --addr {addr} --shards {shards}{budget_flag}",
            Some(format!(
                "{{corewire_rpc_client}} --typed {CLOSED_LOOP_FLAGS}"
            )),
        );
        // corewire's gRPC server with that typed echo, loaded by tonic's client (tonic's
        // server answers the same proto).
        add(
            "corewire-grpc",
            "{corewire_rpc_server} --grpc --addr {addr} --shards {shards}",
            Some(format!("{{bin}}/rpc_tonic client {CLOSED_LOOP_FLAGS}")),
        );
        if let Some(rpc) = defs.get_mut("corewire-rpc") {
            rpc.probe_client = Some(format!(
                "{{corewire_rpc_client}} --probe --probe-addr {{probe_addr}} {PROBE_FLAGS}"
            ));
        }
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
                probe_client: None,
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
/// binaries), where corewire's raw echo example is expected, and the corewire RPC peer
/// (`rpc_corewire` in `bin`).
pub fn default_vars(bin_dir: &str) -> Vars {
    [
        ("bin", bin_dir.to_string()),
        (
            "corewire_echo",
            "target/release/examples/echo_server".to_string(),
        ),
        (
            "corewire_rpc_server",
            format!("{bin_dir}/rpc_corewire server"),
        ),
        (
            "corewire_rpc_client",
            format!("{bin_dir}/rpc_corewire client"),
        ),
        // Extra closed-loop loadgen flags (the per-core suite's `--syscalls` sets them).
        ("loadgen_flags", String::new()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
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

    #[test]
    fn corewire_rpc_defaults_to_this_crates_peer() {
        let vars = default_vars("/b");
        assert_eq!(vars["corewire_rpc_server"], "/b/rpc_corewire server");
        assert_eq!(vars["corewire_rpc_client"], "/b/rpc_corewire client");
        let c = Catalog::builtin();
        assert_eq!(
            c.get("corewire-raw").unwrap().server,
            c.get("corewire").unwrap().server
        );
        assert!(c.get("corewire-raw").unwrap().client.is_none());
    }
}
