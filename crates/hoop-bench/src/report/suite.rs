//! `hoop bench` with no subcommand: every bench at a quick size (echo matrix and its 16 KiB cell,
//! no-ops, file reads, HTTP static files and HttpArena's profiles, fan-out, cancellation counts,
//! idle connections), each phase timed, then the tables and the report in `target/hoop-report/`.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::compare::cancel;
use crate::compare::echo::{self as echo_compare, EchoMatrix};
use crate::compare::fanout::{self, FanoutMatrix};
use crate::compare::file_quick::{self as quick, QuickOptions};
use crate::compare::http::run as http;
use crate::compare::idle;
use crate::compare::nop;
use crate::compare::Outcome;
use crate::machine::{self as sysinfo, SysInfo};
use crate::output::Out;
use crate::plan::http::{quick_cells, SERVERS as HTTP_SERVERS};
use crate::plan::{check_rounds, check_secs};
use crate::record::file::FileSuite;
use crate::report::file_quick::section as file_section;
use crate::report::http::summary_table;
use crate::report::markdown::{self as report, ReportData};
use crate::report::nop as nop_report;
use crate::target::wrk::{wrk_path, WRK_MISSING};

/// The HTTP servers wrk also loads in the quick HTTP run (when installed).
const WRK_SERVERS: [&str; 2] = ["hoop", "nginx"];

/// Options of the suite (the flags of `hoop bench`).
#[derive(Debug)]
pub struct SuiteOptions {
    /// JSON lines on stdout.
    pub json: bool,
    /// Report directory (default: target/hoop-report).
    pub out: Option<PathBuf>,
    /// Seconds per echo run.
    pub secs: f64,
    /// Rounds per echo configuration.
    pub rounds: u32,
    /// Servers to compare.
    pub servers: Option<Vec<String>>,
    /// Seconds per no-op engine.
    pub nop_secs: f64,
    /// Seconds per engine of the quick file run.
    pub file_secs: f64,
    /// Test file size of the quick file run.
    pub file_size: String,
    /// Skip the quick file run.
    pub no_file: bool,
    /// Seconds per HTTP run.
    pub http_secs: f64,
    /// Skip the quick HTTP run.
    pub no_http: bool,
    /// Leave out the peers that run in `hoop-peer` (compio's echo server, the peers' no-op rows
    /// and file engines).
    pub no_peers: bool,
    /// Seconds per run of the short fan-out run.
    pub fanout_secs: f64,
    /// Skip the short fan-out run.
    pub no_fanout: bool,
    /// Skip the cancellation counts.
    pub no_cancel: bool,
    /// Seconds of each active run of the idle-connection run.
    pub idle_secs: f64,
    /// Skip the idle-connection run.
    pub no_idle: bool,
}

