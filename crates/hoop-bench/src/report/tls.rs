//! `hoop bench http --tls [--h2]` from its plan to the printed report: the plan checked, the
//! machine and pinning lines, the runs, and one table of medians (verified answers per second,
//! hoop's ratio to nginx paired within each round, each server's CPU per answer).

use std::io;

use crate::compare::http::tls::{run_tls, TlsCell, TlsOutcome, TlsPlan, SERVERS};
use crate::measure::latency::median;
use crate::output::Out;
use crate::plan::http::HttpPlan;
use crate::plan::{check_conns, check_rounds, check_secs, invalid};

/// The plan of `--tls`, from the command's flags.
pub(crate) fn tls_plan(args: &HttpPlan) -> io::Result<TlsPlan> {
    if args.url.is_some() || args.attack || args.profiles.is_some() || args.wrk {
        return Err(invalid(
            "--tls runs its own side-by-side cells: not with --url, --attack, --profile or --wrk",
        ));
    }
    if args.close || args.pipeline > 1 || args.full || args.netns_mtu.is_some() {
        return Err(invalid(
            "--tls: --close, --pipeline, --full and --netns-mtu do not apply (the handshakes cell \
             is the connection-per-request one)",
        ));
    }
    let conns = args.conns.unwrap_or(50);
    check_conns(conns)?;
    let secs = args.secs.unwrap_or(3.0);
    check_secs("-t/--secs", secs)?;
    let rounds = args.rounds.unwrap_or(2);
    check_rounds(rounds)?;
    let cells = match &args.cells {
        Some(names) => names
            .iter()
            .map(|n| TlsCell::parse(n))
            .collect::<io::Result<Vec<_>>>()?,
        None => TlsCell::ALL.to_vec(),
    };
    let servers = match &args.servers {
        Some(list) => {
            for s in list {
                if !SERVERS.contains(&s.as_str()) {
                    return Err(invalid(format!(
                        "--tls: unknown server {s} (one of {})",
                        SERVERS.join(", ")
                    )));
                }
            }
            list.clone()
        }
        None => SERVERS.iter().map(|s| s.to_string()).collect(),
    };
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| crate::machine::default_out_dir().join("http"));
    Ok(TlsPlan {
        h2: args.h2,
        conns,
        secs: crate::target::wrk::wrk_secs(secs),
        rounds,
        cells,
        servers,
        dir,
    })
}

/// The main job's brief HTTPS phase: hoop and nginx, HTTP/1.1 with wrk, 1 KiB, the mix
/// compressed on the fly, and new handshakes, 1 s runs, 2 rounds.
pub(crate) fn quick_plan(dir: std::path::PathBuf) -> TlsPlan {
    TlsPlan {
        h2: false,
        conns: 50,
        secs: 1,
        rounds: 2,
        cells: vec![TlsCell::Size(1024), TlsCell::GzipMix, TlsCell::Handshakes],
        servers: vec!["hoop".into(), "nginx".into()],
        dir,
    }
}

/// Runs `--tls`: the lines saying where it ran, a JSON line per run (`json`), the table, and
/// an error when a server failed a check.
pub(crate) fn run_tls_command(args: &HttpPlan, json: bool) -> io::Result<()> {
    let plan = tls_plan(args)?;
    let out = Out::new(json, plan.planned_secs());
    let (server_cpu, client_cpu) = crate::machine::pin_plan();
    let pin = |c: Option<usize>| c.map_or("unpinned".to_string(), |c| format!("CPU {c}"));
    out.human(&format!(
        "machine: {} ({} CPUs online), kernel {}\npinning: servers on {} (one thread each), \
         the client on {}",
        crate::machine::cpu_model(),
        crate::machine::allowed_cpus().len(),
        crate::machine::kernel(),
        pin(server_cpu),
        pin(client_cpu)
    ));
    let outcome = run_tls(&plan, &out)?;
    out.finish();
    out.human(&tls_table(&plan, &outcome));
    if outcome.failed {
        return Err(io::Error::other(
            "hoop bench http --tls: a server failed a check (see the notes)",
        ));
    }
    Ok(())
}

/// The table: a row per cell, the medians of each server's verified req/s, hoop's ratio to
/// nginx (the median of the ratios paired within a round), and CPU microseconds per answer.
pub(crate) fn tls_table(plan: &TlsPlan, o: &TlsOutcome) -> String {
    let (proto, tool) = match plan.h2 {
        true => ("HTTP/2", "h2load -c CONNS -m1 (handshakes: wrk, HTTP/1.1)"),
        false => ("HTTP/1.1", "wrk -t1 -c CONNS"),
    };
    let mut s = format!(
        "\n## HTTPS, {proto} ({tool}, {} connections, {} s per run, {} round(s), servers in \
         alternating order; medians of verified answers/s)\n\n",
        plan.conns, plan.secs, plan.rounds
    );
    let mut head = "| cell |".to_string();
    let mut rule = "|---|".to_string();
    for server in &plan.servers {
        head.push_str(&format!(" {server} req/s | {server} CPU µs/req |"));
        rule.push_str("---:|---:|");
    }
    let paired = plan.servers.iter().any(|s| s == "nginx");
    if paired {
        head.push_str(" hoop/nginx |");
        rule.push_str("---:|");
    }
    s.push_str(&format!("{head}\n{rule}\n"));
    for cell in &plan.cells {
        let label = cell.label();
        let mut row = format!("| {label} |");
        for server in &plan.servers {
            let runs: Vec<_> = o
                .runs
                .iter()
                .filter(|r| r.cell == label && &r.server == server)
                .collect();
            let rps: Vec<f64> = runs.iter().map(|r| r.req_per_sec).collect();
            let cpu: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.server_cpu_us_per_req)
                .collect();
            match median(&rps) {
                Some(m) => row.push_str(&format!(" {m:.0} |")),
                None => row.push_str(" - |"),
            }
            match median(&cpu) {
                Some(m) => row.push_str(&format!(" {m:.1} |")),
                None => row.push_str(" - |"),
            }
        }
        if paired {
            let ratios: Vec<f64> = (0..plan.rounds)
                .filter_map(|round| {
                    let of = |name: &str| {
                        o.runs
                            .iter()
                            .find(|r| r.cell == label && r.server == name && r.round == round)
                            .map(|r| r.req_per_sec)
                    };
                    match (of("hoop"), of("nginx")) {
                        (Some(h), Some(n)) if n > 0.0 => Some(h / n),
                        _ => None,
                    }
                })
                .collect();
            match median(&ratios) {
                Some(m) => row.push_str(&format!(" {m:.2}x |")),
                None => row.push_str(" - |"),
            }
        }
        s.push_str(&row);
        s.push('\n');
    }
    s.push_str(
        "\ncells: 1k, 64k, 1m: one file, keep-alive; mix: 20 files of 3-300 KB with .gz \
         variants, `Accept-Encoding: br, gzip`; gzip-mix: the same files without variants, \
         `Accept-Encoding: gzip`, compressed on the fly (hoop --compress: gzip 6, cached; \
         nginx gzip on: level 1, per response); handshakes: `Connection: close`, a full \
         TLS handshake per 1 KiB answer. Both servers: the run's ECDSA P-256 certificate, \
         TLS 1.3/1.2, AES-128-GCM first in the server's order, session tickets.\n",
    );
    for n in &o.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s
}
