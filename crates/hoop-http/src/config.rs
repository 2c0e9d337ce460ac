//! Every limit and timeout of the HTTP server, in one place, and their validation.
//!
//! (Plain std only: the fuzz target compiles this file on its own.)

use std::path::PathBuf;
use std::time::Duration;

pub use super::cache_control::CacheControlRule;
pub use super::config_error::ConfigError;
pub use super::error_page::ErrorPage;

/// Longest request target (the URI of the request line): longer gets 414.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Largest header block (after the request line): larger gets 431.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Most header fields in one request: more gets 431.
pub const MAX_HEADERS: usize = 100;

/// The server's limits and timeouts (`hoop serve http` flags and fixed values).
///
/// The fields are public: start from [`Config::default()`] and change what you need, or use
/// the builder (`Server::builder`), which sets the common ones. Either way the server checks
/// the whole configuration ([`Config::validate`]) when it is made.
#[derive(Debug, Clone)]
pub struct Config {
    /// A connection that has not sent a complete header block this long after it opened (or
    /// after the first byte of its next request) is closed (`--header-timeout-ms`).
    pub header_timeout: Duration,
    /// A keep-alive connection idle this long is closed; also bounds how long one send may wait
    /// for a client that stopped reading (`--idle-timeout-ms`).
    pub idle_timeout: Duration,
    /// Connections open at once, over every thread; past it new ones are accepted and closed at
    /// once (`--max-conns`).
    pub max_conns: usize,
    /// In-memory cache of whole files, over every thread (split evenly) (`--cache-bytes`).
    pub cache_bytes: u64,
    /// Largest file the cache keeps (and reads whole); bigger files are streamed.
    pub cache_max_file_bytes: u64,
    /// A response whose header and body together fit in this many bytes is copied into one
    /// buffer and sent with one send; bigger bodies are sent from where they are.
    pub one_send_max_bytes: usize,
    /// Files of at least this many bytes are spliced (file -> pipe -> socket) rather than
    /// cached or read and sent (see DESIGN.md for the measured crossover).
    pub splice_min_bytes: u64,
    /// Files of at least this many bytes are sent with `sendfile(2)` from the page cache (no
    /// copy through user memory), on connections that have an fd (see DESIGN.md for the
    /// measured crossover); `u64::MAX` turns it off.
    pub sendfile_min_bytes: u64,
    /// Chunk size when streaming a file that is not cached (read into memory, then sent).
    pub stream_chunk_bytes: usize,
    /// Responses of pipelined requests are gathered up to this many bytes before one send.
    pub out_batch_bytes: usize,
    /// After the shutdown began, how long responses in flight may take to finish; then the
    /// connections still open are closed.
    pub shutdown_grace: Duration,
    /// One line per request on stdout, as `hoop serve http --access-log` prints it
    /// (`[DATE] "GET /x HTTP/1.1" 200`); used when no access-log hook is given.
    pub access_log: bool,
    /// Runtime threads that serve (each with [`Server::serve`](crate::Server::serve), or
    /// the ones `Server::run` starts): the cache is split evenly between them.
    pub threads: usize,
    /// The file served for a directory target (`/`, `/docs/`) (`--index`): one path segment.
    pub index: String,
    /// Serve a precompressed variant (`a.css.br`, `a.css.zst`, `a.css.gz`: a regular file, not
    /// older than `a.css`) to a client whose `Accept-Encoding` takes it, as nginx's
    /// `gzip_static` and `brotli_static` (`--no-precompressed` turns it off). Only for
    /// compressible types (`mime::compressible`); those answer with
    /// `Vary: Accept-Encoding` whenever this is on.
    pub precompressed: bool,
    /// Compress on the fly (`--compress`; off by default, as nginx's `gzip`): a compressible
    /// file with no precompressed variant the client takes is sent in the coding it prefers
    /// (gzip, br or zstd), compressed once per file and coding and kept in a bounded cache
    /// (`crate::compress`). Its responses carry `Vary: Accept-Encoding`.
    pub compress: bool,
    /// Smallest file compressed on the fly (smaller ones gain less than the header costs).
    pub compress_min_bytes: u64,
    /// Largest file compressed on the fly (a bigger one is sent as it is).
    pub compress_max_bytes: u64,
    /// Bytes of bodies compressed on the fly kept, over every thread.
    pub compress_cache_bytes: u64,
    /// A directory target (`/docs/`) without its index file gets a listing of the directory
    /// instead of 403 (`--autoindex`).
    pub autoindex: bool,
    /// The listen backlog [`Server::bind`](crate::Server::bind) asks of the kernel for each
    /// listener (`--backlog`): connections completed and queued before they are accepted. The
    /// kernel caps it at `net.core.somaxconn` ([`hoop::net::backlog_cap`]); the default,
    /// [`hoop::net::DEFAULT_BACKLOG`], lets a burst of thousands of connects wait rather than
    /// be dropped.
    pub backlog: u32,
    /// `Cache-Control` rules, the first that matches a response wins (`--cache-control
    /// 'PATTERN=VALUE'`, repeatable): a path glob (`*.css`, `/assets/*`) or a content type
    /// (`image/*`, `text/html`), see [`CacheControlRule`]. On 200, 206 and 304 of a file and on
    /// listings; never on errors or redirects. Empty (the default): no header, no work.
    pub cache_control: Vec<CacheControlRule>,
    /// `X-Content-Type-Options: nosniff` on every response (`--security-headers`); off by
    /// default.
    pub security_headers: bool,
    /// A `Content-Security-Policy: VALUE` line on every response
    /// (`--content-security-policy VALUE`; visible ASCII and spaces); none by default.
    pub content_security_policy: Option<String>,
    /// Custom pages for 404 and 403, files under the root read once when the server is made
    /// (`--error-page 404=/404.html`, repeatable; the last one for a status wins). See
    /// [`ErrorPage`]: a page that cannot be read then leaves the built-in page, said on stderr.
    pub error_pages: Vec<ErrorPage>,
    /// The listing's format with [`autoindex`](Config::autoindex): HTML (the default) or JSON
    /// (`--autoindex-format json`).
    pub autoindex_format: AutoindexFormat,
    /// Most parts a `Range` request may ask for, as nginx's `max_ranges`
    /// (`--max-ranges`): a set of more specs, satisfiable or not, is answered with the whole
    /// file (200). 0 turns ranges off (no `Accept-Ranges: bytes`, every `Range` ignored); 1
    /// allows single ranges only; two or more parts are sent as `multipart/byteranges`.
    pub max_ranges: usize,
    /// The largest request body handed to the fallback service (`--max-body-bytes`): a
    /// `Content-Length` over it is answered 413 without calling the service, a chunked body
    /// that grows past it ends with an error the service sees (and the connection closes).
    /// Requests with a body only reach the service: without one they are answered 413.
    pub max_body_bytes: u64,
    /// HTTPS: the certificate chain and key, PEM (`--tls-cert`, `--tls-key`); `None`: plain
    /// HTTP. Loaded when the server is made (a bad or mismatched pair is an error then) and
    /// again by a [`TlsReloader`](crate::TlsReloader).
    pub tls: Option<TlsFiles>,
    /// Over HTTPS, offer HTTP/2 by ALPN (`--http2`, on by default); off, clients speak
    /// HTTP/1.1 over TLS.
    pub http2: bool,
}

