//! Certificates and private keys from PEM (the files `openssl` and `rcgen` write).

use std::io;
use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn pem_error(
    what: &str,
    source: &dyn std::fmt::Display,
    error: rustls::pki_types::pem::Error,
) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what} {source}: {error}"),
    )
}

/// Every certificate in a PEM file, in order (a chain: leaf first). An empty file is an error.
pub fn certs_from_file(path: impl AsRef<Path>) -> io::Result<Vec<CertificateDer<'static>>> {
    let path = path.as_ref();
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| pem_error("certificates in", &path.display(), e))?;
    if certs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("no certificate in {}", path.display()),
        ));
    }
    Ok(certs)
}

/// Every certificate in PEM text.
pub fn certs_from_pem(pem: &[u8]) -> io::Result<Vec<CertificateDer<'static>>> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error("certificates in", &"PEM text", e))
}

/// The first private key (PKCS#8, PKCS#1 RSA or SEC1 EC) in a PEM file.
pub fn private_key_from_file(path: impl AsRef<Path>) -> io::Result<PrivateKeyDer<'static>> {
    let path = path.as_ref();
    PrivateKeyDer::from_pem_file(path).map_err(|e| pem_error("private key in", &path.display(), e))
}

/// The first private key in PEM text.
pub fn private_key_from_pem(pem: &[u8]) -> io::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| pem_error("private key in", &"PEM text", e))
}
