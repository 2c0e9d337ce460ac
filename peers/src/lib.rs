//! `hoop-peer` (and `hoop-peer-glommio`, the same with glommio): hoop's peers on the same work as hoop, each on its own runtime, for `hoop bench`
//! to run as a child process (a separate cargo project, so that hoop's own build and tests never
//! compile them).
//!
//! ```text
//! hoop-peer file --engine E --path P --size BYTES [--bs 4096] [--qd 32] [--secs S] [--direct] [--cpu N] [--workers N]
//! hoop-peer fsread --engine tokio-io-uring --path P --size BYTES [--reads 200] [--warmup 20] [--secs S] [--workers N]
//! hoop-peer nop  --engine E [--secs S] [--batch 32] [--entries 128] [--cpu N]
//! hoop-peer echo --engine compio [--addr 127.0.0.1:0]
//! hoop-peer arena-actix [--addr 127.0.0.1:0] [--workers N] [--dataset FILE]
//! hoop-peer cancel --runtime monoio|compio|tokio-uring --scenario S [--clients N] [--bytes N] [--datagrams N] [--files N] [--file-bytes N] [--dir D]
//! hoop-peer engines
//! ```
//!
//! `file`: QD tasks on ONE thread of the engine's runtime (pinned to `--cpu`), each looping one
//! random block at a time until `--secs` are up (what is in flight then is drained); every read
//! is checked as hoop's engines check theirs (`pattern.rs`, the same file): the full block came
//! back and every 512-byte sector carries its own offset. One JSON line on stdout.
//! File engines: `monoio`, `compio`, `tokio-uring`, `glommio`, `tokio-io-uring` (tokio's own
//! io_uring file support: buffered only; with `--workers N` on a multi-thread runtime of N
//! unpinned workers instead of one thread).
//!
//! `fsread`: whole-file reads (`tokio::fs::read` on tokio's io_uring), one after another from
//! one task after a warm-up, every byte checked; latency per read. One JSON line.
//!
//! `nop`: BATCH no-ops awaited together, until `--secs` are up; batch latency. One JSON line.
//! No-op engines: `compio` (an `IORING_OP_NOP` defined through compio's public `OpCode` trait:
//! compio has no no-op of its own), `tokio-uring` (`tokio_uring::no_op`). monoio has none: its
//! operation trait is crate-private.
//!
//! `echo`: compio's TCP echo server, the same work as hoop's baselines (64 KiB owned buffer, read
//! then write all back, `TCP_NODELAY`); prints `listening on IP:PORT`; runs until killed.
//!
//! `arena-actix`: HttpArena's endpoints (`/baseline11`, `/pipeline`, `/json/{count}`,
//! `/upload`) on actix-web with N workers, the contracts of hoop-arena's axum Router (see
//! `arena.rs`); prints `listening on IP:PORT`; runs until killed.
//!
//! `cancel`: one scenario of `hoop bench cancel` (accept, read, udp_recv_from, unix_recv,
//! drop_after_write) on the runtime, each I/O future raced against a 50 µs sleep and dropped
//! when the sleep wins; what was sent, received and lost. One JSON line (see `cancel.rs`).
//!
//! Exit status: 0 with the JSON line; 1 with one line on stderr (bad arguments, or the engine
//! cannot run here: the line says why).

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// The content every read is checked against: the very file hoop's engines use.
#[allow(dead_code)]
#[path = "../../crates/hoop-bench/src/load/file/content/pattern.rs"]
mod pattern;

mod arena;
mod buf;
mod cancel;
mod echo;
mod file;
mod fsread;
mod nop;

