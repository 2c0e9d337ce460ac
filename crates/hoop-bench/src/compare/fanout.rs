//! The fan-out comparison: the chat servers (`hoop serve fanout` on io_uring and on epoll,
//! and on tokio), the loads (unloaded, a CPU hog on the server's core) as cells, rounds in
//! alternating order, and one run; also the rounds against a server given by address.

use std::io;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use crate::compare::matrix::{Matrix, Order, Outcome};
use crate::load::fanout::client::{self, FanoutConfig, FanoutOutcome};
use crate::load::fanout::{hog, verify};
use crate::measure::latency as stats;
use crate::measure::usage::{ServerMetrics, ServerProbe};
use crate::output::Out;
use crate::plan::check::{check_conns, check_secs, invalid, parse_server_list};
use crate::record::fanout::FanoutResult;
use crate::record::usage::{self, Latency};
use crate::target::child::{Ready, ServerChild};

/// The servers, in the order they run in even rounds.
pub(crate) const SERVERS: [&str; 3] = ["hoop", "hoop-epoll", "tokio"];
/// Most connections `-c` accepts (deliveries grow with its square).
const MAX_FANOUT_CONNS: usize = 10_000;
/// Most messages in flight over all connections (`-c` x `--window`).
const MAX_IN_FLIGHT: usize = 1 << 20;
/// Planned overhead of one run (start, connect, probe, stop), for the progress bar.
const RUN_OVERHEAD_SECS: f64 = 0.3;
/// Longest a hog may run past its run's window (the run's own phases are bounded below this).
const HOG_SLACK: Duration = Duration::from_secs(60);
/// Connections of the suite's short run.
const SUITE_CONNS: usize = 200;

/// What `hoop bench fanout` is asked: the servers side by side, or one server by address.
#[derive(Debug, Clone)]
pub struct FanoutPlan {
    /// Connections.
    pub conns: usize,
    /// Seconds per run.
    pub secs: f64,
    /// Bytes per message, newline included.
    pub len: usize,
    /// Messages each connection keeps in flight.
    pub window: u32,
    /// The servers to compare (default: all).
    pub servers: Option<Vec<String>>,
    /// Rounds.
    pub rounds: u32,
    /// Also every server with a CPU hog on its core.
    pub hog: bool,
    /// A running chat server to load (IP:PORT) instead.
    pub addr: Option<String>,
    /// With `addr`: the server's PID, to measure its CPU time and syscalls.
    pub server_pid: Option<u32>,
}

impl FanoutPlan {
    /// The matrix this plan asks for, checked.
    pub(crate) fn matrix(&self) -> io::Result<FanoutMatrix> {
        let m = FanoutMatrix {
            conns: self.conns,
            len: self.len,
            window: self.window,
            secs: self.secs,
            rounds: self.rounds,
            servers: parse_servers(self.servers.clone())?,
            hog: self.hog,
        };
        m.check()?;
        Ok(m)
    }
}

/// A fan-out matrix: servers x loads (unloaded, hogged) x rounds.
#[derive(Debug, Clone)]
pub(crate) struct FanoutMatrix {
    /// Connections.
    pub conns: usize,
    /// Bytes per message.
    pub len: usize,
    /// Messages in flight per connection.
    pub window: u32,
    /// Seconds per run.
    pub secs: f64,
    /// Rounds.
    pub rounds: u32,
    /// Servers, in even rounds' order.
    pub servers: Vec<String>,
    /// Also the hogged rows.
    pub hog: bool,
}

impl FanoutMatrix {
    /// The suite's short run: 200 connections, 64-byte messages, window 4, 2 rounds of every
    /// server, hogged too where a second CPU lets the hog share the server's core alone.
    pub(crate) fn quick(secs: f64) -> FanoutMatrix {
        FanoutMatrix {
            conns: SUITE_CONNS,
            len: 64,
            window: 4,
            secs,
            rounds: 2,
            servers: SERVERS.iter().map(|s| s.to_string()).collect(),
            hog: crate::machine::pin_plan().0.is_some(),
        }
    }

