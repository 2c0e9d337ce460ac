//! `hoop bench echo`: one server given with `--addr`, or hoop (on io_uring and on epoll: the
//! same server code on the two drivers), tokio, monoio and compio (in the peers' binary) servers
//! started side by side (server pinned to one core, client to the other), measured in
//! alternating order (A B C D A B C D ...) so that drift hits every server alike; ratios are
//! taken pair by pair within each round and their median quoted.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use crate::load::echo::{self as echo_client, ClientConfig, ClientOutcome};
use crate::measure::latency::{self as stats, median};
use crate::measure::usage::{ServerMetrics, ServerProbe};
use crate::plan::{check_conns, check_len, check_rounds, check_secs, invalid};
use crate::record::echo::EchoResult;
use crate::record::{self, Latency, ServerUse};
use crate::report::output::Out;
use crate::target::child::ServerChild;

/// The servers, in the order they run within a round: `hoop` is `hoop serve echo --driver
/// uring` (its best path: multishot accept and recv on a buffer ring), `hoop-basic` the same
/// with `--basic` (single-shot accept and recv), `hoop-epoll` is `hoop serve echo --driver
/// epoll`.
pub(crate) const SERVERS: [&str; 6] = [
    "hoop",
    "hoop-basic",
    "hoop-epoll",
    "tokio",
    "monoio",
    "compio",
];
/// The servers that run in the `hoop-peer` binary (`peers/`, built on demand): compio's echo
/// server, the same work per connection as the tokio and monoio baselines.
pub(crate) const PEER_SERVERS: [&str; 1] = ["compio"];
/// The servers the ratio columns are taken against (numerators), when they ran.
const REFERENCES: [&str; 2] = ["hoop", "hoop-epoll"];

/// How a server is named in tables and charts (its JSON `server` field stays the short name).
pub(crate) fn label(server: &str) -> &str {
    match server {
        "hoop" => "hoop (io_uring)",
        "hoop-basic" => "hoop (io_uring, basic)",
        "hoop-epoll" => "hoop (epoll)",
        other => other,
    }
}
/// The full matrix, as in the article hoop grew from.
const FULL_CONNS: [usize; 3] = [50, 500, 1000];
/// The quick matrix's connections.
pub(crate) const QUICK_CONNS: [usize; 2] = [50, 500];
/// Payload sizes of both matrices.
pub(crate) const LENS: [usize; 2] = [128, 512];
/// The quick suite's cell beyond its product (conns, len): 16 KiB messages, where a reply
/// takes several receives (or one bundle of buffers) instead of one.
pub(crate) const BIG_CELL: (usize, usize) = (50, 16384);
/// Planned overhead of one side-by-side run (start, connect, stop), for the progress bar.
pub(crate) const RUN_OVERHEAD_SECS: f64 = 0.7;

/// A side-by-side plan.
#[derive(Debug, Clone)]
pub(crate) struct Matrix {
    /// Connection counts.
    pub conns: Vec<usize>,
    /// Payload sizes.
    pub lens: Vec<usize>,
    /// Servers, in run order.
    pub servers: Vec<String>,
    /// Seconds per run.
    pub secs: f64,
    /// Rounds per configuration.
    pub rounds: u32,
    /// Cells (conns, len) run after the product of `conns` and `lens`.
    pub extra: Vec<(usize, usize)>,
}

impl Matrix {
    /// Every cell (conns, len): the product of `conns` and `lens`, then `extra`.
    pub(crate) fn cells(&self) -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = Vec::new();
        for &c in &self.conns {
            for &l in &self.lens {
                v.push((c, l));
            }
        }
        for cell in &self.extra {
            if !v.contains(cell) {
                v.push(*cell);
            }
        }
        v
    }

    /// Planned seconds, for the progress bar.
    pub(crate) fn planned_secs(&self) -> f64 {
        let runs = self.cells().len() * self.servers.len() * self.rounds as usize;
        runs as f64 * (self.secs + RUN_OVERHEAD_SECS)
    }
}

/// What a matrix produced.
#[derive(Debug, Default)]
pub(crate) struct MatrixOutcome {
    /// Every measurement.
    pub results: Vec<EchoResult>,
    /// Runs that could not be measured, with why.
    pub failures: Vec<String>,
    /// Servers that cannot run here (a peer whose binary could not be built), one line each.
    pub skipped: Vec<String>,
}

