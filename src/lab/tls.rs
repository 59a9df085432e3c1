//! TLS for `serve`: a certificate and key given (`--tls-cert`, `--tls-key`), optionally
//! client certificates required (`--tls-client-ca`), or a CA made on the spot for this
//! machine (`--self-signed DIR`), so that a run can measure what TLS and mTLS cost.
use crate::error::bad_input;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};
use tokio_rustls::rustls::crypto::ring::sign::any_supported_type;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::sign::CertifiedKey;
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

/// The certificates of a PEM file; none is an error naming `flag` and `path` (tonic's own
/// error for that, "peer sent no certificates", names neither).
fn certificates(flag: &str, path: &Path, pem: &[u8]) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>();
    match certs {
        Ok(certs) if !certs.is_empty() => Ok(certs),
        Ok(_) => Err(bad_input(format!(
            "{flag} {}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)",
            path.display()
        ))),
        Err(e) => Err(bad_input(format!("{flag} {}: not a PEM certificate: {e}", path.display()))),
    }
}

/// `--tls-client-ca`, read and checked.
pub fn read_client_ca(path: &Path) -> anyhow::Result<Vec<u8>> {
    let pem = read("--tls-client-ca", path)?;
    certificates("--tls-client-ca", path, &pem)?;
    Ok(pem)
}

impl LabTls {
    /// `--tls-cert`, `--tls-key` and maybe `--tls-client-ca`, read and checked: each one
    /// that is not what it should be, or a key that is not the certificate's, is one line
    /// naming the file.
    pub fn from_files(cert: &Path, key: &Path, client_ca: Option<&Path>) -> anyhow::Result<LabTls> {
        let (cert_pem, key_pem) = (read("--tls-cert", cert)?, read("--tls-key", key)?);
        let certs = certificates("--tls-cert", cert, &cert_pem)?;
        let bad_key =
            |e: &dyn std::fmt::Display| bad_input(format!("--tls-key {}: no usable private key: {e}", key.display()));
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| bad_key(&e))?;
        let signer = any_supported_type(&private).map_err(|e| bad_key(&e))?;
        if CertifiedKey::new(certs, signer).keys_match().is_err() {
            return Err(bad_input(format!(
                "--tls-key {}: not the key of the certificate in --tls-cert {}",
                key.display(),
                cert.display()
            )));
        }
        Ok(LabTls { cert_pem, key_pem, client_ca_pem: client_ca.map(read_client_ca).transpose()? })
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

/// Says that DIR's files were made by `--self-signed`, which may then rewrite them.
const MARKER: &str = ".rpcmeter-self-signed";
const CA: &str = "ca.pem";
const CA_KEY: &str = "ca-key.pem";
/// The files made afresh at each start: (name, secret).
const LEAVES: [(&str, bool); 4] =
    [("server.pem", false), ("server-key.pem", true), ("client.pem", false), ("client-key.pem", true)];

/// The certificates' validity: a year (browsers accept at most 398 days, and grpc-go checks
/// the dates), starting a day back so that a client whose clock is a little behind accepts it.
const LEAF_DAYS: i64 = 365;
/// The CA's: long enough that a ca.pem handed to clients keeps working across restarts.
const CA_DAYS: i64 = 3650;

/// Makes (or, on a restart, reuses) a CA in `dir` (made if missing), and a server certificate
/// for localhost, 127.0.0.1 and ::1 and a client certificate signed by it: ca.pem for
/// clients (`run --cacert DIR/ca.pem`, grpcurl -cacert, ghz --cacert), client.pem +
/// client-key.pem for mutual TLS (`run --cert --key`), server.pem + server-key.pem (what this
/// server uses), ca-key.pem to sign the next start's. Keys are readable by their owner only.
/// Never follows a link and never writes over a file it did not make: such a path is one
/// line, `bad_input`.
pub fn self_signed(dir: &Path) -> anyhow::Result<SelfSigned> {
    let present = claim(dir)?;
    let now = time::OffsetDateTime::now_utc();
    let (issuer, ca_not_after) = ca(dir, &present, now)?;
    let not_after = now + time::Duration::days(LEAF_DAYS);
    if ca_not_after < not_after {
        return Err(path_error(
            dir,
            CA,
            format!("expires before a year from now: remove {CA} and {CA_KEY} to make a new one"),
        ));
    }
    let tls = leaves(dir, &issuer, now, not_after)?;
    Ok(SelfSigned { dir: dir.to_owned(), tls })
}

/// A problem with the file `name` of DIR, as one line.
fn path_error(dir: &Path, name: &str, what: String) -> anyhow::Error {
    bad_input(format!("--self-signed {}: {what}", dir.join(name).display()))
}

fn failed(e: rcgen::Error) -> anyhow::Error {
    bad_input(format!("--self-signed: cannot make the certificates: {e}"))
}

/// DIR made if missing and claimed: its marker written, unless a file there was not made by
/// `--self-signed` (or is a link, or not a file). The names of our files already there.
fn claim(dir: &Path) -> anyhow::Result<Vec<&'static str>> {
    std::fs::create_dir_all(dir).map_err(|e| bad_input(format!("--self-signed {}: {e}", dir.display())))?;
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(bad_input(format!(
            "--self-signed {}: is a symbolic link, which --self-signed never follows; give the directory itself",
            dir.display()
        )));
    }
    // What is there: a link or anything but a file is refused, whoever made it.
    let mut present = Vec::new();
    for name in [MARKER, CA, CA_KEY].into_iter().chain(LEAVES.map(|(name, _)| name)) {
        match std::fs::symlink_metadata(dir.join(name)) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(path_error(
                    dir,
                    name,
                    "is a symbolic link, which --self-signed never follows: remove it".into(),
                ))
            }
            Ok(m) if !m.is_file() => return Err(path_error(dir, name, "is not a regular file: remove it".into())),
            Ok(_) => present.push(name),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(path_error(dir, name, e.to_string())),
        }
    }
    let ours = present.contains(&MARKER);
    if let Some(foreign) = present.iter().find(|_| !ours) {
        return Err(path_error(
            dir,
            foreign,
            format!(
                "exists, and without {MARKER} beside it --self-signed did not make it (or an older rpcmeter \
                 did): remove it or choose another DIR"
            ),
        ));
    }
    if !ours {
        create_new(&dir.join(MARKER), "made by rpcmeter serve --self-signed, which rewrites the files here\n", false)
            .map_err(|e| path_error(dir, MARKER, e.to_string()))?;
    }
    Ok(present)
}

