//! The profile runs of `hoop bench http --profile`: per profile and thread count, its servers
//! started (one thread pinned to the first CPU: the target rows; two threads unpinned: no
//! target), every connection count run `rounds` times with the servers in alternating order by
//! the client pinned to the second CPU, every answer verified.

use std::io;
use std::time::Duration;

use crate::load::http::arena::client::{run_arena, ArenaLoad};
use crate::load::http::arena::requests::{upload_body, Shape};
use crate::load::http::client::{run_client, HttpClientConfig, HttpOutcome};
use crate::measure::usage::{ServerMetrics, ServerProbe};
use crate::output::Out;
use crate::plan::arena::{label, ArenaPlan, Profile, RUN_OVERHEAD_SECS};
use crate::plan::http::mix_mean_bytes;
use crate::record::arena::{ArenaResult, RunInfo};
use crate::target::arena::{make_files, start, ArenaFiles, Started};
use crate::target::child::ServerChild;

/// What the profile runs produced.
#[derive(Debug, Default)]
pub(crate) struct ArenaOutcome {
    /// Every measurement.
    pub results: Vec<ArenaResult>,
    /// Runs that could not be measured, with why.
    pub failures: Vec<String>,
    /// Lines for the tables (servers skipped, the fd limit, no gzip).
    pub notes: Vec<String>,
}

impl ArenaOutcome {
    /// The exit status: an error if a run failed, counted errors or verified nothing, or if
    /// nothing was measured at all.
    pub(crate) fn status(&self) -> io::Result<()> {
        let bad: Vec<&ArenaResult> = self
            .results
            .iter()
            .filter(|r| r.errors > 0 || r.requests == 0)
            .collect();
        if self.results.is_empty() || !self.failures.is_empty() || !bad.is_empty() {
            return Err(io::Error::other(format!(
                "{} profile run(s) measured, {} failed, {} counted errors or verified no \
                 request{}{}",
                self.results.len(),
                self.failures.len(),
                bad.len(),
                self.failures
                    .first()
                    .map_or(String::new(), |f| format!("; first failure: {f}")),
                bad.first().map_or(String::new(), |r| format!(
                    "; first bad run: {} {} c={}: {}",
                    r.profile,
                    r.server,
                    r.conns,
                    r.first_error.as_deref().unwrap_or("nothing verified")
                )),
            )));
        }
        Ok(())
    }
}

/// The line saying where the servers and the client run.
pub(crate) fn pinning_note(plan: &ArenaPlan) -> String {
    let (server_cpu, client_cpu) = crate::machine::pin_plan();
    let cpus = crate::machine::allowed_cpus()
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let client = client_cpu.map_or("the client unpinned".to_string(), |c| {
        format!("the client pinned to CPU {c}")
    });
    let mut parts = Vec::new();
    if plan.threads.contains(&1) {
        parts.push(match server_cpu {
            Some(c) => format!("1-thread rows (the targets): each server pinned to CPU {c}"),
            None => "1-thread rows: servers unpinned (fewer than two CPUs)".to_string(),
        });
    }
    if plan.threads.iter().any(|&t| t > 1) {
        parts.push(format!(
            "2-thread rows (no target): servers unpinned on CPUs {cpus}, shared with the client"
        ));
    }
    format!(
        "machine: {}, CPUs allowed: {cpus}; kernel {}\npinning: {}; {client}",
        crate::machine::cpu_model(),
        crate::machine::kernel(),
        parts.join("; ")
    )
}

