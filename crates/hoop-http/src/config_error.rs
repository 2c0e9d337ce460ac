//! What is wrong with a [`Config`](crate::config::Config): one error for every check of the
//! configuration. Its own file because the rules' parsers (`cache_control`, `error_page`)
//! return it as `Config::validate` does, and `config` names their types: in `config.rs`, the
//! two files would import each other.
//!
//! (Plain std only: the fuzz target compiles this file on its own.)

use std::fmt;

/// What is wrong with a [`Config`](crate::config::Config)
/// ([`Config::validate`](crate::config::Config::validate)). The server's constructors return
/// it inside an [`std::io::Error`] of kind `InvalidInput` (get it back with
/// `err.get_ref().and_then(|e| e.downcast_ref::<ConfigError>())`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// [`Config::threads`](crate::config::Config::threads) is 0.
    ZeroThreads,
    /// [`Config::max_conns`](crate::config::Config::max_conns) is 0.
    ZeroMaxConns,
    /// [`Config::header_timeout`](crate::config::Config::header_timeout) is zero.
    ZeroHeaderTimeout,
    /// [`Config::idle_timeout`](crate::config::Config::idle_timeout) is zero.
    ZeroIdleTimeout,
    /// [`Config::stream_chunk_bytes`](crate::config::Config::stream_chunk_bytes) is 0.
    ZeroStreamChunk,
    /// [`Config::index`](crate::config::Config::index) is not one file name.
    BadIndex(String),
    /// A [`Config::cache_control`](crate::config::Config::cache_control) rule is malformed: the
    /// rule, and why.
    BadCacheControl {
        /// The rule as given (`PATTERN=VALUE`).
        rule: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// [`Config::content_security_policy`](crate::config::Config::content_security_policy) is
    /// not a header value: the value, and why.
    BadContentSecurityPolicy(String, &'static str),
    /// A [`Config::error_pages`](crate::config::Config::error_pages) entry is refused: the page
    /// (`STATUS=PATH`), and why.
    BadErrorPage {
        /// The page as given.
        page: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Not an [`AutoindexFormat`](crate::config::AutoindexFormat) name (`html`, `json`).
    BadAutoindexFormat(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroThreads => f.write_str("threads must be at least 1"),
            ConfigError::ZeroMaxConns => f.write_str("max_conns must be at least 1"),
            ConfigError::ZeroHeaderTimeout => f.write_str("header_timeout must not be zero"),
            ConfigError::ZeroIdleTimeout => f.write_str("idle_timeout must not be zero"),
            ConfigError::ZeroStreamChunk => f.write_str("stream_chunk_bytes must be at least 1"),
            ConfigError::BadIndex(name) => write!(
                f,
                "{name:?}: an index is one file name (not empty, no '/', not starting with '.')"
            ),
            ConfigError::BadCacheControl { rule, reason } => {
                write!(f, "cache-control rule {rule:?}: {reason}")
            }
            ConfigError::BadContentSecurityPolicy(v, reason) => {
                write!(f, "content-security-policy {v:?}: {reason}")
            }
            ConfigError::BadErrorPage { page, reason } => {
                write!(f, "error page {page:?}: {reason}")
            }
            ConfigError::BadAutoindexFormat(s) => {
                write!(f, "autoindex format {s:?}: html or json")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

impl From<ConfigError> for std::io::Error {
    fn from(e: ConfigError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e)
    }
}
