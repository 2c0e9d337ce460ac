//! HTTPS: the certificate and key ([`TlsFiles`]) loaded into a rustls configuration, the
//! handshake of each accepted socket on this thread's ring, and the protocol the client chose
//! by ALPN (`h2`: `crate::http2`; `http/1.1` or none: the request loop over TLS records).
//!
//! The configuration in use sits behind a lock that a [`TlsReloader`] swaps (SIGHUP in
//! `hoop serve http`): a handshake takes the current one, so connections already open keep
//! theirs and nothing is dropped; a reload that fails keeps the old one. Session tickets
//! (TLS 1.2 tickets, TLS 1.3 resumption) use one ticketer for the server's life, so a
//! reload does not end resumption.
//!
//! kTLS (the kernel's `tls` module) would let the kernel encrypt records, so `sendfile(2)`
//! and splice could send files over HTTPS without copying them through rustls; it needs the
//! module ([`ktls_available`] probes for it), so bodies here are read through the ring and
//! written through rustls (DESIGN.md, "HTTPS and HTTP/2").

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use hoop::net::TcpStream;
use rustls::server::ProducesTickets;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use crate::config::TlsFiles;
use crate::conn::transport::Transport;
use crate::conn::{OpenGuard, Shared};

/// Why a certificate or key could not be loaded: one line naming the file.
#[derive(Debug)]
pub enum TlsError {
    /// A file could not be read.
    Read(PathBuf, io::Error),
    /// The certificate file holds no PEM certificate.
    NoCertificate(PathBuf),
    /// The key file holds no PEM private key.
    NoKey(PathBuf),
    /// A file is not valid PEM.
    Pem(PathBuf, String),
    /// The key is not the certificate's.
    Mismatch {
        /// The key file.
        key: PathBuf,
        /// The certificate file.
        cert: PathBuf,
    },
    /// rustls refused the pair (an unsupported key type, a malformed certificate).
    Refused(String),
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Read(p, e) => write!(f, "cannot read {}: {e}", p.display()),
            TlsError::NoCertificate(p) => write!(
                f,
                "no certificate in {} (a PEM \"BEGIN CERTIFICATE\" block is needed)",
                p.display()
            ),
            TlsError::NoKey(p) => write!(
                f,
                "no private key in {} (a PEM \"BEGIN PRIVATE KEY\", \"BEGIN RSA PRIVATE KEY\" \
                 or \"BEGIN EC PRIVATE KEY\" block is needed)",
                p.display()
            ),
            TlsError::Pem(p, e) => write!(f, "{} is not valid PEM: {e}", p.display()),
            TlsError::Mismatch { key, cert } => write!(
                f,
                "the private key {} does not belong to the certificate {}",
                key.display(),
                cert.display()
            ),
            TlsError::Refused(e) => write!(f, "the certificate or key is not usable: {e}"),
        }
    }
}

impl std::error::Error for TlsError {}

impl From<TlsError> for io::Error {
    fn from(e: TlsError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

/// The server's TLS state: the files, and the configuration handshakes use now.
#[derive(Debug)]
pub(crate) struct Certs {
    files: TlsFiles,
    h2: bool,
    ticketer: Arc<dyn ProducesTickets>,
    current: RwLock<Arc<ServerConfig>>,
}

impl Certs {
    /// Loads `files`; `h2`: offer HTTP/2 by ALPN.
    pub(crate) fn load(files: &TlsFiles, h2: bool) -> Result<Certs, TlsError> {
        let ticketer = rustls::crypto::ring::Ticketer::new()
            .map_err(|e| TlsError::Refused(format!("session tickets: {e}")))?;
        let config = server_config(files, h2, ticketer.clone())?;
        Ok(Certs {
            files: files.clone(),
            h2,
            ticketer,
            current: RwLock::new(Arc::new(config)),
        })
    }

    /// The configuration for the next handshake.
    pub(crate) fn current(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads the files again; on success new handshakes use them.
    fn reload(&self) -> Result<(), TlsError> {
        let config = server_config(&self.files, self.h2, self.ticketer.clone())?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
        Ok(())
    }
}

/// Reloads a server's certificate and key from their files ([`Server::tls_reloader`]):
/// handshakes after a successful [`reload`](TlsReloader::reload) use the new pair,
/// connections already open keep theirs.
///
/// [`Server::tls_reloader`]: crate::Server::tls_reloader
#[derive(Debug, Clone)]
pub struct TlsReloader(pub(crate) Arc<Certs>);

impl TlsReloader {
    /// Reads the files again. On an error the pair in use stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        self.0.reload()
    }

    /// The files it reads.
    pub fn files(&self) -> &TlsFiles {
        &self.0.files
    }
}

/// A rustls server configuration of `files`: TLS 1.2 and 1.3 with rustls' default suites,
/// ALPN `h2` (if `h2`) and `http/1.1`, session tickets from `ticketer`.
fn server_config(
    files: &TlsFiles,
    h2: bool,
    ticketer: Arc<dyn ProducesTickets>,
) -> Result<ServerConfig, TlsError> {
    let cert_pem = std::fs::read(&files.cert).map_err(|e| TlsError::Read(files.cert.clone(), e))?;
    let key_pem = std::fs::read(&files.key).map_err(|e| TlsError::Read(files.key.clone(), e))?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem(files.cert.clone(), e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(files.cert.clone()));
    }
    let key = match PrivateKeyDer::from_pem_slice(&key_pem) {
        Ok(k) => k,
        Err(rustls_pki_types::pem::Error::NoItemsFound) => {
            return Err(TlsError::NoKey(files.key.clone()))
        }
        Err(e) => return Err(TlsError::Pem(files.key.clone(), e.to_string())),
    };
    // ring's primitives (no C toolchain to build, unlike aws-lc); its provider is deprecated
    // only for lacking post-quantum key exchange, which no peer compared here offers either.
    #[allow(deprecated)]
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = SUITES.to_vec();
    let provider = Arc::new(provider);
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Refused(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => TlsError::Mismatch {
                key: files.key.clone(),
                cert: files.cert.clone(),
            },
            e => TlsError::Refused(e.to_string()),
        })?;
    // The server's order, as nginx's `ssl_prefer_server_ciphers on` with Mozilla's
    // intermediate list: AES-128-GCM first, whose key schedule hashes with SHA-256 (ring's
    // SHA-384 has no vector code here: a full handshake under AES-256-GCM-SHA384, what
    // OpenSSL clients ask for first, cost 14% of its CPU in SHA-512 blocks).
    config.ignore_client_order = true;
    config.alpn_protocols = match h2 {
        true => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        false => vec![b"http/1.1".to_vec()],
    };
    config.ticketer = ticketer;
    Ok(config)
}