    /// Checks every number.
    pub(crate) fn check(&self) -> io::Result<()> {
        check_conns(self.conns)?;
        if self.conns > MAX_FANOUT_CONNS {
            return Err(invalid(format!(
                "-c/--conns must be at most {MAX_FANOUT_CONNS} for fanout (got {}): every \
                 message goes to every connection",
                self.conns
            )));
        }
        check_secs("-t/--secs", self.secs)?;
        if !(verify::MIN_LEN..=verify::MAX_LEN).contains(&self.len) {
            return Err(invalid(format!(
                "-l/--len must be between {} and {} bytes for fanout (a message carries a \
                 {}-byte header and a newline); got {}",
                verify::MIN_LEN,
                verify::MAX_LEN,
                verify::HEADER,
                self.len
            )));
        }
        if self.window == 0 || self.window > 1024 {
            return Err(invalid(format!(
                "--window must be between 1 and 1024 messages (got {})",
                self.window
            )));
        }
        if self.conns * self.window as usize > MAX_IN_FLIGHT {
            return Err(invalid(format!(
                "-c {} x --window {} is more than {MAX_IN_FLIGHT} messages in flight",
                self.conns, self.window
            )));
        }
        if self.rounds == 0 || self.rounds > 100 {
            return Err(invalid(format!(
                "--rounds must be between 1 and 100 (got {})",
                self.rounds
            )));
        }
        Ok(())
    }

    /// The loads each round runs: unloaded, then (with `--hog`) hogged.
    pub(crate) fn loads(&self) -> Vec<bool> {
        if self.hog {
            vec![false, true]
        } else {
            vec![false]
        }
    }

    /// Planned seconds, for progress bars.
    pub(crate) fn planned_secs(&self) -> f64 {
        let runs = self.servers.len() * self.rounds as usize * self.loads().len();
        runs as f64 * (self.secs + RUN_OVERHEAD_SECS)
    }

    /// The broadcast channel's capacity the servers get: twice what can be in flight.
    fn capacity(&self) -> usize {
        (self.conns * self.window as usize * 2)
            .next_power_of_two()
            .max(1024)
    }

    /// One line on what runs, for the output's head.
    pub(crate) fn describe(&self) -> String {
        let (s, c) = crate::machine::pin_plan();
        let pin = match (s, c) {
            (Some(s), Some(c)) => format!("server pinned to CPU {s}, client to CPU {c}"),
            _ => "unpinned (fewer than 2 CPUs)".to_string(),
        };
        let hog = if self.hog {
            match s {
                Some(s) => format!(
                    "; hogged rows: a busy-looping thread pinned to CPU {s} (the server's), \
                     normal priority (SCHED_OTHER, not reniced), for the whole run"
                ),
                None => "; hogged rows need 2 CPUs".to_string(),
            }
        } else {
            String::new()
        };
        format!(
            "fanout: {} conns x {} B messages, window {} per conn, {} s per run, {} round(s) \
             (order reversed every other round), each message to every connection, sender \
             included; {pin}{hog}",
            self.conns, self.len, self.window, self.secs, self.rounds
        )
    }
}

crate::compare::matrix::measured!(FanoutResult, deliveries);

/// Whether a result ran under load `hog`.
pub(crate) fn in_load(hog: bool) -> impl Fn(&FanoutResult) -> bool + Copy {
    move |r| r.hog == hog
}

/// Checks `--servers` and returns it (default: all three).
pub(crate) fn parse_servers(list: Option<Vec<String>>) -> io::Result<Vec<String>> {
    parse_server_list(list, &SERVERS)
}

/// Results that counted errors or verified no delivery.
pub(crate) fn bad(results: &[FanoutResult]) -> usize {
    results
        .iter()
        .filter(|r| r.errors > 0 || r.deliveries == 0)
        .count()
}