/// Checks `--servers` and returns it (default: all four).
pub(crate) fn parse_servers(list: Option<Vec<String>>) -> io::Result<Vec<String>> {
    crate::plan::parse_server_list(list, &SERVERS)
}

/// Runs `hoop bench echo`.
pub fn run_echo_command(args: EchoArgs, json: bool) -> io::Result<()> {
    if let Some(c) = args.conns {
        check_conns(c)?;
    }
    if let Some(l) = args.len {
        check_len(l)?;
    }
    let secs = args.secs.unwrap_or(if args.quick { 3.0 } else { 5.0 });
    check_secs("-t/--secs", secs)?;
    crate::machine::raise_nofile_limit();
    match args.addr.clone() {
        Some(addr) => run_external(&addr, &args, secs, json),
        None => {
            check_rounds(args.rounds)?;
            let conns = match args.conns {
                Some(c) => vec![c],
                None if args.quick => QUICK_CONNS.to_vec(),
                None => FULL_CONNS.to_vec(),
            };
            let matrix = Matrix {
                conns,
                lens: args.len.map_or_else(|| LENS.to_vec(), |l| vec![l]),
                servers: parse_servers(args.servers)?,
                secs,
                rounds: args.rounds,
                extra: Vec::new(),
            };
            let out = Out::new(json, matrix.planned_secs());
            let outcome = run_matrix(&matrix, &out);
            out.finish();
            let mut table = summary_table(&outcome.results, &matrix.servers);
            for s in &outcome.skipped {
                table.push_str(&format!("- {s}\n"));
            }
            out.human(&table);
            finish_status(&outcome)
        }
    }
}

/// The exit status of a matrix: an error if a run failed or counted errors.
pub(crate) fn finish_status(outcome: &MatrixOutcome) -> io::Result<()> {
    let with_errors = outcome
        .results
        .iter()
        .filter(|r| r.errors > 0 || r.requests == 0)
        .count();
    if outcome.results.is_empty() || !outcome.failures.is_empty() || with_errors > 0 {
        return Err(io::Error::other(format!(
            "{} run(s) measured, {} failed, {} counted errors or no verified request{}",
            outcome.results.len(),
            outcome.failures.len(),
            with_errors,
            outcome
                .failures
                .first()
                .map_or(String::new(), |f| format!("; first failure: {f}"))
        )));
    }
    Ok(())
}

/// `--addr`: one measurement against a running server.
fn run_external(addr: &str, args: &EchoArgs, secs: f64, json: bool) -> io::Result<()> {
    let target: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| invalid(format!("cannot connect to {addr}: bad address ({e})")))?
        .next()
        .ok_or_else(|| invalid(format!("cannot connect to {addr}: it resolves to nothing")))?;
    let cfg = ClientConfig {
        addr: target,
        conns: args.conns.unwrap_or(50),
        len: args.len.unwrap_or(128),
        secs: Duration::from_secs_f64(secs),
    };
    let out = Out::new(json, secs);
    out.start(&format!("echo {target}"), secs);
    let mut probe = None;
    let outcome = echo_client::run_client(&cfg, None, || {
        probe = args.server_pid.map(|pid| ServerProbe::start(pid, cfg.secs));
    })?;
    let metrics = probe
        .map(|p| p.finish(outcome.wall, outcome.requests))
        .unwrap_or_default();
    out.finish();
    let r = make_result("external", 0, &cfg, &outcome, metrics, false);
    out.measurement(&r);
    out.human(&describe(&r));
    if r.errors > 0 {
        return Err(io::Error::other(format!(
            "{} error(s) during the run (first: {}); {} verified request(s)",
            r.errors,
            r.first_error.as_deref().unwrap_or("?"),
            r.requests
        )));
    }
    if r.requests == 0 {
        return Err(io::Error::other(
            "no request was verified in the window: the server accepted connections but never \
             answered in time",
        ));
    }
    Ok(())
}

