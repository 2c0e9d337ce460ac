//! Every limit and timeout of the HTTP server, in one place.

use std::time::Duration;

/// Longest request target (the URI of the request line): longer gets 414.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Largest header block (after the request line): larger gets 431.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Most header fields in one request: more gets 431.
pub const MAX_HEADERS: usize = 100;

/// The server's limits and timeouts (`hoop serve http` flags and fixed values).
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
    /// Chunk size when streaming a file that is not cached (read into memory, then sent).
    pub stream_chunk_bytes: usize,
    /// Responses of pipelined requests are gathered up to this many bytes before one send.
    pub out_batch_bytes: usize,
    /// After SIGINT/SIGTERM, how long responses in flight may take to finish.
    pub shutdown_grace: Duration,
    /// One line per request on stdout (`--access-log`).
    pub access_log: bool,
    /// Runtime threads that serve (each with [`Server::serve`](crate::Server::serve)): the
    /// cache is split evenly between them.
    pub threads: usize,
    /// The file served for a directory target (`/`, `/docs/`) (`--index`): one path segment.
    pub index: String,
    /// Serve a precompressed variant (`a.css.br`, `a.css.gz`: a regular file, not older than
    /// `a.css`) to a client whose `Accept-Encoding` takes it, as nginx's `gzip_static` and
    /// `brotli_static` (`--no-precompressed` turns it off). Only for compressible types
    /// ([`mime::compressible`](crate::mime::compressible)); those answer with
    /// `Vary: Accept-Encoding` whenever this is on.
    pub precompressed: bool,
    /// A directory target (`/docs/`) without its index file gets a listing of the directory
    /// instead of 403 (`--autoindex`).
    pub autoindex: bool,
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
            stream_chunk_bytes: 256 * 1024,
            out_batch_bytes: 64 * 1024,
            shutdown_grace: Duration::from_secs(5),
            access_log: false,
            threads: 1,
            index: "index.html".to_string(),
            precompressed: true,
            autoindex: false,
        }
    }
}

impl Config {
    /// How often each thread looks for connections past their deadline: a quarter of the
    /// shorter timeout, between 10 ms and 1 s.
    pub fn sweep_interval(&self) -> Duration {
        (self.header_timeout.min(self.idle_timeout) / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1))
    }
}