/// The exit status: an error if a run failed, counted errors or verified no delivery.
pub(crate) fn finish_status(o: &Outcome<FanoutResult>) -> io::Result<()> {
    let bad = bad(&o.results);
    if o.results.is_empty() || !o.failures.is_empty() || bad > 0 {
        let first = o
            .failures
            .first()
            .cloned()
            .or_else(|| o.results.iter().find_map(|r| r.first_error.clone()));
        return Err(io::Error::other(format!(
            "fanout: {} run(s) measured, {} failed, {} counted errors or no verified delivery{}",
            o.results.len(),
            o.failures.len(),
            bad,
            first.map_or(String::new(), |f| format!("; first: {f}"))
        )));
    }
    Ok(())
}

/// Planned seconds of `rounds` runs against a server given by address.
pub(crate) fn external_secs(m: &FanoutMatrix) -> f64 {
    m.rounds as f64 * (m.secs + RUN_OVERHEAD_SECS)
}

/// `rounds` measurements of a running server at `target` (`pid`: its PID, for its CPU time
/// and syscalls), the client unpinned. A run that cannot start ends them all.
pub(crate) fn run_external(
    m: &FanoutMatrix,
    target: SocketAddr,
    pid: Option<u32>,
    out: &Out,
) -> io::Result<Outcome<FanoutResult>> {
    let mut o = Outcome::default();
    for round in 0..m.rounds {
        let cfg = FanoutConfig {
            addr: target,
            conns: m.conns,
            len: m.len,
            window: m.window,
            secs: Duration::from_secs_f64(m.secs),
        };
        out.start(&format!("fanout {target} round {}", round + 1), m.secs);
        let mut probe = None;
        let outcome = client::run_client(&cfg, None, || {
            probe = pid.map(|p| ServerProbe::start(p, cfg.secs));
        })?;
        let metrics = probe
            .map(|p| p.finish(outcome.wall, outcome.deliveries))
            .unwrap_or_default();
        let r = make_result("external", round, &cfg, &outcome, metrics, None, false);
        out.measurement(&r);
        if r.errors > 0 {
            out.note(&format!(
                "warning: round {}: {} error(s), first: {}",
                round + 1,
                r.errors,
                r.first_error.as_deref().unwrap_or("?")
            ));
        }
        o.results.push(r);
        out.done(m.secs + RUN_OVERHEAD_SECS);
    }
    Ok(o)
}

/// Runs every load (unloaded, then hogged with `hog`), `rounds` times each, the servers'
/// order reversed every other round. Failed runs are recorded; the matrix goes on.
pub(crate) fn run_matrix(m: &FanoutMatrix, out: &Out) -> Outcome<FanoutResult> {
    let (server_cpu, client_cpu) = crate::machine::pin_plan();
    let loads = m.loads();
    let matrix = Matrix {
        targets: &m.servers,
        cells: &loads,
        rounds: m.rounds,
        order: Order::Alternate,
        run_secs: m.secs + RUN_OVERHEAD_SECS,
        unit: "delivery",
    };
    matrix.run(
        out,
        |server, &hog, round| {
            format!(
                "fanout {server}{}: c={} l={} round {}",
                if hog { " (hog)" } else { "" },
                m.conns,
                m.len,
                round + 1
            )
        },
        |server, &hog, round| run_one(m, server, round, hog, server_cpu, client_cpu),
    )
}

/// The command that starts server `name`.
fn server_command(name: &str, capacity: usize) -> io::Result<Command> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["serve", "fanout", "--addr", "127.0.0.1:0", "--capacity"])
        .arg(capacity.to_string());
    match name {
        "hoop" => cmd.args(["--server", "hoop", "--driver", "uring"]),
        "hoop-epoll" => cmd.args(["--server", "hoop", "--driver", "epoll"]),
        "tokio" => cmd.args(["--server", "tokio"]),
        other => return Err(invalid(format!("unknown fanout server {other}"))),
    };
    Ok(cmd)
}

