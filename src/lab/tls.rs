//! TLS for `serve`: a certificate and key given (`--tls-cert`, `--tls-key`), optionally
//! client certificates required (`--tls-client-ca`), or a CA made on the spot for this
//! machine (`--self-signed DIR`), so that a run can measure what TLS and mTLS cost.
use crate::error::bad_input;
use std::path::{Path, PathBuf};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

/// The lab's TLS, as PEM read from the files (read before serving, so that a bad file is
/// one line, not a server that never accepts).
#[derive(Clone)]
pub struct LabTls {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    /// Client certificates must chain to these (mutual TLS); `None`: no client certificate.
    pub client_ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for LabTls {
    // The key stays out of logs and panics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabTls").field("mutual", &self.client_ca_pem.is_some()).finish_non_exhaustive()
    }
}

fn read(flag: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    crate::input::read(path, crate::input::Kind::Pem, &format!("{flag} {}", path.display()))
}

/// `--tls-client-ca`, read.
pub fn read_client_ca(path: &Path) -> anyhow::Result<Vec<u8>> {
    read("--tls-client-ca", path)
}

impl LabTls {
    /// `--tls-cert`, `--tls-key` and maybe `--tls-client-ca`, read.
    pub fn from_files(cert: &Path, key: &Path, client_ca: Option<&Path>) -> anyhow::Result<LabTls> {
        Ok(LabTls {
            cert_pem: read("--tls-cert", cert)?,
            key_pem: read("--tls-key", key)?,
            client_ca_pem: client_ca.map(read_client_ca).transpose()?,
        })
    }

    /// tonic's configuration (ALPN h2 included); its own checks of the PEM happen when the
    /// server takes it (`LabServer::start` does so before listening).
    pub fn server_config(&self) -> ServerTlsConfig {
        let config = ServerTlsConfig::new().identity(Identity::from_pem(&self.cert_pem, &self.key_pem));
        match &self.client_ca_pem {
            Some(ca) => config.client_ca_root(Certificate::from_pem(ca)),
            None => config,
        }
    }

    pub fn mutual(&self) -> bool {
        self.client_ca_pem.is_some()
    }
}

/// What `--self-signed DIR` wrote.
#[derive(Debug, Clone)]
pub struct SelfSigned {
    pub dir: PathBuf,
    pub tls: LabTls,
}

/// Names the server certificate holds: what a client on this machine dials.
const SERVER_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Makes a CA, a server certificate for localhost, 127.0.0.1 and ::1, and a client
/// certificate, both signed by the CA, and writes them into `dir` (made if missing):
/// ca.pem for clients (`run --cacert DIR/ca.pem`, grpcurl -cacert, ghz --cacert),
/// client.pem + client-key.pem for mutual TLS (`run --cert --key`), server.pem +
/// server-key.pem (what this server uses). Fresh keys every time: nothing here is a secret
/// worth keeping, but keys are written readable by their owner only.
pub fn self_signed(dir: &Path) -> anyhow::Result<SelfSigned> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let failed = |e: rcgen::Error| bad_input(format!("--self-signed: cannot make the certificates: {e}"));
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "rpcmeter lab CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(failed)?).map_err(failed)?;
    let leaf = |names: Vec<String>, name: &str, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        Ok::<_, rcgen::Error>((params.signed_by(&key, &ca)?, key))
    };
    let names = SERVER_NAMES.iter().map(|n| n.to_string()).collect();
    let (server, server_key) = leaf(names, "rpcmeter lab", ExtendedKeyUsagePurpose::ServerAuth).map_err(failed)?;
    let (client, client_key) =
        leaf(vec!["rpcmeter client".into()], "rpcmeter client", ExtendedKeyUsagePurpose::ClientAuth).map_err(failed)?;

    std::fs::create_dir_all(dir).map_err(|e| bad_input(format!("--self-signed {}: {e}", dir.display())))?;
    let files = [
        ("ca.pem", ca.pem(), false),
        ("server.pem", server.pem(), false),
        ("server-key.pem", server_key.serialize_pem(), true),
        ("client.pem", client.pem(), false),
        ("client-key.pem", client_key.serialize_pem(), true),
    ];
    for (name, text, secret) in &files {
        write(&dir.join(name), text, *secret)
            .map_err(|e| bad_input(format!("--self-signed {}: {e}", dir.join(name).display())))?;
    }
    let tls = LabTls {
        cert_pem: server.pem().into_bytes(),
        key_pem: server_key.serialize_pem().into_bytes(),
        client_ca_pem: None,
    };
    Ok(SelfSigned { dir: dir.to_owned(), tls })
}

fn write(path: &Path, text: &str, secret: bool) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mode = if secret { 0o600 } else { 0o644 };
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(path)?;
    // A file already there keeps its mode on open: set it.
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    file.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_writes_a_ca_and_leaves_it_signed() {
        let dir = tempfile::tempdir().unwrap();
        let made = self_signed(&dir.path().join("pki")).unwrap();
        for name in ["ca.pem", "server.pem", "server-key.pem", "client.pem", "client-key.pem"] {
            let text = std::fs::read_to_string(made.dir.join(name)).unwrap();
            assert!(text.starts_with("-----BEGIN"), "{name}: {text}");
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(made.dir.join("client-key.pem")).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "a key readable by others: {mode:o}");
        // tonic takes it as a server identity.
        assert!(tonic::transport::Server::builder().tls_config(made.tls.server_config()).is_ok());
    }
}
