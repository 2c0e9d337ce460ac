//! `--tls-cert FILE --tls-key FILE [--http2[=BOOL]]`: HTTPS for the HTTP servers. The files
//! are read when the server is made (a missing, empty or mismatched pair exits 1 with one
//! line naming the file) and again on SIGHUP.

use std::path::PathBuf;

/// The HTTPS flags (also keys of `--config`: `tls-cert = "..."`).
#[derive(Debug, Clone, clap::Args)]
pub struct TlsFlags {
    /// Serve HTTPS with this certificate chain (PEM, leaf first); needs --tls-key. TLS 1.3
    /// and 1.2 with rustls' default suites, session tickets, ALPN h2 (see --http2) and
    /// http/1.1. SIGHUP reads both files again: new connections get the new pair, open ones
    /// keep theirs, and a pair that does not load is said on stderr and the old one stays.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Over HTTPS, offer HTTP/2 by ALPN (on by default; --http2=false leaves HTTP/1.1). Plain
    /// HTTP is HTTP/1.1 either way.
    #[arg(long, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = true, value_name = "BOOL")]
    pub http2: bool,
}

impl TlsFlags {
    /// The certificate and key files, when both are given.
    pub fn files(&self) -> Option<(PathBuf, PathBuf)> {
        Some((self.tls_cert.clone()?, self.tls_key.clone()?))
    }
}
