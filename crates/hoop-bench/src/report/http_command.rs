//! `hoop bench http` from its plan to the printed report: the checks every mode shares, then
//! one server by URL, the side-by-side runs (again inside a network namespace when asked), or
//! the servers under attack; tables, and the exit status.

use std::io;

use crate::compare::http::attack::{attack_plan, attack_status, run_attack};
use crate::compare::http::run::{finish_status, run_side_by_side, Outcome, Plan};
use crate::compare::http::url;
use crate::output::Out;
use crate::plan::http::{
    full_cells, parse_cells, parse_servers, quick_cells, HttpPlan, MAX_PIPELINE,
};
use crate::plan::{check_conns, check_rounds, check_secs, invalid};
use crate::report::attack::attack_table;
use crate::report::http::{describe, summary_table};
use crate::report::hyper_pair::hyper_pair_section;
use crate::target::netns;
use crate::target::wrk::wrk_path;

/// Runs `hoop bench http` as planned (`json`: one JSON line per measurement on stdout).
pub fn run_http(args: HttpPlan, json: bool) -> io::Result<()> {
    if let Some(c) = args.conns {
        check_conns(c)?;
    }
    if args.pipeline == 0 || args.pipeline > MAX_PIPELINE {
        return Err(invalid(format!(
            "--pipeline must be between 1 and {MAX_PIPELINE} (got {})",
            args.pipeline
        )));
    }
    if args.close && args.pipeline > 1 {
        return Err(invalid(
            "--pipeline applies to keep-alive connections, not with --close",
        ));
    }
    if args.url.is_some() && args.wrk {
        return Err(invalid(
            "--wrk runs wrk beside the side-by-side runs, not with --url (run wrk itself)",
        ));
    }
    crate::machine::raise_nofile_limit();
    if args.tls {
        return crate::report::tls::run_tls_command(&args, json);
    }
    if args.h2 {
        return Err(invalid(
            "--h2 goes with --tls (HTTP/2 is offered over TLS only)",
        ));
    }
    if args.profiles.is_some() {
        return crate::report::arena_command::run_profiles_command(&args, json);
    }
    if args.attack {
        return run_attack_command(&args, json);
    }
    match &args.url {
        Some(url) => {
            let secs = args.secs.unwrap_or(5.0);
            check_secs("-t/--secs", secs)?;
            run_external(url, &args, secs, json)
        }
        None => {
            if args.verify.is_some() || args.server_pid.is_some() {
                return Err(invalid("--verify and --server-pid go with --url"));
            }
            if args.wrk && wrk_path().is_none() {
                return Err(invalid("--wrk: wrk is not installed (apt-get install wrk)"));
            }
            let rounds = args.rounds.unwrap_or(2);
            check_rounds(rounds)?;
            let secs = args.secs.unwrap_or(2.0);
            check_secs("-t/--secs", secs)?;
            let servers = parse_servers(args.servers.clone())?;
            if args.cells.is_some() && (args.full || args.conns.is_some() || args.close) {
                return Err(invalid(
                    "--cells names every cell: not with --full, -c/--conns or --close",
                ));
            }
            let mut cells = match &args.cells {
                Some(names) => parse_cells(names)?,
                None if args.full => full_cells(),
                None => quick_cells(),
            };
            if let Some(c) = args.conns {
                cells.retain(|cell| cell.close == args.close);
                for cell in &mut cells {
                    cell.conns = c;
                }
                cells.dedup();
            }
            let dir = args
                .dir
                .clone()
                .unwrap_or_else(|| crate::machine::default_out_dir().join("http"));
            let plan = Plan {
                cells,
                servers: servers.clone(),
                secs,
                rounds,
                pipeline: args.pipeline,
                dir,
                wrk: if args.wrk { servers } else { Vec::new() },
            };
            let report = |outcome: &Outcome, out: &Out| {
                out.human(&summary_table(
                    &outcome.results,
                    &plan.servers,
                    &outcome.notes,
                ));
                if let Some(pair) = hyper_pair_section(&outcome.results) {
                    out.human(&pair);
                }
            };
            let out = Out::new(json, plan.planned_secs());
            let outcome = run_side_by_side(&plan, &out);
            out.finish();
            out.human(&format!(
                "loopback MTU {} (the machine's network namespace)",
                netns::loopback_mtu().map_or("unknown".to_string(), |m| m.to_string())
            ));
            report(&outcome, &out);
            let status = finish_status(&outcome);
            let Some(mtu) = args.netns_mtu else {
                return status;
            };
            match netns::enter(mtu) {
                Err(e) => {
                    out.human(&format!("netns loopback MTU {mtu}: skipped: {e}"));
                    status
                }
                Ok(()) => {
                    let out = Out::new(json, plan.planned_secs());
                    out.human(&format!(
                        "\n## The same runs inside a network namespace of its own, loopback MTU {mtu}\n"
                    ));
                    let outcome_ns = run_side_by_side(&plan, &out);
                    out.finish();
                    report(&outcome_ns, &out);
                    status.and(finish_status(&outcome_ns))
                }
            }
        }
    }
}

/// `--attack`: every server under attack, a table and one JSON line each.
fn run_attack_command(args: &HttpPlan, json: bool) -> io::Result<()> {
    let plan = attack_plan(args)?;
    let out = Out::new(json, plan.planned_secs());
    let (results, failures, notes) = run_attack(&plan, &out);
    out.finish();
    out.human(&attack_table(&results, &notes));
    attack_status(&results, &failures)
}

/// `--url`: one measurement, its lines, and its status.
fn run_external(url: &str, args: &HttpPlan, secs: f64, json: bool) -> io::Result<()> {
    let cfg = url::config(url, args, secs)?;
    let out = Out::new(json, secs);
    let r = url::measure(url, &cfg, args.server_pid, &out)?;
    out.human(&describe(&r));
    url::status(&r)
}
