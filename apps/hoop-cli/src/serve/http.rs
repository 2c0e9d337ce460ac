//! `hoop serve http`: the flags of the static-file server of [`hoop_http`], and the hyper
//! baselines the HTTP benchmark runs under the same command.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hoop_http::{
    AccessLogFormat, AccessLogWriter, AutoindexFormat, Builder, CacheControlRule, Config,
    ConfigError, ErrorPage, Server,
};

use super::driver::{DriverArg, MAX_THREADS};
use super::threads::{raise_nofile_limit, run_threads, settle_driver, Serve};
use hoop_flags::signal::Signals;
pub(crate) use hoop_flags::values::{
    parse_bytes, parse_max_conns, parse_root, parse_threads, parse_timeout_ms,
};

/// The flags `hoop serve http` and `hoop serve arena` share: where and how the server runs.
#[derive(Debug, clap::Args)]
pub struct ServerFlags {
    /// Address to listen on; port 0 picks a free port (the first line printed says which).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    #[command(flatten)]
    pub backlog: hoop_flags::backlog::BacklogArg,
    /// Runtime threads, each pinned to a CPU with its own listener (SO_REUSEPORT).
    #[arg(long, default_value_t = 1, value_parser = parse_threads)]
    pub threads: usize,
    /// hoop's driver: uring, epoll, or auto (io_uring, else epoll). Default: $HOOP_DRIVER when
    /// set, else auto.
    #[arg(long, value_enum, value_name = "DRIVER")]
    pub driver: Option<DriverArg>,
    /// In-memory file cache over every thread, in bytes (suffixes k, M, G: binary).
    #[arg(long, default_value = "64M", value_parser = parse_bytes, value_name = "BYTES")]
    pub cache_bytes: u64,
    /// Most open connections; past it new connections are accepted and closed at once.
    #[arg(long, default_value_t = 10_000, value_parser = parse_max_conns, value_name = "N")]
    pub max_conns: usize,
    /// Close a connection whose request head is not complete after this long.
    #[arg(long, default_value_t = 10_000, value_parser = parse_timeout_ms, value_name = "MS")]
    pub header_timeout_ms: u64,
    /// Close a keep-alive connection idle this long (also bounds a stalled send).
    #[arg(long, default_value_t = 60_000, value_parser = parse_timeout_ms, value_name = "MS")]
    pub idle_timeout_ms: u64,
    /// On SIGINT or SIGTERM: how long the answers in flight may take to finish (new
    /// connections are refused and idle ones closed at once). An answer still going when it
    /// runs out is cut, with one line on stderr saying which, and the command exits with
    /// status 3 instead of 0.
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    pub shutdown_grace_ms: u64,
    /// One line per request on stdout, after the `listening on` line.
    #[arg(long, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, value_name = "BOOL")]
    pub access_log: bool,
    /// Write the access log to this file (appended; created mode 0644) instead of stdout;
    /// implies --access-log. A full disk never stops the server: lost lines are counted and
    /// said on stderr.
    #[arg(long, value_name = "PATH")]
    pub access_log_file: Option<PathBuf>,
    /// The access log's lines: hoop (`[DATE] "GET /a HTTP/1.1" 200`, the default), combined
    /// (nginx's: address, time, request, status, body bytes, referer, user agent) or json (one
    /// object per line with the same fields).
    #[arg(long, default_value = "hoop", value_parser = parse_access_log_format, value_name = "FORMAT")]
    pub access_log_format: AccessLogFormat,
}

