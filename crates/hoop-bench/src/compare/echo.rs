//! The echo comparison: the servers, the cells (connections x payload), and one run (start a
//! server pinned to one core, load it from the other, stop it); also one run against a
//! server given by address.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::compare::matrix::{Matrix, Order};
use crate::load::echo::{self as echo_client, ClientConfig, ClientOutcome};
use crate::measure::latency as stats;
use crate::measure::usage::{ServerMetrics, ServerProbe};
use crate::output::Out;
use crate::plan::check::{check_conns, check_len, check_rounds, check_secs, parse_server_list};
use crate::record::echo::EchoResult;
use crate::record::usage::{self, Latency, ServerUse};
use crate::target::child::{Ready, ServerChild};

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
/// The full matrix, as in the article hoop grew from.
const FULL_CONNS: [usize; 3] = [50, 500, 1000];
/// The quick matrix's connections.
const QUICK_CONNS: [usize; 2] = [50, 500];
/// Payload sizes of both matrices.
pub(crate) const LENS: [usize; 2] = [128, 512];
/// The quick suite's cell beyond its product (conns, len): 16 KiB messages, where a reply
/// takes several receives (or one bundle of buffers) instead of one.
pub(crate) const BIG_CELL: (usize, usize) = (50, 16384);
/// Planned overhead of one side-by-side run (start, connect, stop), for the progress bar.
const RUN_OVERHEAD_SECS: f64 = 0.7;

/// What `hoop bench echo` is asked: one server by address, or the servers side by side.
#[derive(Debug, Clone, Default)]
pub struct EchoPlan {
    /// A running server to load (IP:PORT); none: the servers side by side.
    pub addr: Option<String>,
    /// Connections [default: 50; side by side: 50, 500, 1000].
    pub conns: Option<usize>,
    /// Payload bytes per request [default: 128; side by side: 128, 512].
    pub len: Option<usize>,
    /// Seconds per run [default: 5; quick: 3].
    pub secs: Option<f64>,
    /// Side by side: the quick matrix.
    pub quick: bool,
    /// Side by side: rounds of every cell.
    pub rounds: u32,
    /// Side by side: the servers to compare (default: all).
    pub servers: Option<Vec<String>>,
    /// With `addr`: the server's PID, to measure its CPU time and syscalls.
    pub server_pid: Option<u32>,
}

impl EchoPlan {
    /// Seconds per run, checked.
    pub(crate) fn secs(&self) -> io::Result<f64> {
        if let Some(c) = self.conns {
            check_conns(c)?;
        }
        if let Some(l) = self.len {
            check_len(l)?;
        }
        let secs = self.secs.unwrap_or(if self.quick { 3.0 } else { 5.0 });
        check_secs("-t/--secs", secs)?;
        Ok(secs)
    }

    /// The side-by-side matrix this plan asks for (with `secs` from [`EchoPlan::secs`]).
    pub(crate) fn matrix(&self, secs: f64) -> io::Result<EchoMatrix> {
        check_rounds(self.rounds)?;
        let conns = match self.conns {
            Some(c) => vec![c],
            None if self.quick => QUICK_CONNS.to_vec(),
            None => FULL_CONNS.to_vec(),
        };
        Ok(EchoMatrix {
            conns,
            lens: self.len.map_or_else(|| LENS.to_vec(), |l| vec![l]),
            servers: parse_servers(self.servers.clone())?,
            secs,
            rounds: self.rounds,
            extra: Vec::new(),
        })
    }
}