/// The PEM files of a server's certificate chain and private key (`--tls-cert`, `--tls-key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first (PEM `CERTIFICATE` blocks).
    pub cert: PathBuf,
    /// The private key (PEM `PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`).
    pub key: PathBuf,
}

/// The format of a directory listing ([`Config::autoindex_format`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AutoindexFormat {
    /// An HTML page of links (`text/html; charset=utf-8`), as nginx's autoindex.
    #[default]
    Html,
    /// A JSON array (`application/json`), as static-web-server's JSON listing: each entry
    /// `{"name":"a.txt","type":"file","size":123,"mtime":"2026-11-27T00:00:00Z"}`, sorted by
    /// name as the HTML page; `type` is `file`, `directory`, `symlink` or `other`; `size` for
    /// regular files only; `mtime` (UTC, RFC 3339) for all but symlinks. Names are JSON
    /// strings (bytes that are not UTF-8 as U+FFFD). A truncated listing (over 10000
    /// entries) is the first 10000 read, sorted, with nothing added.
    Json,
}

impl std::str::FromStr for AutoindexFormat {
    type Err = ConfigError;

    /// `html` or `json`.
    fn from_str(s: &str) -> Result<AutoindexFormat, ConfigError> {
        match s {
            "html" => Ok(AutoindexFormat::Html),
            "json" => Ok(AutoindexFormat::Json),
            _ => Err(ConfigError::BadAutoindexFormat(s.to_string())),
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            header_timeout: Duration::from_millis(10_000),
            idle_timeout: Duration::from_millis(60_000),
            max_conns: 10_000,
            cache_bytes: 64 << 20,
            cache_max_file_bytes: 1 << 20,
            one_send_max_bytes: 16 * 1024,
            splice_min_bytes: 256 * 1024,
            sendfile_min_bytes: 16 * 1024,
            stream_chunk_bytes: 256 * 1024,
            out_batch_bytes: 64 * 1024,
            shutdown_grace: Duration::from_secs(5),
            access_log: false,
            threads: 1,
            index: "index.html".to_string(),
            precompressed: true,
            compress: false,
            compress_min_bytes: 256,
            compress_max_bytes: 8 << 20,
            compress_cache_bytes: 16 << 20,
            autoindex: false,
            backlog: hoop::net::DEFAULT_BACKLOG,
            cache_control: Vec::new(),
            security_headers: false,
            content_security_policy: None,
            error_pages: Vec::new(),
            autoindex_format: AutoindexFormat::Html,
            max_ranges: 32,
            max_body_bytes: 64 << 20,
            tls: None,
            http2: true,
        }
    }
}