/// The CA of DIR: the one there (`present`) reused, or a new one written; with its expiry.
fn ca(
    dir: &Path,
    present: &[&str],
    now: time::OffsetDateTime,
) -> anyhow::Result<(Issuer<'static, KeyPair>, time::OffsetDateTime)> {
    let days = time::Duration::days;
    match (present.contains(&CA), present.contains(&CA_KEY)) {
        (true, true) => {
            let read = |name: &str| read_nofollow(&dir.join(name)).map_err(|e| path_error(dir, name, e.to_string()));
            let (ca_pem, ca_key_pem) = (read(CA)?, read(CA_KEY)?);
            let unusable = |e: rcgen::Error| {
                path_error(dir, CA, format!("cannot reuse this CA ({e}): remove {CA} and {CA_KEY} to make a new one"))
            };
            let key = KeyPair::from_pem(&ca_key_pem).map_err(unusable)?;
            let not_after = validity(&ca_pem).ok_or(rcgen::Error::CouldNotParseCertificate).map_err(unusable)?.1;
            Ok((Issuer::from_ca_cert_pem(&ca_pem, key).map_err(unusable)?, not_after))
        }
        (false, false) => {
            let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.distinguished_name.push(DnType::CommonName, "rpcmeter lab CA");
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            (params.not_before, params.not_after) = (now - days(1), now + days(CA_DAYS));
            let key = KeyPair::generate().map_err(failed)?;
            let ca = params.self_signed(&key).map_err(failed)?;
            // The key first: a ca.pem without its key could never sign again.
            create_new(&dir.join(CA_KEY), &key.serialize_pem(), true)
                .map_err(|e| path_error(dir, CA_KEY, e.to_string()))?;
            create_new(&dir.join(CA), &ca.pem(), false).map_err(|e| path_error(dir, CA, e.to_string()))?;
            Ok((Issuer::new(params, key), now + days(CA_DAYS)))
        }
        (has_ca, _) => {
            let (there, missing) = if has_ca { (CA, CA_KEY) } else { (CA_KEY, CA) };
            Err(path_error(dir, there, format!("has no {missing} beside it: remove it to make a new CA")))
        }
    }
}