/// Runs the suite.
pub fn run_suite(o: SuiteOptions) -> io::Result<()> {
    check_secs("--secs", o.secs)?;
    check_secs("--nop-secs", o.nop_secs)?;
    check_rounds(o.rounds)?;
    check_secs("--file-secs", o.file_secs)?;
    check_secs("--http-secs", o.http_secs)?;
    check_secs("--fanout-secs", o.fanout_secs)?;
    let file_opts = (!o.no_file)
        .then(|| -> io::Result<QuickOptions> {
            Ok(QuickOptions {
                dir: crate::plan::file::default_dir(),
                size: crate::plan::size::parse_size("--file-size", &o.file_size)?,
                secs: o.file_secs,
                peers: !o.no_peers,
            })
        })
        .transpose()?;
    if let Some(f) = &file_opts {
        f.check()?;
    }
    let servers = echo_compare::suite_servers(o.servers, o.no_peers)?;
    let dir = o.out.unwrap_or_else(sysinfo::default_out_dir);
    sysinfo::raise_nofile_limit();
    let started = Instant::now();
    let mut phases: Vec<(String, Duration)> = Vec::new();

    let t = Instant::now();
    let sys = SysInfo::collect();
    phases.push(("machine info".into(), t.elapsed()));

    let matrix = EchoMatrix::quick(servers.clone(), o.secs, o.rounds);
    let nop_runs = nop::suite_runs(o.nop_secs, !o.no_peers);
    // wrk beside the load generator against hoop and nginx, when installed (a line when not).
    let wrk_installed = wrk_path().is_some();
    let http_plan = (!o.no_http).then(|| http::Plan {
        cells: quick_cells(),
        servers: HTTP_SERVERS.iter().map(|s| s.to_string()).collect(),
        secs: o.http_secs,
        rounds: 2,
        pipeline: 1,
        dir: dir.join("http"),
        wrk: if wrk_installed {
            WRK_SERVERS.iter().map(|s| s.to_string()).collect()
        } else {
            Vec::new()
        },
    });
    // HttpArena's profiles, briefly, with the HTTP phase.
    let arena_plan =
        (!o.no_http).then(|| crate::plan::arena::ArenaPlan::quick(dir.join("http"), !o.no_peers));
    // HTTPS briefly (wrk; nginx beside hoop where installed): 1 KiB, the mix compressed on
    // the fly, new handshakes.
    let tls_plan =
        (!o.no_http && wrk_installed).then(|| crate::report::tls::quick_plan(dir.join("http")));
    let fanout_plan = (!o.no_fanout).then(|| FanoutMatrix::quick(o.fanout_secs));
    if let Some(p) = &fanout_plan {
        p.check()?;
    }
    let cancel_plan = (!o.no_cancel).then(|| cancel::Plan::quick(!o.no_peers));
    // The idle run takes the suite's servers it knows (hoop, hoop-epoll, tokio, monoio).
    let idle_plan = if o.no_idle {
        None
    } else {
        check_secs("--idle-secs", o.idle_secs)?;
        idle::Plan::quick(&servers, o.idle_secs)?
    };
    let planned = matrix.planned_secs()
        + nop::planned_secs(&nop_runs)
        + file_opts.as_ref().map_or(0.0, QuickOptions::planned_secs)
        + http_plan.as_ref().map_or(0.0, http::Plan::planned_secs)
        + arena_plan
            .as_ref()
            .map_or(0.0, crate::plan::arena::ArenaPlan::planned_secs)
        + tls_plan.as_ref().map_or(0.0, |p| p.planned_secs())
        + fanout_plan.as_ref().map_or(0.0, FanoutMatrix::planned_secs)
        + cancel_plan.as_ref().map_or(0.0, cancel::Plan::planned_secs)
        + idle_plan.as_ref().map_or(0.0, idle::Plan::planned_secs);
    let out = Out::new(o.json, planned);
    let pinning = pinning_text();
    out.note(&format!(
        "hoop bench: quick suite, about {planned:.0} s planned; {pinning}; report -> {}",
        dir.display()
    ));
    if http_plan.is_some() && !wrk_installed {
        out.note(&format!("http: {}", WRK_MISSING));
    }

    if !o.no_peers {
        // Built before any clock starts (each part skips the peers with a line if this fails).
        let t = Instant::now();
        if let Err(why) = crate::target::peers::binary(&out) {
            out.note(&format!("peers: skipped: {why}"));
        }
        phases.push(("peers build".into(), t.elapsed()));
    }

    let t = Instant::now();
    let echo = echo_compare::run_matrix(&matrix, &out);
    phases.push(("echo matrix".into(), t.elapsed()));

    let t = Instant::now();
    let mut failures = echo.failures.clone();
    let mut nop_results = Vec::new();
    let mut nop_skipped = Vec::new();
    for (cfg, engines) in &nop_runs {
        match nop::run_engines(cfg, engines, &out) {
            Ok((r, skipped)) => {
                nop_results.extend(r);
                nop_skipped.extend(skipped);
            }
            Err(e) => {
                let what = format!(
                    "no-op bench ({}, {} thread(s))",
                    engines.join(", "),
                    cfg.threads
                );
                out.note(&format!("warning: {what}: {e}"));
                failures.push(format!("{what}: {e}"));
            }
        }
    }
    phases.push(("no-op".into(), t.elapsed()));

    let t = Instant::now();
    let file = match &file_opts {
        Some(f) => {
            let suite = quick::run_quick(f, &out);
            failures.extend(suite.failures.iter().cloned());
            phases.push(("file".into(), t.elapsed()));
            suite
        }
        None => FileSuite::default(),
    };

    let t = Instant::now();
    let http_outcome = match &http_plan {
        Some(plan) => {
            let o = http::run_side_by_side(plan, &out);
            failures.extend(o.failures.iter().cloned());
            phases.push(("http".into(), t.elapsed()));
            o
        }
        None => http::Outcome::default(),
    };

    let t = Instant::now();
    let arena_outcome = match &arena_plan {
        Some(plan) => {
            let o = crate::compare::http::arena::run_profiles(plan, &out);
            failures.extend(o.failures.iter().map(|f| format!("http profiles: {f}")));
            phases.push(("http profiles".into(), t.elapsed()));
            o
        }
        None => crate::compare::http::arena::ArenaOutcome::default(),
    };

    let t = Instant::now();
    let mut tls_runs = Vec::new();
    let tls_section = tls_plan.as_ref().map(|plan| {
        let section = match crate::compare::http::tls::run_tls(plan, &out) {
            Ok(o) => {
                if o.failed {
                    failures.push("https: a server failed a check".into());
                }
                let table = crate::report::tls::tls_table(plan, &o);
                tls_runs = o.runs;
                table
            }
            Err(e) => format!("\n## HTTPS\n\nskipped: {e}\n"),
        };
        phases.push(("https".into(), t.elapsed()));
        section
    });

    let t = Instant::now();
    let fanout_outcome = match &fanout_plan {
        Some(plan) => {
            let o = fanout::run_matrix(plan, &out);
            failures.extend(o.failures.iter().cloned());
            phases.push(("fanout".into(), t.elapsed()));
            o
        }
        None => Outcome::default(),
    };

    let t = Instant::now();
    let cancel_outcome = match &cancel_plan {
        Some(plan) => {
            let o = cancel::run_plan(plan, &out);
            failures.extend(o.failures.iter().map(|f| format!("cancel: {f}")));
            phases.push(("cancel".into(), t.elapsed()));
            o
        }
        None => cancel::Outcome::default(),
    };

    let t = Instant::now();
    let idle_outcome = match &idle_plan {
        Some(plan) => {
            let o = idle::run_plan(plan, &out);
            failures.extend(o.failures.iter().map(|f| format!("idle: {f}")));
            phases.push(("idle".into(), t.elapsed()));
            o
        }
        None => idle::Outcome::default(),
    };
    out.finish();

    let mut echo_table = crate::report::echo::summary_table(&echo.results, &servers);
    for s in &echo.skipped {
        echo_table.push_str(&format!("- {s}\n"));
    }
    let nop_table =
        nop_report::with_notes(nop_report::table(&nop_results), &nop_skipped, !o.no_peers);
    out.human(&format!(
        "## Echo (quick matrix, {} s per run, {} rounds, medians; ratios pair by pair)\n\n{echo_table}",
        o.secs, o.rounds
    ));
    out.human(&format!("## No-op batches\n\n{nop_table}"));
    if file_opts.is_some() {
        out.human(&file_section(&file));
    }
    let http_table = if http_plan.is_some() {
        summary_table(
            &http_outcome.results,
            &HTTP_SERVERS.map(String::from),
            &http_outcome.notes,
        )
    } else {
        String::new()
    };
    if http_plan.is_some() {
        out.human(&format!(
            "## HTTP static files (quick matrix, {} s per run, 2 rounds, medians)\n\n{http_table}",
            o.http_secs
        ));
    }

    let arena_section = arena_plan
        .as_ref()
        .map(|p| crate::report::arena::suite_section(p, &arena_outcome));
    if let Some(s) = &arena_section {
        out.human(s);
    }
    if let Some(s) = &tls_section {
        out.human(s);
    }
    let fanout_section = fanout_plan
        .as_ref()
        .map(|p| crate::report::fanout::section(p, &fanout_outcome));
    if let Some(s) = &fanout_section {
        out.human(s);
    }
    let cancel_section = cancel_plan
        .as_ref()
        .map(|p| crate::report::cancel::section(p, &cancel_outcome));
    if let Some(s) = &cancel_section {
        out.human(s);
    }
    let idle_section = idle_plan
        .as_ref()
        .map(|p| crate::report::idle::section(p, &idle_outcome));
    if let Some(s) = &idle_section {
        out.human(s);
    }

    let t = Instant::now();
    let written = report::write_report(
        &dir,
        &ReportData {
            sys: &sys,
            pinning,
            servers: &servers,
            echo_secs: o.secs,
            rounds: o.rounds,
            echo: &echo.results,
            echo_table: &echo_table,
            nop: &nop_results,
            nop_table: &nop_table,
            file: &file,
            http: &http_outcome.results,
            http_table: &http_table,
            http_secs: http_plan.as_ref().map(|p| p.secs),
            arena: &arena_outcome.results,
            arena_section: arena_section.as_deref(),
            tls: &tls_runs,
            tls_section: tls_section.as_deref(),
            fanout: &fanout_outcome.results,
            fanout_section: fanout_section.as_deref(),
            cancel: &cancel_outcome.results,
            cancel_section: cancel_section.as_deref(),
            idle: &idle_outcome.results,
            idle_section: idle_section.as_deref(),
            failures: &failures,
            phases: &phases,
        },
    )?;
    phases.push(("report".into(), t.elapsed()));

    let timings: Vec<String> = phases
        .iter()
        .map(|(n, t)| format!("{n} {:.1} s", t.as_secs_f64()))
        .collect();
    out.note(&format!(
        "phases: {}; total {:.1} s",
        timings.join(", "),
        started.elapsed().as_secs_f64()
    ));
    let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    out.note(&format!("report written: {}", names.join(", ")));

    let nop_errors: u64 = nop_results.iter().map(|r| r.errors).sum();
    echo_compare::finish_status(&echo.results, &failures)?;
    // wrk's errors are in the table and the JSON; only the load generator, which verifies
    // every body, fails the job.
    let http_bad = http_outcome
        .results
        .iter()
        .filter(|r| r.client == "hoop" && (r.errors > 0 || r.requests == 0))
        .count();
    if http_bad > 0 {
        return Err(io::Error::other(format!(
            "{http_bad} HTTP run(s) counted errors or verified no request"
        )));
    }
    let arena_bad = arena_outcome
        .results
        .iter()
        .filter(|r| r.errors > 0 || r.requests == 0)
        .count();
    if arena_bad > 0 {
        return Err(io::Error::other(format!(
            "{arena_bad} HTTP profile run(s) counted errors or verified no request"
        )));
    }
    let fanout_bad = fanout::bad(&fanout_outcome.results);
    if fanout_bad > 0 {
        return Err(io::Error::other(format!(
            "{fanout_bad} fan-out run(s) counted errors or verified no delivery"
        )));
    }
    let idle_bad = idle_outcome.bad();
    if !idle_bad.is_empty() {
        return Err(io::Error::other(format!(
            "idle run: {}: idle connections failed, or the active load counted errors or \
             verified nothing",
            idle_bad.join(", ")
        )));
    }
    let file_errors: u64 = file.all().map(|r| r.errors).sum();
    if file_errors > 0 {
        return Err(io::Error::other(format!(
            "{file_errors} file I/Os failed or did not verify"
        )));
    }
    if nop_errors > 0 {
        return Err(io::Error::other(format!(
            "{nop_errors} no-ops completed with an error"
        )));
    }
    Ok(())
}

/// How side-by-side runs are pinned, for the report.
pub(crate) fn pinning_text() -> String {
    match sysinfo::pin_plan() {
        (Some(s), Some(c)) => format!(
            "echo servers pinned to CPU {s} (sched_setaffinity in the child before exec, inherited \
             by all its threads), the client thread to CPU {c} (hoop::runtime::pin_to_cpu); \
             no-op threads pinned round-robin from CPU {s}"
        ),
        _ => "unpinned: fewer than 2 CPUs available, so server and client share a core".into(),
    }
}