impl ServerFlags {
    /// The configuration these flags set (the rest as `Config::default()`), `--threads`
    /// checked.
    pub(crate) fn config(&self) -> io::Result<Config> {
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(invalid(format!(
                "--threads must be between 1 and {MAX_THREADS}, not {}",
                self.threads
            )));
        }
        Ok(Config {
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            max_conns: self.max_conns,
            cache_bytes: self.cache_bytes,
            access_log: self.access_log || self.access_log_file.is_some(),
            shutdown_grace: Duration::from_millis(self.shutdown_grace_ms),
            threads: self.threads,
            backlog: self.backlog.backlog,
            ..Config::default()
        })
    }

    /// `builder` with the access log these flags ask for: to the file, or on stdout in the
    /// format asked for (the built-in `hoop` lines on stdout need no hook).
    pub(crate) fn logged(&self, builder: Builder) -> io::Result<Builder> {
        let format = self.access_log_format;
        if let Some(path) = &self.access_log_file {
            let log = AccessLogWriter::append(path).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot open the access log {}: {e}", path.display()),
                )
            })?;
            let log = log.with_format(format);
            return Ok(builder.access_log(move |e| log.log(e)));
        }
        if self.access_log && format != AccessLogFormat::Hoop {
            let hook = hoop_http::stdout_logger_as(format);
            return Ok(builder.access_log(move |e| hook(e)));
        }
        Ok(builder)
    }

    /// Serves `server` on these flags' threads and driver, each thread with its own listener,
    /// until SIGINT or SIGTERM.
    pub(crate) fn serve(&self, name: &'static str, server: Server) -> io::Result<()> {
        // Before any thread exists, so that every thread inherits the mask.
        let signals = match server.tls_reloader() {
            Some(tls) => Signals::block()?.on_hangup(move || match tls.reload() {
                Ok(()) => eprintln!(
                    "hoop-http: SIGHUP: new connections use {}",
                    tls.files().cert.display()
                ),
                Err(e) => eprintln!("hoop-http: SIGHUP: kept the certificate in use: {e}"),
            })?,
            None => Signals::block()?,
        };
        raise_nofile_limit();
        let kind = settle_driver(name, self.driver)?;
        let cut_off = Arc::new(AtomicU64::new(0));
        let cut = cut_off.clone();
        let serve: Serve = Arc::new(move |_i, listener, stop| {
            let server = server.clone();
            let cut = cut.clone();
            Box::pin(async move {
                let stats = server.serve(listener, stop.wait()).await;
                cut.fetch_add(stats.cut_off, Ordering::Relaxed);
            })
        });
        let addr = (self.addr.as_str(), self.backlog.backlog);
        run_threads(name, addr, self.threads, kind, &signals, serve)?;
        match cut_off.load(Ordering::Relaxed) {
            0 => Ok(()),
            n => Err(io::Error::other(CutOff(n))),
        }
    }
}

/// The stop cut `0` answers short (the shutdown grace ran out): the command exits with
/// [`CutOff::EXIT_STATUS`].
#[derive(Debug)]
pub(crate) struct CutOff(pub u64);

impl CutOff {
    /// The exit status of a stop that cut answers (0: a clean stop; 1: an error).
    pub(crate) const EXIT_STATUS: u8 = 3;
}

impl std::fmt::Display for CutOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "stopped with {} answer(s) cut short by --shutdown-grace-ms",
            self.0
        )
    }
}

impl std::error::Error for CutOff {}