/// Runs the plan: per profile and thread count, the servers started, then each connection
/// count `rounds` times (servers in order on even rounds, in reverse on odd ones).
pub(crate) fn run_profiles(plan: &ArenaPlan, out: &Out) -> ArenaOutcome {
    let mut o = ArenaOutcome::default();
    let (server_cpu, client_cpu) = crate::machine::pin_plan();
    let files = match make_files(&plan.dir) {
        Ok(f) => f,
        Err(e) => {
            o.failures.push(format!(
                "cannot write the dataset and static files under {}: {e}",
                plan.dir.display()
            ));
            return o;
        }
    };
    o.notes.extend(files.notes.iter().cloned());
    // Client and server each need one fd per connection (and a few more).
    let limit = crate::machine::nofile_limit();
    let fits = |c: usize| (c as u64) + 64 <= limit;
    for &p in &plan.profiles {
        let servers = plan.servers_of(p);
        if servers.is_empty() {
            o.notes
                .push(format!("{}: none of --servers serves it", p.name()));
            continue;
        }
        let conns: Vec<usize> = plan.conns_of(p).into_iter().filter(|&c| fits(c)).collect();
        if conns.len() < plan.conns_of(p).len() {
            o.notes.push(format!(
                "{}: the open-file limit is {limit}: runs of more than {} connections skipped \
                 (raise it with `ulimit -Hn`)",
                p.name(),
                limit.saturating_sub(64)
            ));
        }
        for &threads in &plan.threads {
            let cpu = if threads == 1 { server_cpu } else { None };
            let mut running: Vec<(String, ServerChild)> = Vec::new();
            for name in &servers {
                match start(name, p, threads, cpu, &files, &plan.dir, out) {
                    Ok(Started::Running(c)) => running.push((name.clone(), c)),
                    Ok(Started::Skipped(line)) => {
                        if !o.notes.contains(&line) {
                            out.note(&line);
                            o.notes.push(line);
                        }
                    }
                    Err(e) => {
                        let what = format!("{} {name} ({threads} thread(s))", p.name());
                        out.note(&format!("warning: {what}: {e}"));
                        o.failures.push(format!("{what}: {e}"));
                    }
                }
            }
            for &c in &conns {
                for round in 0..plan.rounds {
                    let mut order: Vec<usize> = (0..running.len()).collect();
                    if round % 2 == 1 {
                        order.reverse();
                    }
                    for i in order {
                        let (name, child) = &mut running[i];
                        let what = format!(
                            "{} {}: c={c}, {threads} thread(s), round {}",
                            p.name(),
                            label(name),
                            round + 1
                        );
                        out.start(&what, plan.secs + RUN_OVERHEAD_SECS);
                        let run = Run {
                            p,
                            name,
                            conns: c,
                            threads,
                            round,
                            secs: plan.secs,
                            client_cpu,
                            pinned: threads == 1 && server_cpu.is_some() && client_cpu.is_some(),
                        };
                        let result = run_one(&run, child, &files);
                        out.done(plan.secs + RUN_OVERHEAD_SECS);
                        match result {
                            Ok(r) => {
                                out.measurement(&r);
                                out.warn_run(
                                    &what,
                                    r.requests,
                                    "request",
                                    r.errors,
                                    r.first_error.as_deref(),
                                );
                                o.results.push(r);
                            }
                            Err(e) => {
                                out.note(&format!("warning: {what}: {e}"));
                                o.failures.push(format!("{what}: {e}"));
                            }
                        }
                    }
                }
            }
        }
    }
    o
}

/// One run's settings.
struct Run<'a> {
    p: Profile,
    name: &'a str,
    conns: usize,
    threads: usize,
    round: u32,
    secs: f64,
    client_cpu: Option<usize>,
    pinned: bool,
}

/// One run against a started server: the profile's load, the server's usage over the window.
fn run_one(run: &Run<'_>, child: &mut ServerChild, files: &ArenaFiles) -> io::Result<ArenaResult> {
    let secs = Duration::from_secs_f64(run.secs);
    let pid = child.pid();
    let mut probe = None;
    let on_start = || probe = Some(ServerProbe::start(pid, secs));
    let outcome: HttpOutcome = match run.p {
        Profile::Static => {
            let cfg = HttpClientConfig {
                addr: child.addr,
                host: child.addr.to_string(),
                path: "/static/".into(),
                conns: run.conns,
                secs,
                close: false,
                pipeline: 1,
                file_bytes: mix_mean_bytes(),
                verify: None,
                mix: Some(files.mix.clone()),
            };
            run_client(&cfg, run.client_cpu, on_start)?
        }
        p => {
            let shape = match p {
                Profile::Pipelined => Shape::Pipelined,
                Profile::ShortLived => Shape::ShortLived,
                Profile::Json => Shape::Json(files.items.clone()),
                Profile::Upload => Shape::Upload(upload_body()),
                _ => Shape::Baseline,
            };
            let load = ArenaLoad {
                addr: child.addr,
                host: child.addr.to_string(),
                conns: run.conns,
                secs,
                shape,
            };
            run_arena(&load, run.client_cpu, on_start)?
        }
    };
    let mut m = probe
        .take()
        .map(|pr| pr.finish(outcome.wall, outcome.requests))
        .unwrap_or_default();
    child.check_alive()?;
    if run.name == "nginx" && run.threads > 1 {
        // Its workers are the master's children: the probe saw only the master.
        m = ServerMetrics::default();
    }
    let server_cpus = if run.threads == 1 && run.pinned {
        crate::machine::pin_plan()
            .0
            .map_or(String::new(), |c| c.to_string())
    } else {
        crate::machine::allowed_cpus()
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let info = RunInfo {
        profile: run.p.name(),
        mode: run.p.mode(),
        server: run.name.to_string(),
        url: format!("http://{}", child.addr),
        round: run.round,
        conns: run.conns,
        threads: run.threads,
        secs: run.secs,
        pinned: run.pinned,
        server_cpus,
    };
    Ok(ArenaResult::of(info, &outcome, m))
}
