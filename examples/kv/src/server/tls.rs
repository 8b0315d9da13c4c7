//! Redis's `tls-*` settings and the rustls configurations built from them.
//!
//! The flags and CONFIG parameters are Redis 7's: `tls-port`, `tls-cert-file`,
//! `tls-key-file`, `tls-key-file-pass`, `tls-client-cert-file`, `tls-client-key-file`,
//! `tls-client-key-file-pass`, `tls-ca-cert-file`, `tls-ca-cert-dir`, `tls-auth-clients
//! yes|no|optional`, `tls-protocols`, `tls-ciphersuites` (TLS 1.3), `tls-ciphers` (TLS 1.2,
//! OpenSSL names), `tls-prefer-server-ciphers`, `tls-session-caching`,
//! `tls-session-cache-size`, `tls-session-cache-timeout`, `tls-cluster`, `tls-replication`,
//! `tls-dh-params-file`. What rustls cannot do is refused with the reason: TLS 1.0/1.1,
//! ciphers other than its AEAD ECDHE suites, and keys in encrypted formats other than
//! PKCS#8. `tls-dh-params-file` is accepted and unused (rustls negotiates ECDHE only), as is
//! `tls-session-cache-timeout` (rustls bounds a session's life itself).
//!
//! [`KvTls`] holds the running server's acceptor (the TLS port, where replicas connect too,
//! and the cluster bus's incoming side) and connector (the bus's outgoing side and, with
//! `tls-replication yes`, a replica's link to its master). CONFIG SET of a `tls-*` parameter rebuilds
//! both from the files and publishes them to every shard for the connections that follow,
//! as Redis reloads its TLS context.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use corewire::runtime::tls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use corewire::runtime::tls::rustls::client::WebPkiServerVerifier;
use corewire::runtime::tls::rustls::crypto::{ring as ring_provider, CryptoProvider};
use corewire::runtime::tls::rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime,
};
use corewire::runtime::tls::rustls::server::{
    NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier,
};
use corewire::runtime::tls::rustls::{
    self, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig,
    SignatureScheme, SupportedCipherSuite, SupportedProtocolVersion,
};
use corewire::runtime::tls::{self, pem, TlsAcceptor, TlsConnector};

/// `tls-auth-clients`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthClients {
    Yes,
    No,
    Optional,
}

impl AuthClients {
    fn name(self) -> &'static str {
        match self {
            AuthClients::Yes => "yes",
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
        }
    }
}

/// Redis's `tls-*` settings (defaults as Redis 7's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `tls-port`: 0 = no TLS port.
    pub port: u16,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub key_file_pass: Option<String>,
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    pub client_key_file_pass: Option<String>,
    pub ca_cert_file: Option<PathBuf>,
    pub ca_cert_dir: Option<PathBuf>,
    pub auth_clients: AuthClients,
    /// `tls-protocols`, as given ("TLSv1.2 TLSv1.3"); empty: both.
    pub protocols: String,
    /// `tls-ciphersuites` (TLS 1.3), as given; empty: rustls's.
    pub ciphersuites: String,
    /// `tls-ciphers` (TLS 1.2), as given; empty: rustls's.
    pub ciphers: String,
    pub prefer_server_ciphers: bool,
    pub session_caching: bool,
    pub session_cache_size: usize,
    pub session_cache_timeout: u64,
    /// `tls-cluster yes`: the cluster bus (and MIGRATE) over TLS.
    pub cluster: bool,
    /// `tls-replication yes`: a replica connects to its master over TLS (the master serves
    /// replicas on its TLS port whatever this says, as Redis).
    pub replication: bool,
    pub dh_params_file: Option<PathBuf>,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            port: 0,
            cert_file: None,
            key_file: None,
            key_file_pass: None,
            client_cert_file: None,
            client_key_file: None,
            client_key_file_pass: None,
            ca_cert_file: None,
            ca_cert_dir: None,
            auth_clients: AuthClients::Yes,
            protocols: String::new(),
            ciphersuites: String::new(),
            ciphers: String::new(),
            prefer_server_ciphers: false,
            session_caching: true,
            session_cache_size: 20 * 1024,
            session_cache_timeout: 300,
            cluster: false,
            replication: false,
            dh_params_file: None,
        }
    }
}