/// Arguments of `hoop serve http`.
#[derive(Debug, clap::Args)]
pub struct HttpArgs {
    #[command(flatten)]
    pub config: hoop_flags::config_file::ConfigArg,
    /// The directory to serve.
    #[arg(long, value_parser = parse_root)]
    pub root: PathBuf,
    #[command(flatten)]
    pub common: ServerFlags,
    #[command(flatten)]
    pub tls: hoop_flags::tls::TlsFlags,
    /// The file served for a directory (`GET /` or `/docs/`), as nginx's `index`: one file
    /// name, no `/`, not starting with `.`.
    #[arg(long, default_value = "index.html", value_parser = parse_index, value_name = "NAME")]
    pub index: String,
    /// Do not serve precompressed files. By default `GET /a.css` from a client whose
    /// Accept-Encoding takes br, zstd or gzip is answered with `a.css.br`, `a.css.zst` or
    /// `a.css.gz` (the higher weight first, then in that order) when that is a regular file
    /// not older than `a.css` (with Content-Encoding, the Content-Type of `a.css`, and Vary:
    /// Accept-Encoding on every response of a compressible type), as nginx's gzip_static and
    /// brotli_static. nginx leaves those off; hoop turns this on
    /// because it only serves a variant the client accepts and that is fresh: the cost is one
    /// lookup per variant, only for compressible types and only when the client accepts one.
    #[arg(long, overrides_with = "precompressed")]
    pub no_precompressed: bool,
    /// Serve precompressed files: the default, said explicitly (of this and
    /// --no-precompressed, the last one given wins).
    #[arg(long, overrides_with = "no_precompressed")]
    pub precompressed: bool,
    /// Compress on the fly: a compressible file (text, CSS, JS, JSON, SVG...) of 256 bytes
    /// to 8 MiB with no precompressed variant the client takes is sent in the coding it
    /// prefers (gzip, br or zstd, by Accept-Encoding's weights), compressed once per file and
    /// coding on the blocking pool and kept in a cache of 16 MiB. Off by default, as nginx's
    /// gzip: it spends CPU a precompressed site does not need.
    #[arg(long, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, value_name = "BOOL")]
    pub compress: bool,
    /// List a directory (`GET /docs/`) that has no index file (see --index) instead of
    /// answering 403, as nginx's autoindex: names sorted, directories with a trailing `/`,
    /// dotfiles left out, at most 10000 entries. Off by default: a listing shows what a
    /// site may not mean to advertise.
    #[arg(long, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, value_name = "BOOL")]
    pub autoindex: bool,
    /// The listing's format with --autoindex (without it, this does nothing): html (the
    /// default), or json: an array sorted as the HTML page, each entry
    /// {"name":"a.txt","type":"file","size":123,"mtime":"2026-11-27T00:00:00Z"} (type file,
    /// directory, symlink or other; size for files only; no mtime for symlinks).
    #[arg(long, default_value = "html", value_parser = parse_autoindex_format, value_name = "FORMAT")]
    pub autoindex_format: AutoindexFormat,
    /// A Cache-Control header for matching responses, as PATTERN=VALUE (repeatable; the first
    /// rule that matches wins, none: no header): PATTERN is a path glob when it starts with
    /// `/` or `*` (`*.css`, `/assets/*`: `*` any run of characters, `/` included, `?` one),
    /// matched against the decoded path served (a directory's index file by its own path),
    /// else a content type (`image/*`, `text/html`). On 200, 206 and 304 of files and on
    /// listings; never on errors or redirects. Example: --cache-control
    /// '/assets/*=public, max-age=31536000, immutable'.
    #[arg(long, value_parser = parse_cache_control, value_name = "PATTERN=VALUE")]
    pub cache_control: Vec<CacheControlRule>,
    /// Send `X-Content-Type-Options: nosniff` on every response (off by default).
    #[arg(long, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, value_name = "BOOL")]
    pub security_headers: bool,
    /// Send `Content-Security-Policy: VALUE` on every response (visible ASCII and spaces);
    /// none by default. Example: --content-security-policy "default-src 'self'".
    #[arg(long, value_parser = parse_csp, value_name = "VALUE")]
    pub content_security_policy: Option<String>,
    /// A custom page for 404 or 403, as STATUS=PATH (repeatable): the file PATH under the root
    /// (no `..`, no dotfile) answers with that status and its own Content-Type, as nginx's
    /// error_page. Read once at start (at most 1 MiB): a page that cannot be read then is
    /// said on stderr and the built-in page answers. Example: --error-page 404=/404.html.
    #[arg(long, value_parser = parse_error_page, value_name = "STATUS=PATH")]
    pub error_page: Vec<ErrorPage>,
    /// Which server: hoop, or a baseline of `hoop bench http`: hyper (tokio current-thread,
    /// whole files read per request), hyper-shared / hyper-tokio (hyper in tokio's
    /// multi-thread runtime, one worker per allowed CPU, on hoop::shared sockets / on tokio's
    /// TcpStream), hyper-hoop (the same hyper service on hoop's runtime, one thread per
    /// allowed CPU); the last three hold the files under --root in memory.
    #[arg(long, value_enum, default_value_t = HttpServerKind::Hoop)]
    pub server: HttpServerKind,
    /// Most parts of a range request, as nginx's max_ranges: a `Range` set of more specs is
    /// answered with the whole file; 0 turns ranges off (no Accept-Ranges), 1 allows single
    /// ranges only; two parts or more are sent as multipart/byteranges.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub max_ranges: usize,
}

/// Which server `hoop serve http` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HttpServerKind {
    /// hoop's server.
    Hoop,
    /// The tokio + hyper baseline (benchmarks only).
    Hyper,
    /// hyper on `hoop::shared` sockets in tokio's multi-thread runtime (benchmarks only).
    HyperShared,
    /// The same hyper service on tokio's own `TcpStream` (benchmarks only).
    HyperTokio,
    /// The same hyper service on hoop's own runtime, a thread per allowed CPU (benchmarks only).
    HyperHoop,
}

pub(crate) fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Runs the server until SIGINT or SIGTERM.
pub fn run(args: HttpArgs) -> io::Result<()> {
    let cfg = Config {
        index: args.index.clone(),
        precompressed: !args.no_precompressed,
        compress: args.compress,
        autoindex: args.autoindex,
        cache_control: args.cache_control.clone(),
        security_headers: args.security_headers,
        content_security_policy: args.content_security_policy.clone(),
        error_pages: args.error_page.clone(),
        autoindex_format: args.autoindex_format,
        max_ranges: args.max_ranges,
        tls: (args.tls.files()).map(|(cert, key)| hoop_http::TlsFiles { cert, key }),
        http2: args.tls.http2,
        ..args.common.config()?
    };
    // The library's checks, in the words of the flags.
    cfg.validate().map_err(|e| invalid(flag_words(e)))?;
    if args.server != HttpServerKind::Hoop {
        if args.common.threads != 1 || args.common.driver.is_some() {
            return Err(invalid(
                "the hyper baselines choose their own threads (one, or one tokio worker per \
                 allowed CPU): no --threads or --driver"
                    .into(),
            ));
        }
        let signals = Signals::block()?;
        raise_nofile_limit();
        let dir = args.root.clone();
        use super::hyper_sockets::{self, Net};
        let (name, serve): (&'static str, super::echo::BaselineServe) = match args.server {
            HttpServerKind::HyperShared => (
                "hyper-shared",
                Box::new(move |l| hyper_sockets::run(l, &dir, Net::Shared)),
            ),
            HttpServerKind::HyperTokio => (
                "hyper-tokio",
                Box::new(move |l| hyper_sockets::run(l, &dir, Net::Tokio)),
            ),
            HttpServerKind::HyperHoop => (
                "hyper-hoop",
                Box::new(move |l| hyper_sockets::run(l, &dir, Net::Hoop)),
            ),
            _ => ("hyper", Box::new(move |l| super::hyper_server::run(l, dir))),
        };
        return super::echo::run_baseline(
            (&args.common.addr, args.common.backlog.backlog),
            name,
            serve,
            &signals,
        );
    }
    // `access_log`: the library's built-in logger prints the `--access-log` lines.
    let builder = args
        .common
        .logged(Server::builder(&args.root).config(cfg))?;
    let server = builder.build()?;
    args.common.serve("http", server)
}