/// The server's and the client's certificates, signed by `issuer`, valid until `not_after`,
/// written over the last start's; the server's TLS as this server uses it.
fn leaves(
    dir: &Path,
    issuer: &Issuer<'_, KeyPair>,
    now: time::OffsetDateTime,
    not_after: time::OffsetDateTime,
) -> anyhow::Result<LabTls> {
    let leaf = |names: Vec<String>, name: &str, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        (params.not_before, params.not_after) = (now - time::Duration::days(1), not_after);
        Ok::<_, rcgen::Error>((params.signed_by(&key, issuer)?, key))
    };
    let names = SERVER_NAMES.iter().map(|n| n.to_string()).collect();
    let (server, server_key) = leaf(names, "rpcmeter lab", ExtendedKeyUsagePurpose::ServerAuth).map_err(failed)?;
    let (client, client_key) =
        leaf(vec!["rpcmeter client".into()], "rpcmeter client", ExtendedKeyUsagePurpose::ClientAuth).map_err(failed)?;
    let texts = [server.pem(), server_key.serialize_pem(), client.pem(), client_key.serialize_pem()];
    for ((name, secret), text) in LEAVES.iter().zip(&texts) {
        replace(dir, name, text, *secret).map_err(|e| path_error(dir, name, e.to_string()))?;
    }
    Ok(LabTls {
        cert_pem: server.pem().into_bytes(),
        key_pem: server_key.serialize_pem().into_bytes(),
        client_ca_pem: None,
    })
}

/// A PEM certificate's (not before, not after).
pub fn validity(pem: &str) -> Option<(time::OffsetDateTime, time::OffsetDateTime)> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    Some((cert.validity().not_before.to_datetime(), cert.validity().not_after.to_datetime()))
}

fn mode(secret: bool) -> u32 {
    if secret {
        0o600
    } else {
        0o644
    }
}

/// Reads a file that must not be a link (one put there since DIR was looked at).
fn read_nofollow(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut text = String::new();
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// Writes a file that must not exist yet: O_CREAT|O_EXCL (which never follows a link) and
/// O_NOFOLLOW, with its mode from the start.
fn create_new(path: &Path, text: &str, secret: bool) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(mode(secret))
        .open(path)?;
    file.write_all(text.as_bytes())
}

/// Puts a new version of one of DIR's files in place: written to a new temporary file beside
/// it, then renamed over it, which replaces a link planted meanwhile rather than follow it.
fn replace(dir: &Path, name: &str, text: &str, secret: bool) -> std::io::Result<()> {
    use std::io::Write;
    let permissions = std::os::unix::fs::PermissionsExt::from_mode(mode(secret));
    let mut file = tempfile::Builder::new().prefix(&format!(".{name}.")).permissions(permissions).tempfile_in(dir)?;
    file.write_all(text.as_bytes())?;
    file.persist(dir.join(name)).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_writes_a_ca_and_leaves_it_signed() {
        let dir = tempfile::tempdir().unwrap();
        let made = self_signed(&dir.path().join("pki")).unwrap();
        for name in ["ca.pem", "ca-key.pem", "server.pem", "server-key.pem", "client.pem", "client-key.pem"] {
            let text = std::fs::read_to_string(made.dir.join(name)).unwrap();
            assert!(text.starts_with("-----BEGIN"), "{name}: {text}");
        }
        use std::os::unix::fs::PermissionsExt;
        for key in ["client-key.pem", "server-key.pem", "ca-key.pem"] {
            let mode = std::fs::metadata(made.dir.join(key)).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{key} readable by others: {mode:o}");
        }
        // tonic takes it as a server identity.
        assert!(tonic::transport::Server::builder().tls_config(made.tls.server_config()).is_ok());
    }
}