/// Runs every configuration `rounds` times, servers in alternating order within each round.
/// Failed runs are recorded in `failures`; the matrix goes on.
pub(crate) fn run_matrix(m: &Matrix, out: &Out) -> MatrixOutcome {
    let (server_cpu, client_cpu) = crate::machine::pin_plan();
    let mut outcome = MatrixOutcome::default();
    // The peers' servers need the hoop-peer binary: built now, or skipped with a line.
    let mut servers = m.servers.clone();
    if servers.iter().any(|s| PEER_SERVERS.contains(&s.as_str())) {
        if let Err(why) = crate::target::peers::binary(out) {
            servers.retain(|s| {
                let peer = PEER_SERVERS.contains(&s.as_str());
                if peer {
                    let line = format!("{s}: skipped: {why}");
                    out.human(&line);
                    outcome.skipped.push(line);
                }
                !peer
            });
        }
    }
    for (conns, len) in m.cells() {
        for round in 0..m.rounds {
            for server in &servers {
                let what = format!("echo {server}: c={conns} l={len} round {}", round + 1);
                out.start(&what, m.secs + RUN_OVERHEAD_SECS);
                let cfg = ClientConfig {
                    addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                    conns,
                    len,
                    secs: Duration::from_secs_f64(m.secs),
                };
                match run_one(server, round, cfg, server_cpu, client_cpu) {
                    Ok(r) => {
                        out.measurement(&r);
                        out.warn_run(
                            &what,
                            r.requests,
                            "request",
                            r.errors,
                            r.first_error.as_deref(),
                        );
                        outcome.results.push(r);
                    }
                    Err(e) => {
                        out.note(&format!("warning: {what}: {e}"));
                        outcome.failures.push(format!("{what}: {e}"));
                    }
                }
                out.done(m.secs + RUN_OVERHEAD_SECS);
            }
        }
    }
    outcome
}

/// One server, one configuration: start the server, load it, stop it.
fn run_one(
    server: &str,
    round: u32,
    mut cfg: ClientConfig,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
) -> io::Result<EchoResult> {
    let mut child = if PEER_SERVERS.contains(&server) {
        let bin = crate::target::peers::built()
            .ok_or_else(|| io::Error::other("the peers' binary was not built"))?;
        let mut cmd = std::process::Command::new(bin);
        cmd.args(["echo", "--engine", server, "--addr", "127.0.0.1:0"]);
        ServerChild::spawn_cmd(
            server,
            cmd,
            server_cpu,
            crate::target::child::Ready::ListeningLine,
        )?
    } else {
        ServerChild::spawn(server, server_cpu)?
    };
    cfg.addr = child.addr;
    let pid = child.pid();
    let mut probe = None;
    let outcome = echo_client::run_client(&cfg, client_cpu, || {
        probe = Some(ServerProbe::start(pid, cfg.secs));
    })?;
    let metrics = probe
        .map(|p| p.finish(outcome.wall, outcome.requests))
        .unwrap_or_default();
    child.check_alive()?;
    drop(child);
    let pinned = server_cpu.is_some() && client_cpu.is_some();
    Ok(make_result(server, round, &cfg, &outcome, metrics, pinned))
}

fn make_result(
    server: &str,
    round: u32,
    cfg: &ClientConfig,
    o: &ClientOutcome,
    m: ServerMetrics,
    pinned: bool,
) -> EchoResult {
    let secs = cfg.secs.as_secs_f64();
    let client_cpu_pct = record::cpu_pct(o.cpu, o.wall);
    EchoResult {
        bench: "echo",
        server: server.to_string(),
        addr: cfg.addr.to_string(),
        round,
        conns: cfg.conns,
        len_bytes: cfg.len,
        secs,
        requests: o.requests,
        errors: o.errors,
        first_error: o.first_error.clone(),
        rps: stats::round3(o.requests as f64 / secs),
        latency: Latency::of(&o.hist),
        mean_us: stats::mean_us(&o.hist),
        connected: o.connected,
        client_cpu_pct,
        client_enters_per_req: o
            .enter_calls
            .filter(|_| o.requests > 0)
            .map(|n| stats::round3(n as f64 / o.requests as f64)),
        usage: ServerUse::from(&m),
        client_bound: record::client_bound(client_cpu_pct, m.cpu_pct),
        pinned,
    }
}

/// Human lines for one measurement.
fn describe(r: &EchoResult) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let mut s =
        format!(
        "echo {} ({}): {} conns x {} B, {:.1} s: {} verified requests ({:.0} req/s), {} errors\n\
         latency µs: p50 {}  p99 {}  p99.9 {}  max {}\n\
         client CPU {:.1}%  server CPU {}%  server CPU µs/req {}  syscalls/req {}",
        r.server,
        r.addr,
        r.conns,
        r.len_bytes,
        r.secs,
        r.requests,
        r.rps,
        r.errors,
        f(r.latency.p50_us),
        f(r.latency.p99_us),
        f(r.latency.p999_us),
        f(r.latency.max_us),
        r.client_cpu_pct,
        f(r.usage.server_cpu_pct),
        r.usage.server_cpu_us_per_req
            .map_or("-".into(), |x| format!("{x:.2}")),
        r.usage.syscalls_per_req.map_or("-".into(), |x| format!("{x:.2}")),
    );
    if let Some(e) = &r.first_error {
        s.push_str(&format!("\nfirst error: {e}"));
    }
    if r.client_bound {
        s.push_str("\nnote: the client was the bottleneck (its CPU near 100%, the server's not)");
    }
    s
}