/// `--index NAME`: one file name inside the directory (no `/`, no NUL, not `.`-first, which the
/// server would refuse to serve anyway): [`hoop_http::config::check_index`].
fn parse_index(s: &str) -> Result<String, String> {
    hoop_http::config::check_index(s).map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

/// `--content-security-policy VALUE`: visible ASCII and spaces
/// ([`hoop_http::config::check_content_security_policy`]).
fn parse_csp(s: &str) -> Result<String, String> {
    hoop_http::config::check_content_security_policy(s).map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

/// `--cache-control PATTERN=VALUE`: [`CacheControlRule::parse`].
fn parse_cache_control(s: &str) -> Result<CacheControlRule, String> {
    CacheControlRule::parse(s).map_err(|e| e.to_string())
}

/// `--error-page STATUS=PATH`: [`ErrorPage::parse`].
fn parse_error_page(s: &str) -> Result<ErrorPage, String> {
    ErrorPage::parse(s).map_err(|e| e.to_string())
}

/// `--access-log-format hoop|combined|json`.
fn parse_access_log_format(s: &str) -> Result<AccessLogFormat, String> {
    s.parse()
}

/// `--autoindex-format html|json`.
fn parse_autoindex_format(s: &str) -> Result<AutoindexFormat, String> {
    s.parse().map_err(|e: ConfigError| e.to_string())
}

/// A configuration error of the library, said with the flag that sets the value.
fn flag_words(e: ConfigError) -> String {
    match e {
        ConfigError::ZeroThreads => format!("--threads must be between 1 and {MAX_THREADS}, not 0"),
        ConfigError::ZeroMaxConns => "--max-conns must be at least 1".into(),
        ConfigError::ZeroHeaderTimeout | ConfigError::ZeroIdleTimeout => {
            "--header-timeout-ms and --idle-timeout-ms must be at least 1".into()
        }
        ConfigError::BadIndex(name) => format!("--index {}", ConfigError::BadIndex(name)),
        ConfigError::BadContentSecurityPolicy(v, reason) => {
            format!("--content-security-policy {v:?}: {reason}")
        }
        e @ ConfigError::BadCacheControl { .. } => format!("--cache-control: {e}"),
        e @ ConfigError::BadErrorPage { .. } => format!("--error-page: {e}"),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    /// Every flag of `hoop serve http`, present and future, is a key of its config file: a
    /// file setting each one the sample can derive a value for passes the checks, and the
    /// merged command line parses with each flag given.
    #[test]
    fn every_flag_is_a_config_key() {
        use clap::parser::ValueSource;
        use clap::CommandFactory;
        use hoop_flags::config_file::{apply_with, sample_file};
        use std::ffi::OsString;

        let root = crate::Cli::command();
        let http = root
            .find_subcommand("serve")
            .and_then(|s| s.find_subcommand("http"))
            .expect("serve http");
        let (file, set) = sample_file(http, &[("root", "/")]).unwrap_or_else(|e| panic!("{e}"));
        assert!(set.len() >= 10, "{file}");
        let argv = ["hoop", "serve", "http", "--config", "f.toml"]
            .map(OsString::from)
            .to_vec();
        let argv = apply_with(crate::Cli::command(), argv, |_| Ok(file.clone()))
            .unwrap_or_else(|e| panic!("{e}\n{file}"));
        let m = crate::Cli::command()
            .try_get_matches_from(&argv)
            .unwrap_or_else(|e| panic!("{e}\n{file}"));
        let m = m
            .subcommand_matches("serve")
            .and_then(|m| m.subcommand_matches("http"))
            .expect("serve http");
        for (id, switch) in set {
            // Of two switches that override each other, the later one stands.
            if !switch {
                assert_eq!(
                    m.value_source(id.as_str()),
                    Some(ValueSource::CommandLine),
                    "{id}"
                );
            }
        }
    }
}
