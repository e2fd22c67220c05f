//! TLS for the HTTP endpoint (`serve.http.tls`): rustls with the aws-lc-rs
//! provider reqwest already brings. The certificate and key files are
//! checked for a change (their modification times and sizes) before each
//! new connection and reloaded when they changed, so a renewed certificate
//! applies without a restart; a reload that fails keeps the one in force and
//! says why in the log.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

use crate::config::serve::TlsSettings;

/// What tells a file changed.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &std::path::Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// The acceptor in force and the files it came from.
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    current: Mutex<(TlsAcceptor, Stamp, Stamp)>,
}

fn acceptor(
    settings_cert: &std::path::Path,
    settings_key: &std::path::Path,
) -> Result<TlsAcceptor, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(settings_cert)
        .map_err(|e| {
            format!(
                "cannot read serve.http.tls.cert {}: {e}",
                settings_cert.display()
            )
        })?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("serve.http.tls.cert {}: {e}", settings_cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "serve.http.tls.cert {} holds no PEM certificate",
            settings_cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(settings_key).map_err(|e| {
        format!(
            "serve.http.tls.key {}: {e} (a PEM private key is expected)",
            settings_key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("serve.http.tls: the certificate and key do not make a pair: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

impl Tls {
    pub fn load(settings: &TlsSettings) -> Result<Tls, String> {
        let a = acceptor(&settings.cert, &settings.key)?;
        Ok(Tls {
            current: Mutex::new((a, stamp(&settings.cert), stamp(&settings.key))),
            cert: settings.cert.clone(),
            key: settings.key.clone(),
        })
    }

    /// The acceptor for a new connection, reloaded first if the files
    /// changed since it was made.
    pub fn acceptor(&self) -> TlsAcceptor {
        let (cert, key) = (stamp(&self.cert), stamp(&self.key));
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.1 != cert || current.2 != key {
            match acceptor(&self.cert, &self.key) {
                Ok(a) => {
                    tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded");
                    *current = (a, cert, key);
                }
                Err(e) => {
                    // Retried at the next change only, not every connection.
                    tracing::error!("{e}; the certificate in force stays");
                    current.1 = cert;
                    current.2 = key;
                }
            }
        }
        current.0.clone()
    }
}
