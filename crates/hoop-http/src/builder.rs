//! [`Builder`]: a [`Server`] from a root and the settings a program usually changes.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hoop::sync::CancellationToken;

use crate::access_log::{AccessLog, AccessLogEntry};
use crate::config::{AutoindexFormat, CacheControlRule, Config, ErrorPage};
use crate::server::Server;
use crate::stop::StopOn;

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
    root: PathBuf,
    cfg: Config,
    log: Option<AccessLog>,
    stop: StopOn,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("root", &self.root)
            .field("cfg", &self.cfg)
            .field("access_log_hook", &self.log.is_some())
            .field("stop", &self.stop)
            .finish()
    }
}

impl Server {
    /// A [`Builder`] for a server of the directory `root`: the common settings, an
    /// access-log hook and when [`run`](Server::run) stops.
    pub fn builder(root: impl AsRef<Path>) -> Builder {
        Builder::new(root.as_ref())
    }
}

impl Builder {
    fn new(root: &Path) -> Builder {
        Builder {
            root: root.to_path_buf(),
            cfg: Config::default(),
            log: None,
            stop: StopOn::default(),
        }
    }

    /// The directory to serve (replaces the one given to [`Server::builder`]).
    pub fn root(mut self, root: impl AsRef<Path>) -> Builder {
        self.root = root.as_ref().to_path_buf();
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

    /// [`Config::max_ranges`]: most parts of a range request (0: ranges off, 1: single ranges
    /// only; a set of more is answered with the whole file).
    pub fn max_ranges(mut self, n: usize) -> Builder {
        self.cfg.max_ranges = n;
        self
    }

    /// The server: the configuration checked (a [`ConfigError`](crate::ConfigError) in an
    /// `InvalidInput` [`io::Error`]), the root opened (its error as it comes).
    pub fn build(self) -> io::Result<Server> {
        Server::with(&self.root, self.cfg, self.log, self.stop)
    }
}
