//! TLS for the client: roots (system or --cacert), client certificates, --skip-verify.
use crate::error::{bad_input, run_failed};
use pki_types::pem::PemObject;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::rustls::{self, pki_types};

/// The TLS choices of a target; none at all means plaintext (h2c).
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    pub cacert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub servername: Option<String>,
    pub skip_verify: bool,
}

pub fn config(options: &TlsOptions) -> anyhow::Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| run_failed(format!("TLS setup: {e}")))?;
    let verifier = if options.skip_verify {
        Verifier { provider, webpki: None, pinned: Vec::new() }
    } else {
        let mut roots = rustls::RootCertStore::empty();
        let mut pinned = Vec::new();
        match &options.cacert {
            Some(path) => {
                for cert in read_certs(path)? {
                    roots.add(cert.clone()).map_err(|e| bad_input(format!("--cacert {}: {e}", path.display())))?;
                    pinned.push(cert);
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| bad_input(format!("--cacert: {e}")))?;
        Verifier { provider, webpki: Some(webpki), pinned }
    };
    let builder = builder.dangerous().with_custom_certificate_verifier(Arc::new(verifier));
    let mut config = match (&options.cert, &options.key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(cert), Some(key)) => builder
            .with_client_auth_cert(read_certs(cert)?, read_key(key)?)
            .map_err(|e| bad_input(format!("--cert/--key: {e}")))?,
        _ => return Err(bad_input("--cert and --key go together")),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// A PEM file's bytes, bounded (`crate::input`): the PEM reader reads lines, and a file with
/// none (`/dev/zero`) would grow until memory ran out.
fn read_pem(path: &Path) -> anyhow::Result<Vec<u8>> {
    crate::input::read(path, crate::input::Kind::Pem, &path.display().to_string())
}

fn read_certs(path: &Path) -> anyhow::Result<Vec<pki_types::CertificateDer<'static>>> {
    let pem = read_pem(path)?;
    let certs = pki_types::CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_input(format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(bad_input(format!("{}: no PEM certificate", path.display())));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> anyhow::Result<pki_types::PrivateKeyDer<'static>> {
    pki_types::PrivateKeyDer::from_pem_slice(&read_pem(path)?)
        .map_err(|e| bad_input(format!("{}: {e}", path.display())))
}

/// Checks the server's certificate as webpki does, with two exceptions users of grpcurl and
/// ghz expect: a server certificate given itself as `--cacert` (a self-signed one made by
/// `openssl req -x509`, which webpki refuses as "CA used as end entity") is accepted, and
/// `--skip-verify` accepts any. The handshake signatures are checked in every case, so the
/// peer at least holds the key of the certificate it shows.
#[derive(Debug)]
struct Verifier {
    provider: Arc<rustls::crypto::CryptoProvider>,
    /// None: `--skip-verify`.
    webpki: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    /// The `--cacert` certificates, accepted as they are when the server shows one of them.
    pinned: Vec<pki_types::CertificateDer<'static>>,
}

impl rustls::client::danger::ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &pki_types::CertificateDer<'_>,
        intermediates: &[pki_types::CertificateDer<'_>],
        server_name: &pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match &self.webpki {
            Some(_) if self.pinned.iter().any(|c| c.as_ref() == end_entity.as_ref()) => {
                Ok(rustls::client::danger::ServerCertVerified::assertion())
            }
            Some(webpki) => webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now),
            None => Ok(rustls::client::danger::ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
