//! `hoop bench cancel`: what programs written the tokio way lose when an I/O future is dropped
//! in `select!`, counted side by side on hoop (io_uring and epoll), tokio (the reference) and
//! the peers (monoio, compio, tokio-uring: `hoop-peer cancel`, in the peers' binary of
//! `peers/`, built on demand). Only counts, no speed.
//!
//! Each scenario races the runtime's call against a 50 µs sleep in a biased `select!` loop
//! (the sleep first), so the I/O future is dropped whenever the sleep wins:
//! * `accept`: clients connect one after another, each waiting for one byte the server writes
//!   on every connection it accepted; lost: clients that saw their connection closed, reset
//!   or left unanswered.
//! * `read`: a writer sends a verifiable byte stream over TCP; received: the bytes read in
//!   order before any gap.
//! * `udp_recv_from`, `unix_recv`: numbered datagrams (UDP on 127.0.0.1, a Unix datagram
//!   pair), paced so the receiving queue never overflows; received: distinct numbers seen.
//! * `drop_after_write`: files written with the runtime's write-all, then dropped without
//!   flush or close; the runtime dropped at the end as `main` would; received: the bytes on
//!   disk (each file's verified prefix).
//! * `stream_drop_after_write`: the same with TCP streams the runtime connects, one after
//!   another; received: the bytes a reader thread got from each (its verified prefix).
//!
//! One JSON line per runtime and scenario: `bench: "cancel"`, `runtime`, `scenario`,
//! `supported`, `unit`, `sent`, `received`, `lost` (`sent = received + lost`), `note`. A runtime
//! without the call gets `supported: false`, a `note` saying so, and `sent`, `received` and
//! `lost` null.

use std::io;
use std::path::PathBuf;

use serde::Serialize;

use crate::report::output::Out;

use crate::load::cancel::load::{self, Counts, Sizes};
use crate::load::cancel::{hoop, tokio};

/// Every runtime, in run order.
pub(crate) const RUNTIMES: [&str; 6] = [
    "hoop",
    "hoop-epoll",
    "tokio",
    "monoio",
    "compio",
    "tokio-uring",
];
/// The runtimes that run in `hoop-peer`.
pub(crate) const PEER_RUNTIMES: [&str; 3] = ["monoio", "compio", "tokio-uring"];
/// Most clients, datagrams or files a flag accepts.
const MAX_COUNT: u64 = 10_000_000;
/// Largest `--bytes` and `--file-bytes`: 4 GiB.
const MAX_BYTES: u64 = 4 << 30;

/// The exit codes, as `-h` says them.
const EXIT_CODES: &str = "Exit status: 0 when every scenario of hoop and tokio ran (losses are \
what is measured, not a failure); 1 on bad arguments or when one could not run (the rest is \
printed all the same). A runtime or a peer's scenario that cannot run here (no io_uring, the \
peers' binary cannot be built or fails) is skipped with a line.";

/// Arguments of `hoop bench cancel`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct CancelArgs {
    /// Runtimes, comma-separated (hoop, hoop-epoll, tokio, monoio, compio, tokio-uring; the
    /// last three run in the hoop-peer binary of peers/, built on demand).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub runtimes: Option<Vec<String>>,
    /// Scenarios, comma-separated (accept, read, udp_recv_from, unix_recv, drop_after_write,
    /// stream_drop_after_write).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub scenarios: Option<Vec<String>>,
    /// accept: clients, one after another.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub clients: u64,
    /// read: bytes sent over TCP (k/m/g suffixes).
    #[arg(long, value_name = "SIZE", default_value = "20M")]
    pub bytes: String,
    /// udp_recv_from and unix_recv: numbered datagrams.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub datagrams: u64,
    /// drop_after_write: files.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub files: u64,
    /// drop_after_write: bytes per file (k/m/g suffixes).
    #[arg(long, value_name = "SIZE", default_value = "300000")]
    pub file_bytes: String,
    /// stream_drop_after_write: TCP streams, one after another.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub streams: u64,
    /// stream_drop_after_write: bytes per stream (k/m/g suffixes).
    #[arg(long, value_name = "SIZE", default_value = "300000")]
    pub stream_bytes: String,
    /// drop_after_write: where the files go (a directory per runtime is made inside and
    /// removed after) [default: target/hoop-bench-cancel next to the binary].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Leave out the peers (monoio, compio, tokio-uring), which run in the hoop-peer binary of
    /// peers/, built first.
    #[arg(long)]
    pub no_peers: bool,
}

