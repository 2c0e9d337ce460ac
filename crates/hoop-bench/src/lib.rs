//! `hoop bench`: the benchmark suite.
//!
//! * `hoop bench echo --addr IP:PORT -c CONNS -l LEN -t SECS`: the echo load generator against a
//!   running server ([`load::echo`]). Every reply is checked byte for byte; a mismatch, an end
//!   of stream or an error counts as an error, never as a request.
//! * `hoop bench echo` (no `--addr`): hoop on io_uring, hoop on epoll (the same server code on
//!   the other driver), tokio, monoio and compio (the peers' binary, `peers/`) echo servers started side by side as child processes, the server pinned to one core and the client to the other, in alternating
//!   order, each configuration at least twice ([`compare::echo`]).
//! * `hoop bench nop -t THREADS -T SECS -b BATCH -n ENTRIES [--shared [--rings N]]`: batches of
//!   no-ops through hoop and through a raw `io-uring` loop, the machine's ceiling, and with
//!   `--shared` through one `hoop::shared::Rings` from every thread (kbio's table) ([`report::nop`]).
//! * `hoop bench file [--dir DIR] [--size 2G] [--bs 4k] [--qd 32] [--secs 10] [--direct]
//!   [--rw randread|randwrite|randrw] [--engines LIST]`: random I/O on one test file through
//!   sync, a thread pool, linux-aio, hoop's io_uring engines, the peers (monoio, compio,
//!   tokio-uring, glommio, tokio's io_uring files: [`target::peers`]) and fio ([`compare::file`]).
//! * `hoop bench fsread [--dir DIR] [--sizes 64k,1m] [--reads 1000] [--warmup 50] [--secs 5]
//!   [--engines LIST]`: the latency of whole-file reads from one task of a multi-thread tokio
//!   runtime through `hoop::shared::fs::read`, tokio's own io_uring `tokio::fs::read` (the
//!   peers' binary) and `spawn_blocking(std::fs::read)`, every byte checked ([`compare::fsread`]).
//! * `hoop bench http [--url URL] [-c CONNS] [-t SECS] [--close] [--pipeline N] [--verify FILE]`:
//!   the HTTP load generator, or hoop, nginx and tokio+hyper static servers side by side
//!   ([`report::http_command`]).
//! * `hoop bench fanout [-c CONNS] [-t SECS] [-l LEN] [--window W] [--servers LIST] [--rounds R]
//!   [--hog]`: a line chat server's broadcast (every message to every connection), hoop on
//!   io_uring and on epoll and tokio side by side, every delivery verified in order
//!   ([`compare::fanout`]).
//! * `hoop bench cancel [--runtimes LIST] [--scenarios LIST] [--clients N] [--bytes SIZE]
//!   [--datagrams N] [--files N] [--file-bytes SIZE] [--no-peers]`: what an I/O future dropped in
//!   `select!` loses, counted side by side on hoop (io_uring and epoll), tokio and the peers
//!   ([`compare::cancel`]).
//! * `hoop bench idle [--idle N] [-c CONNS] [-l LEN] [-t SECS] [--servers LIST] [--sample N]
//!   [--per-client N]`: idle connections held against each echo server (helper processes
//!   `hoop bench idle-client` hold them) while active ones load it: RSS per idle connection,
//!   active req/s and p99 with and without them ([`compare::idle`]).
//! * `hoop bench count --op nop|read --engine hoop|raw --count N [--batch B] [--file PATH]`: a
//!   fixed amount of work for instruction counts under callgrind ([`load::count`],
//!   `scripts/instructions`).
//! * `hoop bench`: the quick echo matrix (and a 16 KiB cell), the no-op bench, a quick file
//!   run, a quick HTTP run, a short fan-out run, the cancellation counts, a small idle-connection
//!   run, tables, and a report written to `target/hoop-report/` ([`suite`]).
//!
//! With `--json`, every command prints one JSON object per measurement, one per line, on stdout,
//! and its human output goes to stderr.

pub mod compare;
pub mod load;
pub mod machine;
pub mod measure;
pub mod plan;
pub mod record;
pub mod report;
pub mod target;
