//! TLS and mTLS for the gRPC server, with certificate hot reload (`GRPC_SERVER_*`,
//! `GRPC_CLIENT_TLS_*`; `docs/design/contract.md#settings`).
//!
//! The whole rustls `ServerConfig` (certificate, key and client CA) is rebuilt from the files and
//! swapped atomically; each new connection takes the current one, so established connections keep
//! the certificate they were made with. A reload that fails (half-written file, key that does not
//! match) keeps the previous configuration and logs why.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::TlsSettings;
use crate::background::Background;
use crate::reload::{WatchOptions, WatchTarget, watch_loop};

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file holds no usable PEM item of the expected kind.
    #[error("{}: {what}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
    /// rustls refused the combination (for example a key that does not match the certificate).
    #[error("invalid TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The contents of every file a TLS configuration is built from, to notice real changes.
type FileContents = Vec<Vec<u8>>;

/// The current server TLS configuration and the files it came from.
#[derive(Debug)]
pub struct ReloadingTls {
    settings: TlsSettings,
    current: ArcSwap<ServerConfig>,
    // The files in use and, after a failed attempt, the files that failed (reported once).
    loaded: Mutex<(FileContents, Option<FileContents>)>,
}

impl ReloadingTls {
    /// Loads the files; fails if they are not a usable configuration.
    pub fn try_new(settings: TlsSettings) -> Result<ReloadingTls, TlsError> {
        let contents = read_all(&settings)?;
        let config = build(&settings, &contents)?;
        Ok(ReloadingTls {
            settings,
            current: ArcSwap::from_pointee(config),
            loaded: Mutex::new((contents, None)),
        })
    }

    /// The configuration for the next connection.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current.load_full()
    }

    /// The files to watch.
    pub fn watch_targets(&self) -> Vec<WatchTarget> {
        let s = &self.settings;
        [Some(&s.cert), Some(&s.key), s.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .map(|p| WatchTarget::entry(p.clone()))
            .collect()
    }

    /// Watches the files and re-reads them when they change (and every `watch.poll`), until
    /// shutdown; connections opened after a change use the new certificate.
    pub fn watch(self: Arc<Self>, watch: WatchOptions, bg: &mut Background<'_>) {
        bg.spawn(watch_loop(
            self.watch_targets(),
            watch,
            bg.stopped(),
            move || {
                let tls = self.clone();
                async move {
                    let _ = tokio::task::spawn_blocking(move || tls.reload()).await;
                }
            },
        ));
    }

    /// Re-reads the files and swaps the configuration if they changed and are valid. Returns
    /// whether a new configuration is in use. Blocking (file I/O).
    pub fn reload(&self) -> bool {
        let contents = match read_all(&self.settings) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "TLS reload failed; keeping the current certificate");
                return false;
            }
        };
        let mut loaded = self.loaded.lock();
        if loaded.0 == contents || loaded.1.as_ref() == Some(&contents) {
            return false;
        }
        match build(&self.settings, &contents) {
            Ok(config) => {
                self.current.store(Arc::new(config));
                *loaded = (contents, None);
                tracing::info!("gRPC TLS certificate reloaded");
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "TLS reload failed; keeping the current certificate");
                loaded.1 = Some(contents);
                false
            }
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn read_all(s: &TlsSettings) -> Result<FileContents, TlsError> {
    let mut out = vec![read(&s.cert)?, read(&s.key)?];
    if let Some(ca) = &s.client_ca {
        out.push(read(ca)?);
    }
    Ok(out)
}

fn pem_error(path: &Path, what: impl std::fmt::Display) -> TlsError {
    TlsError::Pem {
        path: path.to_owned(),
        what: what.to_string(),
    }
}

fn certs(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e))?;
    if certs.is_empty() {
        return Err(pem_error(path, "no certificate found"));
    }
    Ok(certs)
}

/// Builds the rustls configuration from file contents (`[cert, key, ca?]`, as [`read_all`]).
fn build(s: &TlsSettings, contents: &FileContents) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certs(&s.cert, &contents[0])?;
    let key = PrivateKeyDer::from_pem_slice(&contents[1]).map_err(|e| pem_error(&s.key, e))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match (&s.client_ca, contents.get(2)) {
        (Some(ca_path), Some(ca_pem)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs(ca_path, ca_pem)? {
                roots.add(c)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| pem_error(ca_path, e))?;
            let verifier: Arc<dyn ClientCertVerifier> = match &s.client_san {
                Some(san) => Arc::new(SanVerifier {
                    inner: verifier,
                    san: ServerName::try_from(san.clone())
                        .map_err(|e| pem_error(ca_path, format!("GRPC_CLIENT_TLS_SAN: {e}")))?,
                }),
                None => verifier,
            };
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// A client verifier that also requires the client certificate to be valid for one DNS name.
#[derive(Debug)]
struct SanVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    san: ServerName<'static>,
}

impl ClientCertVerifier for SanVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        let cert = webpki::EndEntityCert::try_from(end_entity).map_err(|_| {
            rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding)
        })?;
        cert.verify_is_valid_for_subject_name(&self.san)
            .map_err(|_| {
                rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName)
            })?;
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