/// hoop-bench's files the peers share, std and libc only, at the module paths they have in
/// hoop-bench, so that their `crate::` paths resolve here too: the load and counting of
/// `hoop bench cancel`, and the open-file limit they raise.
#[path = "../../crates/hoop-bench/src/load"]
mod load {
    pub(crate) mod cancel {
        #[allow(dead_code)]
        pub(crate) mod dgram;
        #[allow(dead_code)]
        pub(crate) mod load;
        #[allow(dead_code)]
        pub(crate) mod sink;
    }
}
#[path = "../../crates/hoop-bench/src/machine"]
mod machine {
    #[allow(dead_code)]
    mod nofile;
    pub(crate) use nofile::raise_nofile_limit;
}

/// hoop-arena's dataset (dataset.json, or the built-in 50 items) and `/json`'s serialization,
/// the very files (std, serde and serde_json only), so that the actix server answers what the
/// axum Router answers without depending on the workspace's crates.
#[path = "../../crates/hoop-arena/src/dataset.rs"]
mod dataset;
#[path = "../../crates/hoop-arena/src/json.rs"]
mod json;
#[path = "../../crates/hoop-arena/src/query.rs"]
mod query;

use pattern::Picker;

/// The file engines.
pub(crate) const FILE_ENGINES: [&str; 5] = [
    "monoio",
    "compio",
    "tokio-uring",
    "glommio",
    "tokio-io-uring",
];
/// The no-op engines.
pub(crate) const NOP_ENGINES: [&str; 2] = ["compio", "tokio-uring"];
/// The echo servers.
pub(crate) const ECHO_ENGINES: [&str; 1] = ["compio"];

/// The commands.
const KNOWN: [&str; 7] = [
    "file",
    "fsread",
    "nop",
    "echo",
    "arena-actix",
    "cancel",
    "engines",
];

/// The program: `hoop-peer` and `hoop-peer-glommio` (the same with feature `glommio`).
pub fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("hoop-peer: {e}");
        std::process::exit(1);
    }
}

fn run(args: &[String]) -> io::Result<()> {
    let (cmd, rest) = args.split_first().ok_or_else(|| {
        invalid("usage: hoop-peer file|fsread|nop|echo|arena-actix|cancel|engines [flags]")
    })?;
    let flags = Flags::parse(rest)?;
    // `COMMAND --help` says what the command is and runs nothing (hoop bench asks it to
    // find out whether this binary has the command).
    if flags.has("help") {
        return match KNOWN.contains(&cmd.as_str()) {
            true => {
                println!("hoop-peer {cmd}: see the module documentation of hoop-peers");
                Ok(())
            }
            false => Err(invalid(format!("unknown command {cmd:?}"))),
        };
    }
    match cmd.as_str() {
        "file" => file::run(&flags),
        "fsread" => fsread::run(&flags),
        "nop" => nop::run(&flags),
        "echo" => echo::run(&flags),
        "arena-actix" => arena::run(&flags),
        "cancel" => cancel::run(&flags),
        "engines" => {
            println!(
                "file: {}\nfsread: {}\nnop: {}\necho: {}\ncancel: {}",
                FILE_ENGINES.join(", "),
                fsread::FSREAD_ENGINES.join(", "),
                NOP_ENGINES.join(", "),
                ECHO_ENGINES.join(", "),
                cancel::CANCEL_RUNTIMES.join(", ")
            );
            Ok(())
        }
        other => Err(invalid(format!(
            "unknown command {other:?} (file, fsread, nop, echo, arena-actix, cancel, engines)"
        ))),
    }
}

/// An invalid-input error.
pub(crate) fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

/// `--name value` pairs and `--switch`es.
pub(crate) struct Flags(Vec<(String, Option<String>)>);

impl Flags {
    fn parse(args: &[String]) -> io::Result<Flags> {
        let mut v = Vec::new();
        let mut it = args.iter().peekable();
        while let Some(a) = it.next() {
            let name = a
                .strip_prefix("--")
                .ok_or_else(|| invalid(format!("unexpected argument {a:?}")))?;
            let value = match it.peek() {
                Some(next) if !next.starts_with("--") => it.next().cloned(),
                _ => None,
            };
            v.push((name.to_string(), value));
        }
        Ok(Flags(v))
    }