/// One runtime's count in one scenario: a JSON line.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CancelResult {
    /// Always "cancel".
    pub bench: &'static str,
    /// hoop, hoop-epoll, tokio, monoio, compio, tokio-uring.
    pub runtime: String,
    /// accept, read, udp_recv_from, unix_recv, drop_after_write.
    pub scenario: String,
    /// Whether the runtime has the call (false: the counts are null and `note` says why).
    pub supported: bool,
    /// What `sent`, `received` and `lost` count: connections, bytes or datagrams.
    pub unit: &'static str,
    /// Units sent.
    pub sent: Option<u64>,
    /// Units received.
    pub received: Option<u64>,
    /// `sent - received`.
    pub lost: Option<u64>,
    /// The kinds of losses, an early stop, or why the call is missing.
    pub note: Option<String>,
}

impl CancelResult {
    fn counted(runtime: &str, scenario: &str, c: Counts) -> CancelResult {
        CancelResult {
            bench: "cancel",
            runtime: runtime.into(),
            scenario: scenario.into(),
            supported: true,
            unit: load::unit_of(scenario),
            sent: Some(c.sent),
            received: Some(c.received),
            lost: Some(c.lost()),
            note: c.note,
        }
    }

    fn unsupported(runtime: &str, scenario: &str, note: String) -> CancelResult {
        CancelResult {
            bench: "cancel",
            runtime: runtime.into(),
            scenario: scenario.into(),
            supported: false,
            unit: load::unit_of(scenario),
            sent: None,
            received: None,
            lost: None,
            note: Some(note),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Runtimes, in order.
    pub runtimes: Vec<String>,
    /// Scenarios, in order.
    pub scenarios: Vec<String>,
    /// How much work each scenario does.
    pub sizes: Sizes,
}

impl Plan {
    /// The suite's plan: every scenario at a size of a second or so per runtime.
    pub(crate) fn quick(peers: bool) -> Plan {
        Plan {
            runtimes: RUNTIMES
                .iter()
                .filter(|r| peers || !PEER_RUNTIMES.contains(r))
                .map(|r| r.to_string())
                .collect(),
            scenarios: load::SCENARIOS.iter().map(|(s, _)| s.to_string()).collect(),
            sizes: Sizes {
                clients: 500,
                bytes: 4 << 20,
                datagrams: 5000,
                files: 50,
                file_bytes: 300_000,
                dir: default_dir(),
                streams: 50,
                stream_bytes: 300_000,
            },
        }
    }

    /// A rough guess of the seconds the plan takes (for the progress bar).
    pub(crate) fn planned_secs(&self) -> f64 {
        let s = &self.sizes;
        let per_runtime = s.clients as f64 * 2e-4
            + s.bytes as f64 / 1e9
            + 2.0 * s.datagrams as f64 * 5e-5
            + (s.files * s.file_bytes + s.streams * s.stream_bytes) as f64 / 5e8;
        per_runtime * self.runtimes.len() as f64
    }

    /// One line saying what the plan does.
    pub(crate) fn describe(&self) -> String {
        let s = &self.sizes;
        format!(
            "accept: {} clients; read: {} bytes over TCP; udp_recv_from, unix_recv: {} datagrams \
             each; drop_after_write: {} files of {} bytes; stream_drop_after_write: {} TCP \
             streams of {} bytes",
            s.clients, s.bytes, s.datagrams, s.files, s.file_bytes, s.streams, s.stream_bytes
        )
    }
}

/// Where the files go by default.
pub(crate) fn default_dir() -> PathBuf {
    crate::machine::target_dir().join("hoop-bench-cancel")
}

/// What a plan produced.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Every line, supported or not.
    pub results: Vec<CancelResult>,
    /// Runtimes skipped here, with why.
    pub skipped: Vec<String>,
    /// Scenarios that could not run, with why.
    pub failures: Vec<String>,
}

/// Runs `hoop bench cancel`.
pub fn run_cancel_command(a: CancelArgs, json: bool) -> io::Result<()> {
    let scenario_names: Vec<&str> = load::SCENARIOS.iter().map(|(s, _)| *s).collect();
    let mut runtimes = pick("--runtimes", a.runtimes, &RUNTIMES)?;
    if a.no_peers {
        runtimes.retain(|r| !PEER_RUNTIMES.contains(&r.as_str()));
        if runtimes.is_empty() {
            return Err(crate::plan::invalid("--no-peers leaves no runtime to run"));
        }
    }
    let sizes = Sizes {
        clients: count("--clients", a.clients)?,
        bytes: bytes("--bytes", &a.bytes)?,
        datagrams: count("--datagrams", a.datagrams)?,
        files: count("--files", a.files)?,
        file_bytes: bytes("--file-bytes", &a.file_bytes)?,
        dir: a.dir.unwrap_or_else(default_dir),
        streams: count("--streams", a.streams)?,
        stream_bytes: bytes("--stream-bytes", &a.stream_bytes)?,
    };
    let plan = Plan {
        runtimes,
        scenarios: pick("--scenarios", a.scenarios, &scenario_names)?,
        sizes,
    };
    let out = Out::new(json, plan.planned_secs());
    out.note(&format!("hoop bench cancel: {}", plan.describe()));
    let o = run_plan(&plan, &out);
    out.finish();
    out.human(&format!("## Cancellation in select!\n\n{}", table(&o)));
    if !o.failures.is_empty() {
        return Err(io::Error::other(format!(
            "{} scenario(s) could not run: {}",
            o.failures.len(),
            o.failures.join("; ")
        )));
    }
    Ok(())
}

/// Checks a list against `known` (case and spaces ignored, repeats dropped, in the order
/// given); `None`: every known name.
fn pick(flag: &str, list: Option<Vec<String>>, known: &[&str]) -> io::Result<Vec<String>> {
    let list = list.unwrap_or_else(|| known.iter().map(|s| s.to_string()).collect());
    let mut out: Vec<String> = Vec::new();
    for s in list {
        let s = s.trim().to_ascii_lowercase();
        if !known.contains(&s.as_str()) {
            return Err(crate::plan::invalid(format!(
                "unknown name {s:?} in {flag} (known: {})",
                known.join(", ")
            )));
        }
        if !out.contains(&s) {
            out.push(s);
        }
    }
    if out.is_empty() {
        return Err(crate::plan::invalid(format!(
            "{flag} needs at least one name"
        )));
    }
    Ok(out)
}

fn count(flag: &str, n: u64) -> io::Result<u64> {
    if n == 0 || n > MAX_COUNT {
        return Err(crate::plan::invalid(format!(
            "{flag} must be in 1..={MAX_COUNT} (got {n})"
        )));
    }
    Ok(n)
}

fn bytes(flag: &str, s: &str) -> io::Result<u64> {
    let n = crate::file::parse_size(flag, s)?;
    if n == 0 || n > MAX_BYTES {
        return Err(crate::plan::invalid(format!(
            "{flag} must be 1 byte to 4 GiB (got {s})"
        )));
    }
    Ok(n)
}

/// Runs every scenario of the plan on every runtime, printing a JSON line per result.
pub(crate) fn run_plan(plan: &Plan, out: &Out) -> Outcome {
    let mut o = Outcome::default();
    let per_run = plan.planned_secs() / (plan.runtimes.len() * plan.scenarios.len()).max(1) as f64;
    for runtime in &plan.runtimes {
        let peer_bin = if PEER_RUNTIMES.contains(&runtime.as_str()) {
            match crate::target::peers::binary(out) {
                Ok(b) => Some(b),
                Err(why) => {
                    skip(&mut o, out, runtime, &why, plan, per_run);
                    continue;
                }
            }
        } else {
            None
        };
        if runtime == "hoop" {
            if let Err(why) = uring_available() {
                skip(&mut o, out, runtime, &why, plan, per_run);
                continue;
            }
        }
        for scenario in &plan.scenarios {
            out.start(&format!("cancel {runtime}: {scenario}"), per_run);
            let r = match (runtime.as_str(), &peer_bin) {
                ("hoop", _) => hoop::run(::hoop::DriverKind::Uring, runtime, scenario, &plan.sizes)
                    .map(|c| CancelResult::counted(runtime, scenario, c)),
                ("hoop-epoll", _) => {
                    hoop::run(::hoop::DriverKind::Epoll, runtime, scenario, &plan.sizes)
                        .map(|c| CancelResult::counted(runtime, scenario, c))
                }
                ("tokio", _) => tokio::run(scenario, &plan.sizes)
                    .map(|c| CancelResult::counted(runtime, scenario, c)),
                (_, Some(bin)) => run_peer(bin, runtime, scenario, &plan.sizes),
                _ => Err("no such runtime".into()),
            };
            out.done(per_run);
            match r {
                Ok(r) => {
                    if r.lost.unwrap_or(0) > 0 {
                        out.note(&format!(
                            "cancel {runtime}: {scenario}: lost {} of {} {}",
                            r.lost.unwrap_or(0),
                            r.sent.unwrap_or(0),
                            r.unit
                        ));
                    }
                    out.measurement(&r);
                    o.results.push(r);
                }
                // A peer that cannot do the job here is skipped with the reason, as in the
                // other benches; hoop and tokio failing is the run's failure.
                Err(why) if peer_bin.is_some() => {
                    let what = format!("{runtime}: {scenario}: skipped: {why}");
                    out.note(&format!("cancel: {what}"));
                    o.skipped.push(what);
                }
                Err(why) => {
                    let what = format!("{runtime}: {scenario}: {why}");
                    out.note(&format!("warning: cancel {what}"));
                    o.failures.push(what);
                }
            }
        }
    }
    o
}

fn skip(o: &mut Outcome, out: &Out, runtime: &str, why: &str, plan: &Plan, per_run: f64) {
    out.note(&format!("cancel: {runtime}: skipped: {why}"));
    out.done(per_run * plan.scenarios.len() as f64);
    o.skipped.push(format!("{runtime}: skipped: {why}"));
}

/// Why hoop's io_uring driver cannot run here, if it cannot.
fn uring_available() -> Result<(), String> {
    match ::hoop::Runtime::builder()
        .driver(::hoop::DriverKind::Uring)
        .build()
    {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::Unsupported | io::ErrorKind::PermissionDenied
            ) =>
        {
            Err(format!("io_uring is not available here ({e})"))
        }
        // Anything else shows in the scenarios' own errors.
        Err(_) => Ok(()),
    }
}