fn yes_no(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn path(value: &str) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

fn show(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map_or(String::new(), |p| p.display().to_string())
}

impl TlsSettings {
    /// Whether anything of the server uses TLS.
    pub fn enabled(&self) -> bool {
        self.port != 0 || self.cluster || self.replication
    }

    /// Sets parameter `name` (`tls-...`, lowercase, as CONFIG SET and the command line name
    /// it) to `value`; the error says why not.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "tls-port" => {
                self.port = value
                    .parse()
                    .map_err(|_| "argument must be a port number".to_string())?
            }
            "tls-cert-file" => self.cert_file = path(value),
            "tls-key-file" => self.key_file = path(value),
            "tls-key-file-pass" => self.key_file_pass = Some(value.to_owned()),
            "tls-client-cert-file" => self.client_cert_file = path(value),
            "tls-client-key-file" => self.client_key_file = path(value),
            "tls-client-key-file-pass" => self.client_key_file_pass = Some(value.to_owned()),
            "tls-ca-cert-file" => self.ca_cert_file = path(value),
            "tls-ca-cert-dir" => self.ca_cert_dir = path(value),
            "tls-dh-params-file" => self.dh_params_file = path(value),
            "tls-auth-clients" => {
                self.auth_clients = match value.to_ascii_lowercase().as_str() {
                    "yes" => AuthClients::Yes,
                    "no" => AuthClients::No,
                    "optional" => AuthClients::Optional,
                    _ => return Err("argument must be one of: yes, no, optional".into()),
                }
            }
            "tls-protocols" => {
                protocol_versions(value)?;
                self.protocols = value.to_owned();
            }
            "tls-ciphersuites" => {
                tls13_suites(value)?;
                self.ciphersuites = value.to_owned();
            }
            "tls-ciphers" => {
                tls12_suites(value)?;
                self.ciphers = value.to_owned();
            }
            "tls-prefer-server-ciphers" => self.prefer_server_ciphers = yes_no(value)?,
            "tls-session-caching" => self.session_caching = yes_no(value)?,
            "tls-session-cache-size" => {
                self.session_cache_size = value
                    .parse()
                    .map_err(|_| "argument must be a number".to_string())?
            }
            "tls-session-cache-timeout" => {
                self.session_cache_timeout = value
                    .parse()
                    .map_err(|_| "argument must be a number".to_string())?
            }
            "tls-cluster" => self.cluster = yes_no(value)?,
            "tls-replication" => self.replication = yes_no(value)?,
            _ => return Err(format!("unknown TLS parameter '{name}'")),
        }
        Ok(())
    }

    /// Every parameter as CONFIG GET reports it.
    pub fn parameters(&self) -> Vec<(&'static str, String)> {
        let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
        vec![
            ("tls-port", self.port.to_string()),
            ("tls-cert-file", show(&self.cert_file)),
            ("tls-key-file", show(&self.key_file)),
            (
                "tls-key-file-pass",
                self.key_file_pass.clone().unwrap_or_default(),
            ),
            ("tls-client-cert-file", show(&self.client_cert_file)),
            ("tls-client-key-file", show(&self.client_key_file)),
            (
                "tls-client-key-file-pass",
                self.client_key_file_pass.clone().unwrap_or_default(),
            ),
            ("tls-ca-cert-file", show(&self.ca_cert_file)),
            ("tls-ca-cert-dir", show(&self.ca_cert_dir)),
            ("tls-dh-params-file", show(&self.dh_params_file)),
            ("tls-auth-clients", self.auth_clients.name().to_string()),
            ("tls-protocols", self.protocols.clone()),
            ("tls-ciphersuites", self.ciphersuites.clone()),
            ("tls-ciphers", self.ciphers.clone()),
            ("tls-prefer-server-ciphers", yes(self.prefer_server_ciphers)),
            ("tls-session-caching", yes(self.session_caching)),
            (
                "tls-session-cache-size",
                self.session_cache_size.to_string(),
            ),
            (
                "tls-session-cache-timeout",
                self.session_cache_timeout.to_string(),
            ),
            ("tls-cluster", yes(self.cluster)),
            ("tls-replication", yes(self.replication)),
        ]
    }

    /// The provider with the cipher suites asked for.
    fn provider(&self) -> Result<Arc<CryptoProvider>, String> {
        let mut suites = tls13_suites(&self.ciphersuites)?;
        suites.extend(tls12_suites(&self.ciphers)?);
        Ok(Arc::new(CryptoProvider {
            cipher_suites: suites,
            ..(*tls::provider()).clone()
        }))
    }

    /// The CA certificates, from `tls-ca-cert-file` and every file of `tls-ca-cert-dir`.
    fn roots(&self) -> Result<RootCertStore, String> {
        let mut roots = RootCertStore::empty();
        if let Some(file) = &self.ca_cert_file {
            for cert in pem::certs_from_file(file).map_err(|e| e.to_string())? {
                roots
                    .add(cert)
                    .map_err(|e| format!("CA certificate in {}: {e}", file.display()))?;
            }
        }
        if let Some(dir) = &self.ca_cert_dir {
            let entries = std::fs::read_dir(dir)
                .map_err(|e| format!("tls-ca-cert-dir {}: {e}", dir.display()))?;
            for entry in entries.flatten() {
                let path = entry.path();
                if !path.is_file() {
                    continue;
                }
                // OpenSSL's CA directories also hold other files (CRLs, hash links to the
                // same certificates): take the certificates that parse, skip the rest.
                if let Ok(bytes) = std::fs::read(&path) {
                    for cert in pem::certs_from_pem(&bytes).unwrap_or_default() {
                        let _ = roots.add(cert);
                    }
                }
            }
        }
        if roots.is_empty() {
            return Err("no CA certificate in tls-ca-cert-file or tls-ca-cert-dir".into());
        }
        Ok(roots)
    }

    fn needs_ca(&self) -> bool {
        self.auth_clients != AuthClients::No || self.cluster || self.replication
    }

    /// Redis's start-up checks.
    pub fn validate(&self) -> Result<(), String> {
        if !self.enabled() {
            return Ok(());
        }
        if self.cert_file.is_none() || self.key_file.is_none() {
            return Err("tls-cert-file and tls-key-file must be set when TLS is enabled".into());
        }
        if self.needs_ca() && self.ca_cert_file.is_none() && self.ca_cert_dir.is_none() {
            return Err(
                "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when \
                        tls-cluster, tls-replication or tls-auth-clients are enabled!"
                    .into(),
            );
        }
        Ok(())
    }

    /// The server side: the TLS port and the cluster bus's incoming links.
    pub fn server_config(&self) -> Result<ServerConfig, String> {
        self.validate()?;
        let provider = self.provider()?;
        let versions = protocol_versions(&self.protocols)?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("tls-protocols/tls-ciphers: {e}"))?;
        let builder = match self.auth_clients {
            AuthClients::No => builder.with_no_client_auth(),
            auth => {
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(self.roots()?), provider);
                let verifier = if auth == AuthClients::Optional {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                builder.with_client_cert_verifier(verifier.build().map_err(|e| e.to_string())?)
            }
        };
        let (certs, key) = load_pair(
            self.cert_file.as_deref(),
            self.key_file.as_deref(),
            self.key_file_pass.as_deref(),
        )?;
        let mut config = builder
            .with_single_cert(certs, key)
            .map_err(|e| format!("tls-cert-file/tls-key-file: {e}"))?;
        config.ignore_client_order = self.prefer_server_ciphers;
        if self.session_caching {
            config.session_storage = ServerSessionMemoryCache::new(self.session_cache_size.max(1));
        } else {
            config.session_storage = Arc::new(NoServerSessionStorage {});
            config.send_tls13_tickets = 0;
        }
        Ok(config)
    }

    /// The client side of the cluster bus (and MIGRATE with `tls-cluster`) and of a replica's
    /// link (with `tls-replication`): the CA for the peer's certificate, and
    /// `tls-client-cert-file` (or the server's certificate) as ours.
    /// As Redis, a peer's certificate must chain to the CA; its name is not checked (nodes
    /// are reached by IP address).
    pub fn client_config(&self) -> Result<ClientConfig, String> {
        let provider = self.provider()?;
        let versions = protocol_versions(&self.protocols)?;
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(self.roots()?), provider.clone())
                .build()
                .map_err(|e| e.to_string())?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier)));
        let (certs, key) = match (&self.client_cert_file, &self.client_key_file) {
            (Some(cert), Some(key)) => {
                load_pair(Some(cert), Some(key), self.client_key_file_pass.as_deref())?
            }
            _ => load_pair(
                self.cert_file.as_deref(),
                self.key_file.as_deref(),
                self.key_file_pass.as_deref(),
            )?,
        };
        builder
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("client certificate: {e}"))
    }
}

