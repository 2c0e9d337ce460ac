//! `hoop bench cancel`'s comparison: the runtimes, the checked plan, and every scenario on
//! every runtime (hoop's and tokio's in this process, the peers' in `hoop-peer cancel`).

use std::io;
use std::path::PathBuf;

use crate::load::cancel::load::{self, unit_of, Counts, Sizes};
use crate::load::cancel::{hoop, tokio};
use crate::output::Out;
use crate::plan::cancel::{check_bytes, check_count, CancelPlan};
use crate::plan::parse_names;
use crate::record::cancel::CancelResult;

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
    /// The plan of `hoop bench cancel`, checked flag by flag in the order they are listed.
    pub(crate) fn check(a: CancelPlan) -> io::Result<Plan> {
        let scenario_names: Vec<&str> = load::SCENARIOS.iter().map(|(s, _)| *s).collect();
        let mut runtimes = parse_names("--runtimes", "name", a.runtimes, &RUNTIMES)?;
        if a.no_peers {
            runtimes.retain(|r| !PEER_RUNTIMES.contains(&r.as_str()));
            if runtimes.is_empty() {
                return Err(crate::plan::invalid("--no-peers leaves no runtime to run"));
            }
        }
        let sizes = Sizes {
            clients: check_count("--clients", a.clients)?,
            bytes: check_bytes("--bytes", &a.bytes)?,
            datagrams: check_count("--datagrams", a.datagrams)?,
            files: check_count("--files", a.files)?,
            file_bytes: check_bytes("--file-bytes", &a.file_bytes)?,
            dir: a.dir.unwrap_or_else(default_dir),
            streams: check_count("--streams", a.streams)?,
            stream_bytes: check_bytes("--stream-bytes", &a.stream_bytes)?,
        };
        Ok(Plan {
            runtimes,
            scenarios: parse_names("--scenarios", "name", a.scenarios, &scenario_names)?,
            sizes,
        })
    }

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
                    .map(|c| counted(runtime, scenario, c)),
                ("hoop-epoll", _) => {
                    hoop::run(::hoop::DriverKind::Epoll, runtime, scenario, &plan.sizes)
                        .map(|c| counted(runtime, scenario, c))
                }
                ("tokio", _) => {
                    tokio::run(scenario, &plan.sizes).map(|c| counted(runtime, scenario, c))
                }
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
        return Ok(unsupported(
            runtime,
            scenario,
            note.unwrap_or_else(|| format!("{runtime} has no such call")),
        ));
    }
    Ok(counted(
        runtime,
        scenario,
        Counts {
            sent: u64_of(&v, "sent"),
            received: u64_of(&v, "received"),
            note,
        },
    ))
}

/// A runtime's counts in a scenario as its record (made here, where both are known: the
/// record sits below the load that counts).
pub(crate) fn counted(runtime: &str, scenario: &str, c: Counts) -> CancelResult {
    CancelResult {
        bench: "cancel",
        runtime: runtime.into(),
        scenario: scenario.into(),
        supported: true,
        unit: unit_of(scenario),
        sent: Some(c.sent),
        received: Some(c.received),
        lost: Some(c.lost()),
        note: c.note,
    }
}

/// The record of a scenario the runtime has no call for: no counts, and why.
pub(crate) fn unsupported(runtime: &str, scenario: &str, note: String) -> CancelResult {
    CancelResult {
        bench: "cancel",
        runtime: runtime.into(),
        scenario: scenario.into(),
        supported: false,
        unit: unit_of(scenario),
        sent: None,
        received: None,
        lost: None,
        note: Some(note),
    }
}