/// One scenario in `hoop-peer cancel`.
fn run_peer(
    bin: &std::path::Path,
    runtime: &str,
    scenario: &str,
    s: &Sizes,
) -> Result<CancelResult, String> {
    use crate::target::peers::{run_json, str_of, u64_of};
    let args: Vec<String> = [
        "cancel".to_string(),
        "--runtime".into(),
        runtime.into(),
        "--scenario".into(),
        scenario.into(),
        "--clients".into(),
        s.clients.to_string(),
        "--bytes".into(),
        s.bytes.to_string(),
        "--datagrams".into(),
        s.datagrams.to_string(),
        "--files".into(),
        s.files.to_string(),
        "--file-bytes".into(),
        s.file_bytes.to_string(),
        "--streams".into(),
        s.streams.to_string(),
        "--stream-bytes".into(),
        s.stream_bytes.to_string(),
        "--dir".into(),
        s.dir.display().to_string(),
    ]
    .to_vec();
    let v = run_json(bin, &args, load::BUDGET.as_secs_f64())?;
    let note = str_of(&v, "note");
    if v.get("supported").and_then(serde_json::Value::as_bool) == Some(false) {
        return Ok(CancelResult::unsupported(
            runtime,
            scenario,
            note.unwrap_or_else(|| format!("{runtime} has no such call")),
        ));
    }
    Ok(CancelResult::counted(
        runtime,
        scenario,
        Counts {
            sent: u64_of(&v, "sent"),
            received: u64_of(&v, "received"),
            note,
        },
    ))
}

