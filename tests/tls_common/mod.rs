//! Test certificates, made at test time with rcgen (no key is committed): a CA, server and
//! client certificates it signs (valid now, or expired), and rustls configs built from them.
//! Shared by the TLS tests of the facade and (by path) of corewire-kv.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corewire::runtime::tls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use corewire::runtime::tls::rustls::server::WebPkiClientVerifier;
use corewire::runtime::tls::rustls::{ClientConfig, RootCertStore, ServerConfig};
use corewire::runtime::tls::{self, pem};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertifiedIssuer, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

/// A certificate authority that signs test certificates.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM text and as DER.
#[derive(Clone)]
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

/// What a leaf certificate is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
    /// A node that serves and also connects to its peers as a client (replication).
    Both,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        TestCa { issuer }
    }

    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// A certificate for `names` (DNS names or IP addresses), valid from 1975 to 4096.
    pub fn leaf(&self, names: &[&str], usage: Usage) -> Leaf {
        self.leaf_valid(names, usage, false)
    }

    /// A certificate that expired in 2001.
    pub fn expired_leaf(&self, names: &[&str], usage: Usage) -> Leaf {
        self.leaf_valid(names, usage, true)
    }

    fn leaf_valid(&self, names: &[&str], usage: Usage, expired: bool) -> Leaf {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "corewire test");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = match usage {
            Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
            Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
            Usage::Both => vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        };
        if expired {
            params.not_before = date_time_ymd(2000, 1, 1);
            params.not_after = date_time_ymd(2001, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.cert_der()).unwrap();
        roots
    }
}

impl Leaf {
    pub fn certs(&self) -> Vec<CertificateDer<'static>> {
        pem::certs_from_pem(self.cert_pem.as_bytes()).unwrap()
    }

    pub fn key(&self) -> PrivateKeyDer<'static> {
        pem::private_key_from_pem(self.key_pem.as_bytes()).unwrap()
    }

    /// Write `name.crt` and `name.key` into `dir`; their paths.
    pub fn write(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        std::fs::write(&cert, &self.cert_pem).unwrap();
        std::fs::write(&key, &self.key_pem).unwrap();
        (cert, key)
    }
}

/// Client certificates a server asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Optional,
    Required,
}

/// A server config for `leaf`, verifying client certificates against `ca` as asked.
pub fn server_config(leaf: &Leaf, ca: &TestCa, auth: ClientAuth, alpn: &[&[u8]]) -> ServerConfig {
    let builder = ServerConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(ca.roots()), tls::provider());
    let builder = match auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Optional => {
            builder.with_client_cert_verifier(verifier.allow_unauthenticated().build().unwrap())
        }
        ClientAuth::Required => builder.with_client_cert_verifier(verifier.build().unwrap()),
    };
    let mut config = builder.with_single_cert(leaf.certs(), leaf.key()).unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// A client config trusting `ca`, presenting `client` if given.
pub fn client_config(ca: &TestCa, client: Option<&Leaf>, alpn: &[&[u8]]) -> ClientConfig {
    let builder = ClientConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(ca.roots());
    let mut config = match client {
        Some(leaf) => builder
            .with_client_auth_cert(leaf.certs(), leaf.key())
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// A fresh temporary directory for certificate files (removed by the caller or left in /tmp).
pub fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("corewire-tls-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An unpinned runtime (several test binaries share the machine).
pub fn runtime(shards: usize) -> corewire::Runtime {
    corewire::Runtime::builder()
        .shards(shards)
        .pin(false)
        .build()
        .unwrap()
}

/// Connections the runtime's shards closed for bad input.
pub fn protocol_errors(rt: &corewire::Runtime) -> u64 {
    rt.stats().iter().map(|s| s.protocol_errors).sum()
}

/// Poll `cond` until it holds or `limit` passes; whether it held.
pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}