fn load_pair(
    cert: Option<&Path>,
    key: Option<&Path>,
    pass: Option<&str>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let (Some(cert), Some(key)) = (cert, key) else {
        return Err("tls-cert-file and tls-key-file must be set".into());
    };
    let certs = pem::certs_from_file(cert).map_err(|e| e.to_string())?;
    let key = load_key(key, pass)?;
    Ok((certs, key))
}

/// A private key from PEM: plain (PKCS#8, PKCS#1, SEC1), or PKCS#8 encrypted with `pass`.
fn load_key(path: &Path, pass: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let encrypted = std::str::from_utf8(&text)
        .is_ok_and(|t| t.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----"));
    if !encrypted {
        if std::str::from_utf8(&text).is_ok_and(|t| t.contains("Proc-Type: 4,ENCRYPTED")) {
            return Err(format!(
                "{}: a key encrypted in OpenSSL's legacy PEM format; convert it to encrypted \
                 PKCS#8 (openssl pkcs8 -topk8) or store it unencrypted",
                path.display()
            ));
        }
        return pem::private_key_from_pem(&text).map_err(|e| e.to_string());
    }
    let Some(pass) = pass else {
        return Err(format!(
            "{} is encrypted: set tls-key-file-pass",
            path.display()
        ));
    };
    let (label, der) =
        pkcs8::der::pem::decode_vec(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if label != "ENCRYPTED PRIVATE KEY" {
        return Err(format!("{}: unexpected PEM label {label}", path.display()));
    }
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let plain = info.decrypt(pass).map_err(|e| {
        format!(
            "{}: cannot decrypt with tls-key-file-pass: {e}",
            path.display()
        )
    })?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        plain.as_bytes().to_vec(),
    )))
}