impl Config {
    /// Checks the configuration: no zero timeout, connection limit, thread count or stream
    /// chunk, an [`index`](Config::index) that is one file name (see [`check_index`]), and
    /// well-formed [`cache_control`](Config::cache_control) rules,
    /// [`content_security_policy`](Config::content_security_policy) and
    /// [`error_pages`](Config::error_pages) (their files are read later, when the server is
    /// made).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.threads == 0 {
            return Err(ConfigError::ZeroThreads);
        }
        if self.max_conns == 0 {
            return Err(ConfigError::ZeroMaxConns);
        }
        if self.header_timeout.is_zero() {
            return Err(ConfigError::ZeroHeaderTimeout);
        }
        if self.idle_timeout.is_zero() {
            return Err(ConfigError::ZeroIdleTimeout);
        }
        if self.stream_chunk_bytes == 0 {
            return Err(ConfigError::ZeroStreamChunk);
        }
        check_index(&self.index)?;
        for rule in &self.cache_control {
            rule.check()?;
        }
        if let Some(csp) = &self.content_security_policy {
            check_content_security_policy(csp)?;
        }
        for page in &self.error_pages {
            page.check()?;
        }
        Ok(())
    }

    /// How often each thread looks for connections past their deadline: a quarter of the
    /// shorter timeout, between 10 ms and 1 s.
    pub fn sweep_interval(&self) -> Duration {
        (self.header_timeout.min(self.idle_timeout) / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1))
    }
}

/// Checks a `Content-Security-Policy` value ([`Config::content_security_policy`]): not empty,
/// visible ASCII and spaces only (no control byte, so no header can be smuggled in).
pub fn check_content_security_policy(value: &str) -> Result<(), ConfigError> {
    super::cache_control::check_header_value(value)
        .map_err(|reason| ConfigError::BadContentSecurityPolicy(value.to_string(), reason))
}

/// Checks an index file name ([`Config::index`]): one path segment, as nginx's `index`: not
/// empty, no `/`, no NUL, not starting with `.` (the server refuses to serve such names anyway).
pub fn check_index(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || name.starts_with('.') || name.contains('/') || name.contains('\0') {
        return Err(ConfigError::BadIndex(name.to_string()));
    }
    Ok(())
}