/// The suites offered, in the server's order of preference (TLS 1.3, then 1.2 with ECDHE).
const SUITES: &[rustls::SupportedCipherSuite] = {
    use rustls::crypto::ring::cipher_suite as cs;
    &[
        cs::TLS13_AES_128_GCM_SHA256,
        cs::TLS13_AES_256_GCM_SHA384,
        cs::TLS13_CHACHA20_POLY1305_SHA256,
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ]
};

/// Serves one accepted socket over TLS: the handshake under the header deadline, then HTTP/2
/// or HTTP/1.1 as ALPN chose. A failed handshake (a bad ClientHello, garbage, no shared
/// suite) gets rustls' alert and the close.
pub(crate) async fn serve(tcp: TcpStream, sh: Rc<Shared>) {
    let _open = OpenGuard(sh.open_conns.clone());
    let Some(certs) = sh.tls.as_ref() else {
        return;
    };
    let remote = tcp.peer_addr().ok();
    let acceptor = tokio_rustls::TlsAcceptor::from(certs.current());
    let tls = {
        let timer = sh.deadlines.register();
        // Until the ClientHello, the connection is one that sent nothing: the shutdown
        // closes it.
        timer.set_idle(Instant::now() + sh.cfg.header_timeout);
        let _idle = crate::conn::count(&sh.idle);
        if sh.stopping.get() {
            return;
        }
        match timer.run(acceptor.accept(tcp)).await {
            Some(Ok(tls)) => tls,
            Some(Err(_)) => {
                sh.tls_failed.set(sh.tls_failed.get() + 1);
                return;
            }
            None => return,
        }
    };
    if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
        crate::http2::serve(tls, sh, remote).await;
    } else {
        let t = Transport::Tls(Box::new(std::cell::RefCell::new(tls)));
        crate::conn::run::serve_transport(t, None, sh).await;
    }
}

/// Whether the kernel has kTLS: `setsockopt(TCP_ULP, "tls")` on a connected loopback socket
/// succeeds (ENOENT where the `tls` module is absent).
pub fn ktls_available() -> bool {
    use std::os::fd::AsRawFd;
    let Ok(listener) = std::net::TcpListener::bind("127.0.0.1:0") else {
        return false;
    };
    let Ok(addr) = listener.local_addr() else {
        return false;
    };
    let Ok(client) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let ulp = b"tls";
    // SAFETY: `client` is an open socket for the call; the option value is `ulp`, valid for
    // its length, which the kernel only reads.
    let rc = unsafe {
        libc::setsockopt(
            client.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_ULP,
            ulp.as_ptr().cast(),
            ulp.len() as libc::socklen_t,
        )
    };
    rc == 0
}

/// The files checked for a server ([`crate::Builder::tls`]): loaded once now, so a bad pair
/// is an error of `build`.
pub(crate) fn load(files: Option<&TlsFiles>, h2: bool) -> Result<Option<Arc<Certs>>, TlsError> {
    files.map(|f| Certs::load(f, h2).map(Arc::new)).transpose()
}