/// `tls-protocols`: "TLSv1.2 TLSv1.3" in any order and case; empty: both.
fn protocol_versions(value: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let mut versions = Vec::new();
    for word in value.split_whitespace() {
        let version = match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => &rustls::version::TLS12,
            "tlsv1.3" => &rustls::version::TLS13,
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "{word} is not supported: rustls speaks TLSv1.2 and TLSv1.3 only"
                ))
            }
            _ => return Err(format!("unknown TLS protocol {word}")),
        };
        if !versions.contains(&version) {
            versions.push(version);
        }
    }
    if versions.is_empty() {
        versions = vec![&rustls::version::TLS12, &rustls::version::TLS13];
    }
    Ok(versions)
}

/// The TLS 1.3 suites rustls has, by their OpenSSL (= IANA) names.
fn tls13_named() -> [(&'static str, SupportedCipherSuite); 3] {
    use ring_provider::cipher_suite::*;
    [
        ("TLS_AES_128_GCM_SHA256", TLS13_AES_128_GCM_SHA256),
        ("TLS_AES_256_GCM_SHA384", TLS13_AES_256_GCM_SHA384),
        (
            "TLS_CHACHA20_POLY1305_SHA256",
            TLS13_CHACHA20_POLY1305_SHA256,
        ),
    ]
}

/// The TLS 1.2 suites rustls has, by their OpenSSL names and their IANA names.
fn tls12_named() -> [(&'static str, &'static str, SupportedCipherSuite); 6] {
    use ring_provider::cipher_suite::*;
    [
        (
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
        (
            "ECDHE-RSA-AES128-GCM-SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "ECDHE-RSA-AES256-GCM-SHA384",
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "ECDHE-RSA-CHACHA20-POLY1305",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
    ]
}

/// `tls-ciphersuites`: TLS 1.3 suite names separated by colons; empty: all three.
fn tls13_suites(value: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let named = tls13_named();
    if value.trim().is_empty() {
        return Ok(named.iter().map(|(_, s)| *s).collect());
    }
    let mut suites = Vec::new();
    for name in value.split(':').map(str::trim).filter(|n| !n.is_empty()) {
        let suite = named
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, s)| *s)
            .ok_or_else(|| {
                format!(
                    "TLS 1.3 cipher suite {name} is not supported by rustls; it has: {}",
                    named.map(|(n, _)| n).join(":")
                )
            })?;
        if !suites.contains(&suite) {
            suites.push(suite);
        }
    }
    Ok(suites)
}

/// OpenSSL cipher-list words that select nothing rustls lacks anyway (`!aNULL`, `!MD5`, ...)
/// or mean "the usual ones".
const ALL_WORDS: &[&str] = &[
    "DEFAULT", "HIGH", "ALL", "ECDHE", "EECDH", "AESGCM", "SECURE",
];

/// `tls-ciphers`: an OpenSSL TLS 1.2 cipher list, as far as it maps onto rustls: names of
/// its six ECDHE AEAD suites (OpenSSL or IANA spelling), `DEFAULT`/`HIGH`/`ALL` for all of
/// them, and exclusions (`!name`, `-name`); exclusions of what rustls never offers (`!aNULL`,
/// `!RC4`, ...) and `@STRENGTH`-style directives change nothing. Anything else is refused.
fn tls12_suites(value: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let named = tls12_named();
    let all: Vec<SupportedCipherSuite> = named.iter().map(|(_, _, s)| *s).collect();
    if value.trim().is_empty() {
        return Ok(all);
    }
    let find = |word: &str| {
        named
            .iter()
            .find(|(o, i, _)| o.eq_ignore_ascii_case(word) || i.eq_ignore_ascii_case(word))
            .map(|(_, _, s)| *s)
    };
    let mut suites: Vec<SupportedCipherSuite> = Vec::new();
    for word in value
        .split([':', ',', ' '])
        .map(str::trim)
        .filter(|w| !w.is_empty())
    {
        if word.starts_with('@') {
            continue;
        }
        if let Some(excluded) = word.strip_prefix(['!', '-']) {
            if let Some(suite) = find(excluded) {
                suites.retain(|s| *s != suite);
            }
            continue;
        }
        let word = word.strip_prefix('+').unwrap_or(word);
        if ALL_WORDS.iter().any(|w| w.eq_ignore_ascii_case(word)) {
            for suite in &all {
                if !suites.contains(suite) {
                    suites.push(*suite);
                }
            }
            continue;
        }
        match find(word) {
            Some(suite) if !suites.contains(&suite) => suites.push(suite),
            Some(_) => {}
            None => {
                return Err(format!(
                    "TLS 1.2 cipher {word} is not supported by rustls; it has: {}",
                    named.map(|(o, _, _)| o).join(":")
                ))
            }
        }
    }
    if suites.is_empty() {
        return Err("tls-ciphers selects no cipher rustls supports".into());
    }
    Ok(suites)
}

/// A server-certificate check that wants a chain to the CA and not the peer's name (cluster
/// nodes are reached by IP address, and Redis does not check the name either).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The running server's TLS: its settings, the acceptor of the TLS port and the cluster bus,
/// and the connector of the bus and of a replica's link. `Send + Sync`: every shard and
/// CONFIG SET reach it.
pub struct KvTls {
    settings: Mutex<TlsSettings>,
    pub acceptor: TlsAcceptor,
    /// `None` unless the client side can be configured (a CA is given); required at start
    /// with `tls-cluster` or `tls-replication`.
    connector: Option<TlsConnector>,
}

impl KvTls {
    /// Builds the configurations (reading the files); `None` when TLS is off.
    pub fn start(settings: &TlsSettings) -> Result<Option<Arc<KvTls>>, String> {
        if !settings.enabled() {
            return Ok(None);
        }
        let acceptor = TlsAcceptor::new(settings.server_config()?);
        // `tls-replication` may be turned on later by CONFIG SET: the client side is ready
        // whenever it can be.
        let connector = match settings.client_config() {
            Ok(config) => Some(TlsConnector::new(config)),
            Err(why) if settings.cluster || settings.replication => return Err(why),
            Err(_) => None,
        };
        Ok(Some(Arc::new(KvTls {
            settings: Mutex::new(settings.clone()),
            acceptor,
            connector,
        })))
    }

    pub fn settings(&self) -> TlsSettings {
        self.lock().clone()
    }

    /// The connector of the cluster bus and MIGRATE, with `tls-cluster yes`.
    pub fn cluster_connector(&self) -> Option<TlsConnector> {
        self.connector.clone().filter(|_| self.lock().cluster)
    }

    /// The connector of a replica's link to its master, with `tls-replication yes`.
    pub fn replication_connector(&self) -> Option<TlsConnector> {
        self.connector.clone().filter(|_| self.lock().replication)
    }

    /// CONFIG SET of `tls-*` parameters: all of them or none. The new configurations are
    /// built (certificates and keys read again, even when only other parameters changed,
    /// as Redis reloads them) and published for new connections.
    pub fn apply(&self, changes: &[(String, String)]) -> Result<(), String> {
        let mut settings = self.lock().clone();
        for (name, value) in changes {
            settings.set(name, value)?;
        }
        let server = settings.server_config()?;
        let client = match (&self.connector, settings.cluster || settings.replication) {
            (Some(_), true) => Some(settings.client_config()?),
            // Not in use: refreshed when it can be.
            (Some(_), false) => settings.client_config().ok(),
            (None, true) => {
                // The client side was not configured at start (no CA then).
                return Err("tls-cluster and tls-replication need a restart with \
                            tls-ca-cert-file or tls-ca-cert-dir set"
                    .into());
            }
            (None, false) => None,
        };
        self.acceptor.reload(server);
        if let (Some(connector), Some(client)) = (&self.connector, client) {
            connector.reload(client);
        }
        *self.lock() = settings;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TlsSettings> {
        self.settings.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_map_onto_rustls_and_refuse_old_ones() {
        assert_eq!(protocol_versions("").unwrap().len(), 2);
        assert_eq!(
            protocol_versions("TLSv1.3").unwrap(),
            vec![&rustls::version::TLS13]
        );
        assert_eq!(protocol_versions("tlsv1.2 TLSv1.3").unwrap().len(), 2);
        let error = protocol_versions("TLSv1.1 TLSv1.2").unwrap_err();
        assert!(error.contains("TLSv1.2 and TLSv1.3 only"), "{error}");
        assert!(protocol_versions("SSLv3").is_err());
    }

    #[test]
    fn cipher_lists_map_onto_rustls_suites() {
        assert_eq!(tls13_suites("").unwrap().len(), 3);
        assert_eq!(
            tls13_suites("TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256")
                .unwrap()
                .len(),
            2
        );
        let error = tls13_suites("TLS_AES_128_CCM_SHA256").unwrap_err();
        assert!(error.contains("not supported by rustls"), "{error}");
        assert_eq!(tls12_suites("DEFAULT").unwrap().len(), 6);
        assert_eq!(tls12_suites("HIGH:!aNULL:!MD5:@STRENGTH").unwrap().len(), 6);
        assert_eq!(
            tls12_suites("ECDHE-RSA-AES256-GCM-SHA384:TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            tls12_suites("ALL:!ECDHE-RSA-CHACHA20-POLY1305")
                .unwrap()
                .len(),
            5
        );
        let error = tls12_suites("AES128-SHA").unwrap_err();
        assert!(error.contains("not supported by rustls"), "{error}");
    }

    #[test]
    fn settings_follow_redis_names_and_checks() {
        let mut tls = TlsSettings::default();
        assert!(!tls.enabled());
        tls.set("tls-port", "6380").unwrap();
        assert!(tls.enabled());
        assert!(tls.validate().unwrap_err().contains("tls-cert-file"));
        tls.set("tls-cert-file", "/x.crt").unwrap();
        tls.set("tls-key-file", "/x.key").unwrap();
        // tls-auth-clients defaults to yes, which needs a CA, as in Redis.
        assert!(tls.validate().unwrap_err().contains("tls-ca-cert-file"));
        tls.set("tls-auth-clients", "no").unwrap();
        assert!(tls.validate().is_ok());
        tls.set("tls-cluster", "yes").unwrap();
        assert!(tls.validate().is_err());
        assert!(tls.set("tls-auth-clients", "maybe").is_err());
        assert!(tls.set("tls-protocols", "TLSv1").is_err());
        assert!(tls.set("tls-session-caching", "perhaps").is_err());
        let params = tls.parameters();
        assert!(params.contains(&("tls-port", "6380".into())));
        assert!(params.contains(&("tls-auth-clients", "no".into())));
    }
}