/// Median over rounds of `f` for `server` in configuration (`conns`, `len`).
fn med(
    results: &[EchoResult],
    server: &str,
    conns: usize,
    len: usize,
    f: impl Fn(&EchoResult) -> Option<f64>,
) -> Option<f64> {
    let v: Vec<f64> = results
        .iter()
        .filter(|r| r.server == server && r.conns == conns && r.len_bytes == len)
        .filter_map(f)
        .collect();
    median(&v)
}

/// Median over rounds of `num`'s `f` / `base`'s `f`, paired within each round.
pub(crate) fn pair_ratio(
    results: &[EchoResult],
    num: &str,
    base: &str,
    conns: usize,
    len: usize,
    f: impl Fn(&EchoResult) -> Option<f64>,
) -> Option<f64> {
    let find = |server: &str, round: u32| {
        results.iter().find(|r| {
            r.server == server && r.round == round && r.conns == conns && r.len_bytes == len
        })
    };
    let ratios: Vec<f64> = results
        .iter()
        .filter(|r| r.server == num && r.conns == conns && r.len_bytes == len)
        .filter_map(|h| {
            let b = find(base, h.round)?;
            let (x, y) = (f(h)?, f(b)?);
            (y > 0.0).then(|| x / y)
        })
        .collect();
    median(&ratios)
}

/// The configurations present in `results`, in first-seen order.
pub(crate) fn configurations(results: &[EchoResult]) -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = Vec::new();
    for r in results {
        if !v.contains(&(r.conns, r.len_bytes)) {
            v.push((r.conns, r.len_bytes));
        }
    }
    v
}