/// One server, one load: start it (and the hog), load it, stop both.
fn run_one(
    plan: &FanoutMatrix,
    server: &str,
    round: u32,
    hog: bool,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
) -> io::Result<FanoutResult> {
    let mut child = ServerChild::spawn_cmd(
        server,
        server_command(server, plan.capacity())?,
        server_cpu,
        Ready::ListeningLine,
    )?;
    let hog = if hog {
        let cpu = server_cpu.ok_or_else(|| {
            io::Error::other(
                "the CPU hog needs 2 CPUs (server and hog on one, client on the other)",
            )
        })?;
        Some(hog::Hog::start(
            cpu,
            Duration::from_secs_f64(plan.secs) + HOG_SLACK,
        )?)
    } else {
        None
    };
    let cfg = FanoutConfig {
        addr: child.addr,
        conns: plan.conns,
        len: plan.len,
        window: plan.window,
        secs: Duration::from_secs_f64(plan.secs),
    };
    let pid = child.pid();
    let mut probe = None;
    let outcome = client::run_client(&cfg, client_cpu, || {
        probe = Some(ServerProbe::start(pid, cfg.secs));
    });
    let hog_cpu_pct = hog.and_then(hog::Hog::stop);
    let outcome = outcome?;
    let metrics = probe
        .map(|p| p.finish(outcome.wall, outcome.deliveries))
        .unwrap_or_default();
    child.check_alive()?;
    drop(child);
    let pinned = server_cpu.is_some() && client_cpu.is_some();
    Ok(make_result(
        server,
        round,
        &cfg,
        &outcome,
        metrics,
        hog_cpu_pct,
        pinned,
    ))
}

/// The record of one run.
fn make_result(
    server: &str,
    round: u32,
    cfg: &FanoutConfig,
    o: &FanoutOutcome,
    m: ServerMetrics,
    hog_cpu_pct: Option<f64>,
    pinned: bool,
) -> FanoutResult {
    let secs = cfg.secs.as_secs_f64();
    let client_cpu_pct = usage::cpu_pct(o.cpu, o.wall);
    let hog = hog_cpu_pct.is_some();
    FanoutResult {
        bench: "fanout",
        server: server.to_string(),
        addr: cfg.addr.to_string(),
        round,
        conns: cfg.conns,
        len: cfg.len,
        window: cfg.window,
        hog,
        secs,
        deliveries: o.deliveries,
        messages: o.messages,
        errors: o.errors,
        first_error: o.first_error.clone(),
        deliveries_per_sec: stats::round3(o.deliveries as f64 / secs),
        messages_per_sec: stats::round3(o.messages as f64 / secs),
        latency: Latency::of(&o.hist),
        cpu_us_per_delivery: m.cpu_us_per_req,
        server_cpu_pct: m.cpu_pct,
        syscalls_per_delivery: m.syscalls_per_req,
        client_cpu_pct,
        client_bound: !hog && usage::client_bound(client_cpu_pct, m.cpu_pct),
        hog_cpu_pct,
        connected: o.connected,
        pinned,
        reconnects: o.reconnects,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_checked() {
        let ok = FanoutMatrix {
            conns: 200,
            len: 64,
            window: 4,
            secs: 2.0,
            rounds: 2,
            servers: vec!["hoop".into()],
            hog: true,
        };
        assert!(ok.check().is_ok());
        assert_eq!(ok.loads(), [false, true]);
        assert_eq!(ok.capacity(), 2048);
        for bad in [
            FanoutMatrix {
                len: 31,
                ..ok.clone()
            },
            FanoutMatrix {
                window: 0,
                ..ok.clone()
            },
            FanoutMatrix {
                conns: 0,
                ..ok.clone()
            },
            FanoutMatrix {
                conns: 10_001,
                ..ok.clone()
            },
            FanoutMatrix {
                rounds: 0,
                ..ok.clone()
            },
            FanoutMatrix {
                secs: 0.0,
                ..ok.clone()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(parse_servers(Some(vec!["monoio".into()])).is_err());
        assert_eq!(
            parse_servers(Some(vec!["TOKIO".into(), "hoop".into()])).unwrap(),
            ["tokio", "hoop"]
        );
    }
}
