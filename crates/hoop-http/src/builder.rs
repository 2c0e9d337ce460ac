//! [`Builder`]: a [`Server`] from a root and the settings a program usually changes.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hoop::sync::CancellationToken;

use crate::access_log::{AccessLog, AccessLogEntry};
use crate::config::{AutoindexFormat, CacheControlRule, Config, ErrorPage};
use crate::server::{Parts, Server};
use crate::service::{Body, BoxError, MakeFallback};
use crate::stop::StopOn;
use tower_service::Service;

/// Builds a [`Server`] ([`Server::builder`]): every setter starts from [`Config::default()`]
/// and [`build`](Builder::build) checks the result ([`Config::validate`]) and opens the root.
///
/// ```no_run
/// use std::time::Duration;
///
/// let server = hoop_http::Server::builder("./public")
///     .threads(2)
///     .idle_timeout(Duration::from_secs(30))
///     .access_log(|e| eprintln!("{e}"))
///     .shutdown_on_signal()
///     .build()?;
/// server.run("127.0.0.1:8080")?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "a builder does nothing until build() is called"]
pub struct Builder {
    root: Option<PathBuf>,
    cfg: Config,
    log: Option<AccessLog>,
    stop: StopOn,
    service: Option<MakeFallback>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("root", &self.root)
            .field("cfg", &self.cfg)
            .field("access_log_hook", &self.log.is_some())
            .field("stop", &self.stop)
            .field("fallback_service", &self.service.is_some())
            .finish()
    }
}

impl Server {
    /// A [`Builder`] for a server of the directory `root`: the common settings, an
    /// access-log hook and when [`run`](Server::run) stops.
    pub fn builder(root: impl AsRef<Path>) -> Builder {
        Builder {
            root: Some(root.as_ref().to_path_buf()),
            ..Builder::new()
        }
    }

    /// A [`Builder`] for a server with no files: `service` answers every request (see
    /// [`Builder::fallback_service`]; [`Builder::root`] adds files in front of it).
    ///
    /// ```no_run
    /// use axum::{routing::get, Router};
    ///
    /// let app = Router::new().route("/health", get(|| async { "ok" }));
    /// let server = hoop_http::Server::with_service(app).build()?;
    /// server.run("127.0.0.1:8080")?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_service<S, B>(service: S) -> Builder
    where
        S: Service<http::Request<Body>, Response = http::Response<B>> + Clone + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: 'static,
        B: http_body::Body + 'static,
        B::Error: Into<BoxError>,
    {
        Builder::new().fallback_service(service)
    }
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// A builder with no root and no service ([`build`](Builder::build) wants one of them).
    pub fn new() -> Builder {
        Builder {
            root: None,
            cfg: Config::default(),
            log: None,
            stop: StopOn::default(),
            service: None,
        }
    }

    /// The directory to serve (replaces the one given to [`Server::builder`]).
    pub fn root(mut self, root: impl AsRef<Path>) -> Builder {
        self.root = Some(root.as_ref().to_path_buf());
        self
    }

    /// The service behind the files: every request no file answers (a target with no file,
    /// and every method but GET and HEAD, and every request with a body) goes to `service`, a
    /// [`tower_service::Service`] over [`http::Request`]s with a streamed [`Body`] whose
    /// response is an [`http::Response`] with any [`http_body::Body`]: an axum `Router` plugs
    /// in as it is. Each runtime thread calls a clone of its own, so its futures and bodies
    /// need not be `Send`.
    ///
    /// The connection's rules hold for it as for files: keep-alive and pipelining (answers
    /// leave in order, a batch in one send), the header and idle timeouts (the idle one
    /// bounds each read of the body and each send of the response, never the service's own
    /// work), [`Config::max_body_bytes`] (413), the access log. A request body is streamed to
    /// the service as it arrives, at most 256 KiB queued ahead of it, with `Content-Length`
    /// or chunked, and `Expect: 100-continue` answered when the service first polls it; the
    /// response body is streamed out with a `Content-Length` where its length is known,
    /// chunked otherwise. A service error or a panic in a handler answers 500, and the
    /// connection goes on when the request body was read; a body the service left unread
    /// is read and dropped (up to 256 KiB) to keep the connection, else it closes.
    ///
    /// ```no_run
    /// use axum::{routing::post, Router};
    ///
    /// let app = Router::new().route("/echo", post(|body: String| async move { body }));
    /// let server = hoop_http::Server::builder("./public").fallback_service(app).build()?;
    /// server.run("127.0.0.1:8080")?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn fallback_service<S, B>(mut self, service: S) -> Builder
    where
        S: Service<http::Request<Body>, Response = http::Response<B>> + Clone + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: 'static,
        B: http_body::Body + 'static,
        B::Error: Into<BoxError>,
    {
        self.service = Some(MakeFallback::new(service));
        self
    }

