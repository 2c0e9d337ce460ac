//! The side-by-side runs of `hoop bench http`: the servers started once (pinned to the first
//! CPU, the multi-thread hyper pair unpinned), every cell run `rounds` times with the servers
//! in turn by the client on the second CPU, wrk right after the load generator where asked,
//! and one cell with wrk as a second client.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::compare::http::result::client_result;
use crate::compare::http::wrk::{run_wrk, run_wrk_logged, WrkRun};
use crate::load::http::client::{self, HttpClientConfig};
use crate::load::http::files::{file_name, make_files, Files};
use crate::load::http::mix::{self, MixFile};
use crate::measure::latency::median;
use crate::measure::usage::ServerProbe;
use crate::output::Out;
use crate::plan::http::{label, unpinned, Cell, MIX_LABEL, RUN_OVERHEAD_SECS};
use crate::record::http::HttpResult;
use crate::target::child::ServerChild;
use crate::target::http::start_server;
use crate::target::nginx;
use crate::target::wrk::{wrk_path, wrk_secs, WRK_MISSING};

/// A side-by-side plan.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Configurations.
    pub cells: Vec<Cell>,
    /// Servers, in run order.
    pub servers: Vec<String>,
    /// Seconds per run.
    pub secs: f64,
    /// Rounds per configuration.
    pub rounds: u32,
    /// Requests in flight per keep-alive connection.
    pub pipeline: usize,
    /// Files and nginx's prefix.
    pub dir: PathBuf,
    /// The servers wrk runs against, right after the load generator, in every cell and round
    /// (empty: none; skipped with a line when wrk is not installed).
    pub wrk: Vec<String>,
}

impl Plan {
    /// Planned seconds, for progress bars.
    pub(crate) fn planned_secs(&self) -> f64 {
        let runs = self.cells.len() * self.servers.len() * self.rounds as usize;
        let wrk_installed = wrk_path().is_some();
        let with_wrk = self
            .servers
            .iter()
            .filter(|s| wrk_installed && self.wrk.contains(s))
            .count();
        let mut wrk_runs = self.cells.len() * with_wrk * self.rounds as usize;
        // The second-client check against hoop, when not one of those runs.
        let hoop_checked = self.wrk.iter().any(|s| s == "hoop")
            && self.cells.contains(&Cell::file(1024, 50, false));
        if wrk_installed && self.servers.iter().any(|s| s == "hoop") && !hoop_checked {
            wrk_runs += 1;
        }
        runs as f64 * (self.secs + RUN_OVERHEAD_SECS)
            + wrk_runs as f64 * (wrk_secs(self.secs) as f64 + RUN_OVERHEAD_SECS)
    }
}

/// What a side-by-side run produced.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Every measurement.
    pub results: Vec<HttpResult>,
    /// Runs that could not be measured, with why.
    pub failures: Vec<String>,
    /// Lines for the table (nginx missing, fd limit, wrk).
    pub notes: Vec<String>,
}

/// The exit status: an error if a run failed or the load generator counted errors (wrk's
/// errors are shown, never fail: it verifies no body).
pub(crate) fn finish_status(o: &Outcome) -> io::Result<()> {
    let bad = o
        .results
        .iter()
        .filter(|r| r.client == "hoop" && (r.errors > 0 || r.requests == 0))
        .count();
    if o.results.is_empty() || !o.failures.is_empty() || bad > 0 {
        return Err(io::Error::other(format!(
            "{} run(s) measured, {} failed, {} counted errors or no verified request{}",
            o.results.len(),
            o.failures.len(),
            bad,
            o.failures
                .first()
                .map_or(String::new(), |f| format!("; first failure: {f}"))
        )));
    }
    Ok(())
}

/// The test files, and the static mix when a cell asks for it.
struct TestFiles {
    /// The served root.
    root: PathBuf,
    /// The single files by size.
    files: Files,
    /// The static mix's files.
    mix: Option<Arc<[MixFile]>>,
}