/// The table: runtime | scenario | sent | received | lost | note, then the skipped runtimes
/// and the failed scenarios.
pub(crate) fn table(o: &Outcome) -> String {
    let mut s = String::from(
        "| runtime | scenario | sent | received | lost | unit | note |\n|---|---|---:|---:|---:|---|---|\n",
    );
    let num = |v: Option<u64>| v.map_or("-".to_string(), |n| n.to_string());
    for r in &o.results {
        let note = if r.supported {
            r.note.clone().unwrap_or_default()
        } else {
            format!("not supported: {}", r.note.as_deref().unwrap_or(""))
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.runtime,
            r.scenario,
            num(r.sent),
            num(r.received),
            num(r.lost),
            r.unit,
            note.replace('|', "/")
        ));
    }
    for k in &o.skipped {
        s.push_str(&format!("- {k}\n"));
    }
    for f in &o.failures {
        s.push_str(&format!("- failed: {f}\n"));
    }
    s
}

/// The report's section.
pub(crate) fn section(plan: &Plan, o: &Outcome) -> String {
    format!(
        "## Cancellation in select!\n\n\
         What programs written the tokio way lose when an I/O future is dropped: every call is \
         raced against a 50 µs sleep in a biased `select!` loop (the sleep first), so the I/O \
         future is dropped whenever the sleep wins; the load runs on std threads in the same \
         process and counts what arrived (`hoop bench cancel`; tokio is the reference, the \
         peers run in `hoop-peer cancel`). accept: each client waits for one byte the server \
         writes on every connection it accepted; read: bytes read in order before any gap; \
         udp_recv_from, unix_recv: distinct numbered datagrams, paced so the socket never \
         overflows; drop_after_write: bytes on disk after each file was written with the \
         runtime's write-all and dropped unflushed, and the runtime dropped; \
         stream_drop_after_write: the same with TCP streams, bytes their reader got. {}. Only \
         counts, no speed.\n\n{}\n",
        plan.describe(),
        table(o)
    )
}