    /// [`Config::max_body_bytes`]: the largest request body the service is handed.
    pub fn max_body_bytes(mut self, n: u64) -> Builder {
        self.cfg.max_body_bytes = n;
        self
    }

    /// Replaces the whole configuration (the setters below change one field of it).
    pub fn config(mut self, cfg: Config) -> Builder {
        self.cfg = cfg;
        self
    }

    /// [`Config::header_timeout`]: the request head must be complete this long after the
    /// connection opened or the head started (not zero).
    pub fn header_timeout(mut self, d: Duration) -> Builder {
        self.cfg.header_timeout = d;
        self
    }

    /// [`Config::idle_timeout`]: an idle keep-alive connection, or a send that makes no
    /// progress, is closed after this long (not zero).
    pub fn idle_timeout(mut self, d: Duration) -> Builder {
        self.cfg.idle_timeout = d;
        self
    }

    /// [`Config::max_conns`]: connections open at once over every thread (at least 1).
    pub fn max_conns(mut self, n: usize) -> Builder {
        self.cfg.max_conns = n;
        self
    }

    /// [`Config::cache_bytes`]: the in-memory file cache over every thread (0: none).
    pub fn cache_bytes(mut self, n: u64) -> Builder {
        self.cfg.cache_bytes = n;
        self
    }

    /// [`Config::cache_max_file_bytes`]: the largest file the cache keeps.
    pub fn cache_max_file_bytes(mut self, n: u64) -> Builder {
        self.cfg.cache_max_file_bytes = n;
        self
    }

    /// [`Config::index`]: the file served for a directory target, one file name (checked by
    /// [`check_index`](crate::config::check_index)).
    pub fn index(mut self, name: impl Into<String>) -> Builder {
        self.cfg.index = name.into();
        self
    }

    /// [`Config::shutdown_grace`]: how long responses in flight may take to finish once the
    /// shutdown began.
    pub fn shutdown_grace(mut self, d: Duration) -> Builder {
        self.cfg.shutdown_grace = d;
        self
    }

    /// [`Config::backlog`]: the listen backlog of the listeners [`Server::bind`] makes (the
    /// kernel caps it at `net.core.somaxconn`).
    pub fn backlog(mut self, n: u32) -> Builder {
        self.cfg.backlog = n;
        self
    }

    /// [`Config::threads`]: the runtime threads [`Server::run`] starts, or that the caller
    /// runs [`Server::serve`] on (the cache is split between them); at least 1.
    pub fn threads(mut self, n: usize) -> Builder {
        self.cfg.threads = n;
        self
    }

    /// [`Config::autoindex`]: list a directory that has no index file (else 403).
    pub fn autoindex(mut self, on: bool) -> Builder {
        self.cfg.autoindex = on;
        self
    }

    /// [`Config::autoindex_format`]: the listing as HTML (the default) or JSON; only used
    /// with [`autoindex`](Builder::autoindex) on.
    pub fn autoindex_format(mut self, format: AutoindexFormat) -> Builder {
        self.cfg.autoindex_format = format;
        self
    }