/// A side-by-side matrix: servers x cells (conns, len) x rounds.
#[derive(Debug, Clone)]
pub(crate) struct EchoMatrix {
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

impl EchoMatrix {
    /// The suite's quick matrix: conns 50, 500 x len 128, 512, then the 16 KiB cell.
    pub(crate) fn quick(servers: Vec<String>, secs: f64, rounds: u32) -> EchoMatrix {
        EchoMatrix {
            conns: QUICK_CONNS.to_vec(),
            lens: LENS.to_vec(),
            servers,
            secs,
            rounds,
            extra: vec![BIG_CELL],
        }
    }

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
pub(crate) struct EchoOutcome {
    /// Every measurement.
    pub results: Vec<EchoResult>,
    /// Runs that could not be measured, with why.
    pub failures: Vec<String>,
    /// Servers that cannot run here (a peer whose binary could not be built), one line each.
    pub skipped: Vec<String>,
}

crate::compare::matrix::measured!(EchoResult, requests);

/// Whether a result is of cell (`conns`, `len`).
pub(crate) fn in_cell(conns: usize, len: usize) -> impl Fn(&EchoResult) -> bool + Copy {
    move |r| r.conns == conns && r.len_bytes == len
}

/// Checks `--servers` and returns it (default: all of them).
pub(crate) fn parse_servers(list: Option<Vec<String>>) -> io::Result<Vec<String>> {
    parse_server_list(list, &SERVERS)
}

/// The suite's servers: `--servers` checked, the peers' left out with `no_peers`.
pub(crate) fn suite_servers(list: Option<Vec<String>>, no_peers: bool) -> io::Result<Vec<String>> {
    let mut servers = parse_servers(list)?;
    if no_peers {
        servers.retain(|s| !PEER_SERVERS.contains(&s.as_str()));
    }
    Ok(servers)
}

/// The exit status of a matrix: an error if a run failed or counted errors.
pub(crate) fn finish_status(results: &[EchoResult], failures: &[String]) -> io::Result<()> {
    let with_errors = results
        .iter()
        .filter(|r| r.errors > 0 || r.requests == 0)
        .count();
    if results.is_empty() || !failures.is_empty() || with_errors > 0 {
        return Err(io::Error::other(format!(
            "{} run(s) measured, {} failed, {} counted errors or no verified request{}",
            results.len(),
            failures.len(),
            with_errors,
            failures
                .first()
                .map_or(String::new(), |f| format!("; first failure: {f}"))
        )));
    }
    Ok(())
}

/// One measurement against a running server at `target` (the plan's `server_pid`: its PID,
/// for its CPU time and syscalls); the client unpinned.
pub(crate) fn run_external(
    target: SocketAddr,
    plan: &EchoPlan,
    secs: f64,
    out: &Out,
) -> io::Result<EchoResult> {
    let cfg = ClientConfig {
        addr: target,
        conns: plan.conns.unwrap_or(50),
        len: plan.len.unwrap_or(128),
        secs: Duration::from_secs_f64(secs),
    };
    out.start(&format!("echo {target}"), secs);
    let mut probe = None;
    let outcome = echo_client::run_client(&cfg, None, || {
        probe = plan.server_pid.map(|pid| ServerProbe::start(pid, cfg.secs));
    })?;
    let metrics = probe
        .map(|p| p.finish(outcome.wall, outcome.requests))
        .unwrap_or_default();
    Ok(make_result("external", 0, &cfg, &outcome, metrics, false))
}

/// Runs every cell `rounds` times, the servers in the same order within each round. Failed
/// runs are recorded in `failures`; the matrix goes on.
pub(crate) fn run_matrix(m: &EchoMatrix, out: &Out) -> EchoOutcome {
    let (server_cpu, client_cpu) = crate::machine::pin_plan();
    let mut skipped = Vec::new();
    // The peers' servers need the hoop-peer binary: built now, or skipped with a line.
    let mut servers = m.servers.clone();
    if servers.iter().any(|s| PEER_SERVERS.contains(&s.as_str())) {
        if let Err(why) = crate::target::peers::binary(out) {
            servers.retain(|s| {
                let peer = PEER_SERVERS.contains(&s.as_str());
                if peer {
                    let line = format!("{s}: skipped: {why}");
                    out.human(&line);
                    skipped.push(line);
                }
                !peer
            });
        }
    }
    let cells = m.cells();
    let matrix = Matrix {
        targets: &servers,
        cells: &cells,
        rounds: m.rounds,
        order: Order::Same,
        run_secs: m.secs + RUN_OVERHEAD_SECS,
        unit: "request",
    };
    let o = matrix.run(
        out,
        |server, &(conns, len), round| {
            format!("echo {server}: c={conns} l={len} round {}", round + 1)
        },
        |server, &(conns, len), round| {
            let cfg = ClientConfig {
                addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                conns,
                len,
                secs: Duration::from_secs_f64(m.secs),
            };
            run_one(server, round, cfg, server_cpu, client_cpu)
        },
    );
    EchoOutcome {
        results: o.results,
        failures: o.failures,
        skipped,
    }
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
        ServerChild::spawn_cmd(server, cmd, server_cpu, Ready::ListeningLine)?
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

/// The record of one run.
fn make_result(
    server: &str,
    round: u32,
    cfg: &ClientConfig,
    o: &ClientOutcome,
    m: ServerMetrics,
    pinned: bool,
) -> EchoResult {
    let secs = cfg.secs.as_secs_f64();
    let client_cpu_pct = usage::cpu_pct(o.cpu, o.wall);
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
        client_bound: usage::client_bound(client_cpu_pct, m.cpu_pct),
        pinned,
        reconnects: o.reconnects,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_parse_and_keep_their_order() {
        assert_eq!(parse_servers(None).unwrap(), SERVERS.to_vec());
        let l = parse_servers(Some(vec!["tokio".into(), " HOOP-EPOLL".into()])).unwrap();
        assert_eq!(l, ["tokio", "hoop-epoll"]);
        assert!(parse_servers(Some(vec!["nginx".into()])).is_err());
        assert_eq!(
            suite_servers(None, true).unwrap(),
            ["hoop", "hoop-basic", "hoop-epoll", "tokio", "monoio"]
        );
    }

    #[test]
    fn the_quick_matrix_ends_with_the_big_cell() {
        let m = EchoMatrix::quick(vec!["hoop".into()], 1.0, 2);
        assert_eq!(
            m.cells(),
            [(50, 128), (50, 512), (500, 128), (500, 512), BIG_CELL]
        );
        let plan = EchoPlan {
            quick: true,
            rounds: 2,
            ..EchoPlan::default()
        };
        assert_eq!(plan.secs().unwrap(), 3.0);
        assert_eq!(plan.matrix(3.0).unwrap().cells().len(), 4);
        let one = EchoPlan { rounds: 1, ..plan };
        assert!(one.matrix(3.0).is_err());
    }
}