    /// Whether `--name` was given.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| n == name)
    }

    /// The value of `--name`, if given.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// The value of `--name` parsed, or `default`.
    pub(crate) fn num<T: std::str::FromStr>(&self, name: &str, default: T) -> io::Result<T> {
        match self.get(name) {
            None => Ok(default),
            Some(s) => s
                .parse()
                .map_err(|_| invalid(format!("--{name}: {s:?} is not a number"))),
        }
    }

    /// `--engine`, which must be one of `known`.
    pub(crate) fn engine(&self, known: &[&str]) -> io::Result<String> {
        let e = self
            .get("engine")
            .ok_or_else(|| invalid(format!("--engine is required ({})", known.join(", "))))?;
        if !known.contains(&e) {
            return Err(invalid(format!(
                "unknown engine {e:?} (known: {})",
                known.join(", ")
            )));
        }
        Ok(e.to_string())
    }
}

/// `--workers N` (at least 1), if given: the workers of a multi-thread tokio runtime.
pub(crate) fn workers_flag(f: &Flags) -> io::Result<Option<usize>> {
    match f.get("workers") {
        None if f.has("workers") => Err(invalid("--workers needs a number")),
        None => Ok(None),
        Some(s) => match s.parse::<usize>() {
            Ok(n) if (1..=1024).contains(&n) => Ok(Some(n)),
            _ => Err(invalid(format!(
                "--workers: {s:?} is not a number in 1..=1024"
            ))),
        },
    }
}

/// Pins the calling thread to `cpu`.
pub(crate) fn pin_to(cpu: usize) -> io::Result<()> {
    set_affinity(&[cpu])
}

/// Sets the calling thread's CPU mask to `cpus`.
pub(crate) fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(invalid(format!("CPU {cpu} is out of range")));
        }
        // SAFETY: `cpu` is below CPU_SETSIZE, so CPU_SET writes inside the set.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: sched_setaffinity reads one cpu_set_t from a valid pointer.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs the calling thread may run on.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain old data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes one cpu_set_t into a valid pointer.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Resource usage of the process (every thread, io_uring's workers included).
#[derive(Clone, Copy, Default)]
pub(crate) struct Usage {
    pub user: f64,
    pub sys: f64,
    pub vol: u64,
    pub invol: u64,
}

impl Usage {
    pub(crate) fn now() -> Usage {
        // SAFETY: rusage is plain old data; all-zero is valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes one rusage into the valid pointer.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
            return Usage::default();
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Usage {
            user: tv(ru.ru_utime),
            sys: tv(ru.ru_stime),
            vol: ru.ru_nvcsw.max(0) as u64,
            invol: ru.ru_nivcsw.max(0) as u64,
        }
    }

    pub(crate) fn since(&self, e: &Usage) -> Usage {
        Usage {
            user: (self.user - e.user).max(0.0),
            sys: (self.sys - e.sys).max(0.0),
            vol: self.vol.saturating_sub(e.vol),
            invol: self.invol.saturating_sub(e.invol),
        }
    }
}

/// A latency histogram in nanoseconds, 3 significant digits (as hoop's).
pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds are valid")
}

/// Records `d`.
pub(crate) fn record(h: &mut Histogram<u64>, d: Duration) {
    let v = u64::try_from(d.as_nanos())
        .unwrap_or(u64::MAX)
        .clamp(1, 60_000_000_000);
    h.saturating_record(v);
}

/// `"name":value` for a quantile in µs, null when empty.
pub(crate) fn q_us(h: &Histogram<u64>, q: f64) -> String {
    if h.is_empty() {
        "null".into()
    } else {
        format!("{:.3}", h.value_at_quantile(q) as f64 / 1000.0)
    }
}

/// A JSON string literal.
pub(crate) fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// What one file task counted.
pub(crate) struct Tally {
    pub reads: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub hist: Histogram<u64>,
    /// The task's I/O time, summed (for the mean depth by Little's law, done by hoop).
    pub busy: Duration,
}