/// Writes the test files into `dir/root` (kept between runs when already right), and the
/// static mix when `with_mix` (a line for the table when it has no `.gz` variants).
fn make_test_files(dir: &Path, with_mix: bool) -> io::Result<(TestFiles, Option<String>)> {
    let (root, files) = make_files(dir)?;
    let (mix, note) = if with_mix {
        let (m, note) = mix::make(&root)?;
        (Some(Arc::from(m)), note)
    } else {
        (None, None)
    };
    Ok((TestFiles { root, files, mix }, note))
}

/// The CPUs as a list: "0", "0,1".
fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The line saying where each server and the client run.
fn pinning_note(
    servers: &[String],
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
    all: &[usize],
) -> String {
    let names = |pinned: bool| {
        servers
            .iter()
            .filter(|s| unpinned(s) != pinned)
            .map(|s| label(s).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    let (pinned, free) = (names(true), names(false));
    if !pinned.is_empty() {
        parts.push(match server_cpu {
            Some(c) => format!("{pinned} pinned to CPU {c}"),
            None => format!("{pinned} unpinned (fewer than two CPUs)"),
        });
    }
    if !free.is_empty() {
        parts.push(format!(
            "{free} unpinned on CPUs {} (tokio multi-thread, {} workers each; the same CPUs \
             for both, shared with the client)",
            cpu_list(all),
            all.len().max(1)
        ));
    }
    parts.push(match client_cpu {
        Some(c) => format!("the client pinned to CPU {c}"),
        None => "the client unpinned".into(),
    });
    format!("pinning: {}", parts.join("; "))
}

/// Runs the plan: servers started once (pinned to the first CPU, but for the multi-thread
/// hyper-shared and hyper-tokio: every allowed CPU), each configuration `rounds` times with the
/// servers in alternating order; then the wrk cell when wrk is installed.
pub(crate) fn run_side_by_side(plan: &Plan, out: &Out) -> Outcome {
    let mut o = Outcome::default();
    let (server_cpu, client_cpu) = crate::machine::pin_plan();
    let all_cpus = crate::machine::allowed_cpus();
    let with_mix = plan.cells.iter().any(|c| c.mix);
    let TestFiles { root, files, mix } = match make_test_files(&plan.dir, with_mix) {
        Ok((f, note)) => {
            o.notes.extend(note);
            f
        }
        Err(e) => {
            o.failures.push(format!(
                "cannot write the test files under {}: {e}",
                plan.dir.display()
            ));
            return o;
        }
    };
    let mut cells = plan.cells.clone();
    let limit = crate::machine::nofile_limit();
    if let Some(big) = cells.iter().map(|c| c.conns).max() {
        // Client and server each need one fd per connection (and a few more).
        if (big as u64) + 64 > limit {
            o.notes.push(format!(
                "the open-file limit is {limit} (hard limit reached): runs of more than {} \
                 connections are skipped; raise it with `ulimit -Hn`",
                limit.saturating_sub(64)
            ));
            cells.retain(|c| (c.conns as u64) + 64 <= limit);
        }
    }
    let mut servers: Vec<(String, ServerChild)> = Vec::new();
    o.notes.push(pinning_note(
        &plan.servers,
        server_cpu,
        client_cpu,
        &all_cpus,
    ));
    for name in &plan.servers {
        let cpu = if unpinned(name) { None } else { server_cpu };
        match start_server(name, &root, &plan.dir, cpu) {
            Ok(Some(child)) => servers.push((name.clone(), child)),
            Ok(None) => o.notes.push(nginx::MISSING.to_string()),
            Err(e) => {
                out.note(&format!("warning: {e}"));
                o.failures.push(e.to_string());
            }
        }
    }
    // wrk beside the load generator (`Plan::wrk`), and its script for the static mix.
    let wrk_bin = if plan.wrk.is_empty() {
        None
    } else {
        wrk_path()
    };
    if !plan.wrk.is_empty() && wrk_bin.is_none() {
        o.notes.push(WRK_MISSING.to_string());
    }
    let script = match (&wrk_bin, &mix) {
        (Some(_), Some(_)) => {
            let path = plan.dir.join("wrk-mix.lua");
            match std::fs::write(&path, mix::wrk_script()) {
                Ok(()) => Some(path),
                Err(e) => {
                    o.notes.push(format!(
                        "wrk: cannot write {}: {e}; no wrk run in the static mix",
                        path.display()
                    ));
                    None
                }
            }
        }
        _ => None,
    };
    // The matrix loop of `compare::Matrix::run` (cells, rounds, servers in the same order every
    // round), written out: wrk runs between a load generator's run and its JSON line, which
    // carries wrk's req/s, and both lines and the run's warning keep this bench's own words.
    for cell in &cells {
        for round in 0..plan.rounds {
            for (name, child) in servers.iter_mut() {
                let what = format!(
                    "http {name}: {}, c={} {} round {}",
                    if cell.mix {
                        MIX_LABEL.to_string()
                    } else {
                        format!("{} B", cell.file_bytes)
                    },
                    cell.conns,
                    cell.mode(),
                    round + 1
                );
                out.start(&what, plan.secs + RUN_OVERHEAD_SECS);
                let cfg = HttpClientConfig {
                    addr: child.addr,
                    host: child.addr.to_string(),
                    path: if cell.mix {
                        "/mix/".to_string()
                    } else {
                        format!("/{}", file_name(cell.file_bytes))
                    },
                    conns: cell.conns,
                    secs: Duration::from_secs_f64(plan.secs),
                    close: cell.close,
                    pipeline: if cell.close { 1 } else { plan.pipeline },
                    file_bytes: cell.file_bytes,
                    verify: if cell.mix {
                        None
                    } else {
                        files.get(&cell.file_bytes).cloned()
                    },
                    mix: if cell.mix { mix.clone() } else { None },
                };
                let url = format!("http://{}{}", cfg.host, cfg.path);
                let pid = child.pid();
                let mut probe = None;
                let run = client::run_client(&cfg, client_cpu, || {
                    probe = Some(ServerProbe::start(pid, cfg.secs));
                });
                let result = run.and_then(|outcome| {
                    let m = probe
                        .take()
                        .map(|p| p.finish(outcome.wall, outcome.requests))
                        .unwrap_or_default();
                    child.check_alive()?;
                    let (pinned, cpus) = if unpinned(name) {
                        (false, cpu_list(&all_cpus))
                    } else {
                        (
                            server_cpu.is_some() && client_cpu.is_some(),
                            server_cpu.map_or_else(|| cpu_list(&all_cpus), |c| c.to_string()),
                        )
                    };
                    let mut r = client_result(name, &url, round, &cfg, &outcome, m, pinned);
                    r.server_cpus = Some(cpus);
                    Ok(r)
                });
                out.done(plan.secs + RUN_OVERHEAD_SECS);
                // wrk right after, on the same server and cell.
                let wrk_result = match wrk_bin.as_deref() {
                    Some(wrk) if plan.wrk.contains(name) && result.is_ok() => {
                        if cell.mix && script.is_none() {
                            None
                        } else {
                            let run = WrkRun {
                                server: name,
                                conns: cell.conns,
                                round,
                                secs: plan.secs,
                                client_cpu,
                                server_cpus: result
                                    .as_ref()
                                    .ok()
                                    .and_then(|r| r.server_cpus.clone()),
                                pinned: result.as_ref().is_ok_and(|r| r.pinned),
                            };
                            run_wrk_logged(
                                wrk,
                                child,
                                cell,
                                script.as_deref(),
                                run,
                                out,
                                &mut o.notes,
                            )
                        }
                    }
                    _ => None,
                };
                match result {
                    Ok(mut r) => {
                        r.wrk_req_per_sec = wrk_result.as_ref().map(|w| w.rps);
                        out.measurement(&r);
                        if r.errors > 0 || r.requests == 0 {
                            out.note(&format!(
                                "warning: {what}: {} verified, {} error(s), first: {}",
                                r.requests,
                                r.errors,
                                r.first_error.as_deref().unwrap_or("-")
                            ));
                        }
                        o.results.push(r);
                    }
                    Err(e) => {
                        out.note(&format!("warning: {what}: {e}"));
                        o.failures.push(format!("{what}: {e}"));
                    }
                }
                if let Some(w) = wrk_result {
                    out.measurement(&w);
                    o.results.push(w);
                }
            }
        }
    }
    // One cell with wrk as the client, so a reader sees the two clients agree (from the runs
    // above when wrk ran against hoop at 1 KiB, 50 keep-alive; else one run of its own).
    let check = Cell::file(1024, 50, false);
    let same_cell = |x: &&HttpResult| {
        x.server == "hoop"
            && !x.mix
            && x.file_bytes == 1024
            && x.conns == 50
            && x.mode == "keep-alive"
    };
    let client_median = |o: &Outcome, client: &str| {
        median(
            &o.results
                .iter()
                .filter(same_cell)
                .filter(|x| x.client == client)
                .map(|x| x.rps)
                .collect::<Vec<_>>(),
        )
    };
    let checked_inline =
        wrk_bin.is_some() && plan.wrk.iter().any(|s| s == "hoop") && cells.contains(&check);
    if let Some((_, hoop)) = servers.iter().find(|(n, _)| n == "hoop") {
        if checked_inline {
            let errors: u64 = o
                .results
                .iter()
                .filter(same_cell)
                .filter(|x| x.client == "wrk")
                .map(|x| x.errors)
                .sum();
            if let Some(w) = client_median(&o, "wrk") {
                o.notes
                    .push(check_note(w, errors, client_median(&o, "hoop")));
            }
        } else {
            match wrk_path() {
                Some(wrk) => match run_wrk(
                    &wrk,
                    hoop,
                    WrkRun {
                        server: "hoop",
                        conns: 50,
                        round: 0,
                        secs: plan.secs,
                        client_cpu,
                        server_cpus: server_cpu.map(|c| c.to_string()),
                        pinned: client_cpu.is_some() && server_cpu.is_some(),
                    },
                ) {
                    Ok(r) => {
                        o.notes
                            .push(check_note(r.rps, r.errors, client_median(&o, "hoop")));
                        out.measurement(&r);
                        o.results.push(r);
                    }
                    Err(e) => o.notes.push(format!("wrk failed: {e}")),
                },
                None => o
                    .notes
                    .push("wrk not installed (apt-get install wrk): no second client".into()),
            }
        }
    }
    drop(servers);
    o
}

/// The second-client line of the table: wrk against hoop at 1 KiB, 50 keep-alive.
fn check_note(wrk_rps: f64, errors: u64, hoop_rps: Option<f64>) -> String {
    format!(
        "wrk -t1 -c50 against hoop (io_uring), 1 KiB keep-alive: {wrk_rps:.0} req/s \
         ({errors} errors); hoop's client in the same cell: {}",
        hoop_rps.map_or("-".into(), |v| format!("{v:.0} req/s"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::http::{quick_cells, SERVERS};

    #[test]
    fn planned_secs_count_wrk_beside_the_load_generator() {
        let plan = |wrk: &[&str]| Plan {
            cells: quick_cells(),
            servers: SERVERS.map(String::from).to_vec(),
            secs: 1.0,
            rounds: 2,
            pipeline: 1,
            dir: PathBuf::from("/nonexistent"),
            wrk: wrk.iter().map(|s| s.to_string()).collect(),
        };
        let runs = (6 * 4 * 2) as f64 * (1.0 + RUN_OVERHEAD_SECS);
        let one_wrk = 1.0 + RUN_OVERHEAD_SECS;
        if wrk_path().is_some() {
            // The quick matrix has 1k-c50: the check against hoop is one of the runs.
            let with = plan(&["hoop", "nginx"]).planned_secs();
            assert!(
                (with - (runs + (6 * 2 * 2) as f64 * one_wrk)).abs() < 1e-9,
                "{with}"
            );
            let without = plan(&[]).planned_secs();
            assert!((without - (runs + one_wrk)).abs() < 1e-9, "{without}");
        } else {
            assert!((plan(&["hoop"]).planned_secs() - runs).abs() < 1e-9);
        }
    }
}
