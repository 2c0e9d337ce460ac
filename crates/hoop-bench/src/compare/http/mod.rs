//! `hoop bench http`: the verifying load generator against one server (`--url`), or hoop
//! (io_uring and epoll), nginx and tokio+hyper static servers side by side on files the bench
//! creates, or each server under attack (`--attack`).

use std::io;

use crate::plan::http::{
    full_cells, parse_cells, parse_servers, quick_cells, HttpPlan, MAX_PIPELINE,
};
use crate::plan::{check_conns, check_rounds, check_secs, invalid};
use crate::report::http::summary_table;
use crate::report::hyper_pair::hyper_pair_section;
use crate::report::output::Out;
use crate::target::netns;
use crate::target::wrk::wrk_path;

pub mod attack;
pub mod result;
pub mod run;
pub mod url;
pub mod wrk;

use run::{finish_status, run_side_by_side, Outcome, Plan};

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
    if args.attack {
        return attack::run_attack_command(&args, json);
    }
    match &args.url {
        Some(url) => {
            let secs = args.secs.unwrap_or(5.0);
            check_secs("-t/--secs", secs)?;
            url::run_external(url, &args, secs, json)
        }
        None => {
            if args.verify.is_some() || args.server_pid.is_some() {
                return Err(invalid("--verify and --server-pid go with --url"));
            }
            if args.wrk && wrk_path().is_none() {
                return Err(invalid("--wrk: wrk is not installed (apt-get install wrk)"));
            }
            check_rounds(args.rounds)?;
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
                rounds: args.rounds,
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