    /// Appends a [`Config::cache_control`] rule: `pattern` (a path glob `*.css`, `/assets/*`,
    /// or a content type `image/*`, `text/html`) gets `Cache-Control: value`; the first rule
    /// that matches wins. A bad rule is refused by [`build`](Builder::build).
    pub fn cache_control(
        mut self,
        pattern: impl Into<String>,
        value: impl Into<String>,
    ) -> Builder {
        self.cfg
            .cache_control
            .push(CacheControlRule::new(pattern, value));
        self
    }

    /// [`Config::security_headers`]: `X-Content-Type-Options: nosniff` on every response.
    pub fn security_headers(mut self, on: bool) -> Builder {
        self.cfg.security_headers = on;
        self
    }

    /// [`Config::content_security_policy`]: a `Content-Security-Policy: value` line on every
    /// response (a bad value is refused by [`build`](Builder::build)).
    pub fn content_security_policy(mut self, value: impl Into<String>) -> Builder {
        self.cfg.content_security_policy = Some(value.into());
        self
    }

    /// Appends a [`Config::error_pages`] entry: the file `path` under the root answers for
    /// `status` (403 or 404; another is refused by [`build`](Builder::build)). The file is read
    /// by `build`; one that cannot be read leaves the built-in page, said on stderr.
    pub fn error_page(mut self, status: u16, path: impl Into<String>) -> Builder {
        self.cfg.error_pages.push(ErrorPage::new(status, path));
        self
    }

    /// An access-log hook: called once per answered request on the thread that answered it
    /// (keep it quick). Replaces the built-in stdout logger ([`Config::access_log`]). Without
    /// either, nothing is formatted per request.
    pub fn access_log<F>(mut self, hook: F) -> Builder
    where
        F: Fn(&AccessLogEntry<'_>) + Send + Sync + 'static,
    {
        self.log = Some(Arc::new(hook));
        self
    }

    /// [`Server::run`] stops (gracefully) when `token` is cancelled.
    pub fn shutdown_on(mut self, token: CancellationToken) -> Builder {
        self.stop.token = Some(token);
        self
    }

    /// [`Server::run`] stops (gracefully) on SIGINT or SIGTERM (read with
    /// [`hoop::signal`]). `run` blocks them in the calling thread while it serves (see
    /// [`hoop::run_per_core`]): call it from the main thread, or block them in every thread
    /// of your own, else the kernel may give a signal to a thread that does not block it and
    /// its default action ends the process.
    pub fn shutdown_on_signal(mut self) -> Builder {
        self.stop.signals = true;
        self
    }

    /// [`Config::tls`]: serve HTTPS with this certificate chain and private key (PEM files),
    /// HTTP/2 offered by ALPN unless [`http2`](Builder::http2) is off. `build` loads them: a
    /// missing file, a file with no PEM item or a key that is not the certificate's is an
    /// `InvalidInput` error carrying a [`TlsError`](crate::TlsError).
    pub fn tls(mut self, cert: impl AsRef<Path>, key: impl AsRef<Path>) -> Builder {
        self.cfg.tls = Some(crate::TlsFiles {
            cert: cert.as_ref().to_path_buf(),
            key: key.as_ref().to_path_buf(),
        });
        self
    }

    /// [`Config::http2`]: offer HTTP/2 over HTTPS (on by default).
    pub fn http2(mut self, on: bool) -> Builder {
        self.cfg.http2 = on;
        self
    }

    /// [`Config::max_ranges`]: most parts of a range request (0: ranges off, 1: single ranges
    /// only; a set of more is answered with the whole file).
    pub fn max_ranges(mut self, n: usize) -> Builder {
        self.cfg.max_ranges = n;
        self
    }

    /// The server: the configuration checked (a [`ConfigError`](crate::ConfigError) in an
    /// `InvalidInput` [`io::Error`]), the root opened (its error as it comes); with neither
    /// a root nor a service, an `InvalidInput` error.
    pub fn build(self) -> io::Result<Server> {
        Server::with(Parts {
            root: self.root.as_deref(),
            cfg: self.cfg,
            log: self.log,
            stop: self.stop,
            service: self.service,
        })
    }
}