/// The side-by-side table (markdown): medians over rounds, and for each hoop server that ran
/// (io_uring, epoll) its ratios to every server, paired within a round: so the `hoop (epoll)`
/// row's `hoop (io_uring)/this` column is hoop(io_uring)/hoop(epoll).
pub(crate) fn summary_table(results: &[EchoResult], servers: &[String]) -> String {
    let f1 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let f2 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    let refs: Vec<&str> = REFERENCES
        .into_iter()
        .filter(|r| servers.iter().any(|s| s == r))
        .collect();
    let mut s = String::from(
        "| conns | len | server | req/s (median) | p99 µs | server CPU µs/req | server CPU % | \
         syscalls/req | client CPU % | errors | client-bound runs |",
    );
    for r in &refs {
        let l = label(r);
        s.push_str(&format!(" {l}/this req/s | {l}/this CPU/req |"));
    }
    s.push_str("\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    s.push_str(&"---:|---:|".repeat(refs.len()));
    s.push('\n');
    for (conns, len) in configurations(results) {
        for server in servers {
            let runs: Vec<&EchoResult> = results
                .iter()
                .filter(|r| &r.server == server && r.conns == conns && r.len_bytes == len)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let m = |f: fn(&EchoResult) -> Option<f64>| med(results, server, conns, len, f);
            s.push_str(&format!(
                "| {conns} | {len} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {}/{} |",
                label(server),
                m(|r| Some(r.rps)).unwrap_or(0.0),
                f1(m(|r| r.latency.p99_us)),
                f2(m(|r| r.usage.server_cpu_us_per_req)),
                f1(m(|r| r.usage.server_cpu_pct)),
                f2(m(|r| r.usage.syscalls_per_req)),
                f1(m(|r| Some(r.client_cpu_pct))),
                runs.iter().map(|r| r.errors).sum::<u64>(),
                runs.iter().filter(|r| r.client_bound).count(),
                runs.len(),
            ));
            for r in &refs {
                let (rps, cpu) = if server == r {
                    ("1.00".to_string(), "1.00".to_string())
                } else {
                    (
                        f2(pair_ratio(results, r, server, conns, len, |x| Some(x.rps))),
                        f2(pair_ratio(results, r, server, conns, len, |x| {
                            x.usage.server_cpu_us_per_req
                        })),
                    )
                };
                s.push_str(&format!(" {rps} | {cpu} |"));
            }
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(server: &str, round: u32, rps: f64, cpu: f64) -> EchoResult {
        EchoResult {
            bench: "echo",
            server: server.to_string(),
            addr: "127.0.0.1:1".to_string(),
            round,
            conns: 50,
            len_bytes: 128,
            secs: 1.0,
            requests: rps as u64,
            errors: 0,
            first_error: None,
            rps,
            latency: Latency {
                p50_us: Some(10.0),
                p99_us: Some(20.0),
                p999_us: Some(30.0),
                max_us: Some(40.0),
            },
            mean_us: Some(12.0),
            connected: 50,
            client_cpu_pct: 50.0,
            client_enters_per_req: None,
            usage: ServerUse {
                server_cpu_pct: Some(50.0),
                server_cpu_us_per_req: Some(cpu),
                syscalls_per_req: None,
            },
            client_bound: false,
            pinned: true,
        }
    }

    #[test]
    fn servers_parse_and_keep_their_order() {
        assert_eq!(parse_servers(None).unwrap(), SERVERS.to_vec());
        let l = parse_servers(Some(vec!["tokio".into(), " HOOP-EPOLL".into()])).unwrap();
        assert_eq!(l, ["tokio", "hoop-epoll"]);
        assert!(parse_servers(Some(vec!["nginx".into()])).is_err());
    }

    #[test]
    fn the_table_has_both_hoop_ratios() {
        let servers: Vec<String> = ["hoop", "hoop-epoll", "tokio"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let results = vec![
            result("hoop", 0, 300.0, 2.0),
            result("hoop-epoll", 0, 200.0, 4.0),
            result("tokio", 0, 100.0, 8.0),
            result("hoop", 1, 300.0, 2.0),
            result("hoop-epoll", 1, 200.0, 4.0),
            result("tokio", 1, 100.0, 8.0),
        ];
        let t = summary_table(&results, &servers);
        assert!(t.contains("hoop (io_uring)/this req/s"), "{t}");
        assert!(t.contains("hoop (epoll)/this req/s"), "{t}");
        let row = |name: &str| {
            t.lines()
                .find(|l| l.contains(&format!("| {name} |")))
                .unwrap_or_else(|| panic!("no {name} row: {t}"))
                .to_string()
        };
        // hoop(io_uring)/hoop(epoll): 1.50 req/s, 0.50 CPU; then hoop(epoll)/hoop(epoll).
        assert!(
            row("hoop (epoll)").ends_with("| 1.50 | 0.50 | 1.00 | 1.00 |"),
            "{t}"
        );
        // Against tokio: io_uring 3x, epoll 2x.
        assert!(
            row("tokio").ends_with("| 3.00 | 0.25 | 2.00 | 0.50 |"),
            "{t}"
        );
        let header_cols = t.lines().next().unwrap().matches('|').count();
        for line in t.lines().skip(1) {
            assert_eq!(line.matches('|').count(), header_cols, "{line}");
        }
    }
}

/// Arguments of `hoop bench echo`.
#[derive(Debug, clap::Args)]
pub struct EchoArgs {
    /// Server to load (IP:PORT). Without it: start hoop (io_uring and epoll), tokio, monoio and
    /// compio servers side by side.
    #[arg(long, value_name = "IP:PORT")]
    pub addr: Option<String>,
    /// Connections, each with one request in flight [default: 50; side by side: 50,500,1000].
    #[arg(short = 'c', long = "conns", value_name = "CONNS")]
    pub conns: Option<usize>,
    /// Payload bytes per request, at most 16 MiB [default: 128; side by side: 128,512].
    #[arg(short = 'l', long = "len", value_name = "LEN_BYTES")]
    pub len: Option<usize>,
    /// Seconds per run [default: 5; with --quick: 3].
    #[arg(short = 't', long = "secs", value_name = "SECS")]
    pub secs: Option<f64>,
    /// Side by side: the quick matrix (conns 50,500 x len 128,512).
    #[arg(long)]
    pub quick: bool,
    /// Side by side: repetitions of each configuration, in alternating server order (at least 2).
    #[arg(long, value_name = "R", default_value_t = 2)]
    pub rounds: u32,
    /// Side by side: the servers to compare, comma-separated (hoop = io_uring best path,
    /// hoop-basic, hoop-epoll, tokio, monoio, compio; compio's runs in the hoop-peer binary of
    /// peers/, built on demand, and is skipped with a line where it cannot be).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// With --addr: the server's PID, to measure its CPU time and syscalls per request.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
}