impl Tally {
    pub(crate) fn new() -> Tally {
        Tally {
            reads: 0,
            errors: 0,
            first_error: None,
            hist: histogram(),
            busy: Duration::ZERO,
        }
    }

    /// Counts one read of `bs` at `off` that returned `res`, checked by `verified`.
    pub(crate) fn complete(
        &mut self,
        res: io::Result<usize>,
        bs: usize,
        off: u64,
        verified: impl FnOnce() -> bool,
        lat: Duration,
    ) {
        match res {
            Ok(n) if n == bs => {
                if verified() {
                    self.reads += 1;
                    record(&mut self.hist, lat);
                    self.busy += lat;
                } else {
                    self.error(format!(
                        "read at byte {off}: wrong content (a sector's offset stamp differs)"
                    ));
                }
            }
            Ok(n) => self.error(format!("short read at byte {off}: {n} of {bs} bytes")),
            Err(e) => self.error(format!("read at byte {off}: {e}")),
        }
    }

    pub(crate) fn error(&mut self, msg: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(msg);
        }
    }

    pub(crate) fn absorb(&mut self, o: Tally) {
        self.reads += o.reads;
        self.errors += o.errors;
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
        self.busy += o.busy;
        let _ = self.hist.add(&o.hist);
    }
}

/// A task's block buffer as the loop sees it.
pub(crate) trait Block {
    /// Every byte the last read could have filled (the block).
    fn full(&self) -> &[u8];
    /// Marks it as not read yet, and empties it, before a read.
    fn reset(&mut self);
}

/// The loop of one file task: until `deadline`, one random block at a time through `read`,
/// which gets the buffer and the offset and gives the buffer back with the result.
pub(crate) async fn read_loop<B, F, Fut>(
    mut read: F,
    mut buf: B,
    bs: usize,
    mut picker: Picker,
    deadline: Instant,
) -> Tally
where
    B: Block,
    F: FnMut(B, u64) -> Fut,
    Fut: Future<Output = (io::Result<usize>, B)>,
{
    let mut t = Tally::new();
    while Instant::now() < deadline {
        let (off, _) = picker.next();
        buf.reset();
        let t0 = Instant::now();
        let (res, back) = read(buf, off).await;
        let lat = t0.elapsed();
        buf = back;
        t.complete(res, bs, off, || pattern::verify(buf.full(), off), lat);
    }
    t
}

/// The batch loop of the no-op engines: until `deadline`, BATCH futures from `make` polled in
/// place together until every one completed (hoop's own batch loop, no task per future).
pub(crate) async fn batch_loop<F: Future<Output = io::Result<()>>>(
    batch: usize,
    deadline: Instant,
    mut make: impl FnMut() -> F,
) -> (u64, u64, u64, Histogram<u64>) {
    let mut hist = histogram();
    let (mut nops, mut errors, mut batches) = (0u64, 0u64, 0u64);
    let mut ops: Vec<Option<F>> = Vec::with_capacity(batch);
    while Instant::now() < deadline {
        let t0 = Instant::now();
        ops.clear();
        ops.extend((0..batch).map(|_| Some(make())));
        let mut left = batch;
        poll_fn(|cx| {
            for slot in ops.iter_mut() {
                if let Some(op) = slot {
                    // SAFETY: `ops` got its capacity before the batch and is neither grown nor
                    // moved until every future in it completed: each stays where it was first
                    // polled, and is dropped in place (`*slot = None`).
                    let op = unsafe { Pin::new_unchecked(op) };
                    if let Poll::Ready(r) = op.poll(cx) {
                        match r {
                            Ok(()) => nops += 1,
                            Err(_) => errors += 1,
                        }
                        *slot = None;
                        left -= 1;
                    }
                }
            }
            if left == 0 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        record(&mut hist, t0.elapsed());
        batches += 1;
    }
    (nops, errors, batches, hist)
}
