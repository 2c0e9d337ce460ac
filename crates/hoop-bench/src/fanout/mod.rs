//! `hoop bench fanout`: a chat server's broadcast, side by side.
//!
//! CONNS clients connect to a line chat server (`hoop serve fanout`): every message a client
//! sends goes to every connected client, the sender included, so each message makes CONNS
//! deliveries. Every delivery is verified by its receiver (per sender, in order, every byte:
//! [`verify`]); the load is bounded by a window of messages in flight per client ([`client`]).
//! The servers are child processes pinned to one CPU, the client a hoop runtime thread pinned to
//! the other, as in `hoop bench echo`: hoop on io_uring (`hoop`), hoop on epoll (`hoop-epoll`,
//! the same server code on the other driver) and tokio (current-thread runtime). Each round runs
//! every server once, in an order reversed every other round (A B C, C B A, ...); with `--hog`
//! every round also runs every server with a CPU hog on the server's core ([`hog`]). Ratios are
//! taken pair by pair within a round, then their median.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::Command;
use std::time::Duration;

use crate::measure::latency::{self as stats, median};
use crate::measure::usage::{ServerMetrics, ServerProbe};
use crate::plan::{check_conns, check_secs, invalid};
use crate::record::fanout::FanoutResult;
use crate::record::{self, Latency};
use crate::report::output::Out;
use crate::target::child::{Ready, ServerChild};

use crate::load::fanout::client::{self, FanoutConfig, FanoutOutcome};
use crate::load::fanout::{hog, verify};

/// The servers, in the order they run in even rounds.
pub(crate) const SERVERS: [&str; 3] = ["hoop", "hoop-epoll", "tokio"];
/// Most connections `-c` accepts (deliveries grow with its square).
pub(crate) const MAX_FANOUT_CONNS: usize = 10_000;
/// Most messages in flight over all connections (`-c` x `--window`).
const MAX_IN_FLIGHT: usize = 1 << 20;
/// Planned overhead of one run (start, connect, probe, stop), for the progress bar.
pub(crate) const RUN_OVERHEAD_SECS: f64 = 0.3;
/// Longest a hog may run past its run's window (the run's own phases are bounded below this).
const HOG_SLACK: Duration = Duration::from_secs(60);

/// How a server is named in tables (its JSON `server` field stays the short name).
pub(crate) fn label(server: &str) -> &str {
    match server {
        "hoop" => "hoop (io_uring)",
        "hoop-epoll" => "hoop (epoll)",
        other => other,
    }
}

/// The load a row ran under, as tables say it.
fn load_label(hog: bool) -> &'static str {
    if hog {
        "CPU hog on the server's core"
    } else {
        "unloaded"
    }
}

/// Arguments of `hoop bench fanout`.
#[derive(Debug, clap::Args)]
pub struct FanoutArgs {
    /// Connections; each sends messages and receives every connection's (its own included).
    #[arg(
        short = 'c',
        long = "conns",
        value_name = "CONNS",
        default_value_t = 200
    )]
    pub conns: usize,
    /// Seconds per run.
    #[arg(short = 't', long = "secs", value_name = "SECS", default_value_t = 5.0)]
    pub secs: f64,
    /// Bytes per message, its newline included (32 to 65536).
    #[arg(short = 'l', long = "len", value_name = "LEN", default_value_t = 64)]
    pub len: usize,
    /// Messages each connection keeps in flight (sent and not yet delivered to every
    /// connection); bounds the load to CONNS x WINDOW messages.
    #[arg(long, value_name = "W", default_value_t = 4)]
    pub window: u32,
    /// The servers to compare, comma-separated (hoop = io_uring, hoop-epoll, tokio).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// Rounds: each runs every server once, the order reversed every other round.
    #[arg(long, value_name = "R", default_value_t = 2)]
    pub rounds: u32,
    /// Also run every server with a CPU hog on its core: a busy-looping thread pinned to the
    /// server's CPU at normal priority; both unloaded and hogged rows are reported.
    #[arg(long)]
    pub hog: bool,
    /// Load a running chat server (IP:PORT) instead of starting the servers side by side.
    #[arg(long, value_name = "IP:PORT", conflicts_with_all = ["servers", "hog"])]
    pub addr: Option<String>,
    /// With --addr: the server's PID, to measure its CPU time and syscalls per delivery.
    #[arg(long, value_name = "PID", requires = "addr")]
    pub server_pid: Option<u32>,
}

/// A fan-out plan.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
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

impl Plan {
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
    fn loads(&self) -> Vec<bool> {
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

/// What a plan produced.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Every measurement.
    pub results: Vec<FanoutResult>,
    /// Runs that could not be measured, with why.
    pub failures: Vec<String>,
}

impl Outcome {
    /// Results that counted errors or verified no delivery.
    pub(crate) fn bad(&self) -> usize {
        self.results
            .iter()
            .filter(|r| r.errors > 0 || r.deliveries == 0)
            .count()
    }
}

/// Checks `--servers` and returns it (default: all three).
pub(crate) fn parse_servers(list: Option<Vec<String>>) -> io::Result<Vec<String>> {
    crate::plan::parse_server_list(list, &SERVERS)
}

/// Runs `hoop bench fanout`.
pub fn run_fanout_command(args: FanoutArgs, json: bool) -> io::Result<()> {
    let plan = Plan {
        conns: args.conns,
        len: args.len,
        window: args.window,
        secs: args.secs,
        rounds: args.rounds,
        servers: parse_servers(args.servers)?,
        hog: args.hog,
    };
    plan.check()?;
    crate::machine::raise_nofile_limit();
    if let Some(addr) = &args.addr {
        return run_external(&plan, addr, args.server_pid, json);
    }
    let out = Out::new(json, plan.planned_secs());
    out.note(&plan.describe());
    let outcome = run_plan(&plan, &out);
    out.finish();
    out.human(&summary_table(&outcome.results, &plan.servers));
    for line in ratio_lines(&outcome.results) {
        out.human(&line);
    }
    finish_status(&outcome)
}

/// `--addr`: `rounds` measurements of a running server, the client unpinned.
fn run_external(plan: &Plan, addr: &str, pid: Option<u32>, json: bool) -> io::Result<()> {
    let target: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| invalid(format!("cannot connect to {addr}: bad address ({e})")))?
        .next()
        .ok_or_else(|| invalid(format!("cannot connect to {addr}: it resolves to nothing")))?;
    let out = Out::new(json, plan.rounds as f64 * (plan.secs + RUN_OVERHEAD_SECS));
    let mut o = Outcome::default();
    for round in 0..plan.rounds {
        let cfg = FanoutConfig {
            addr: target,
            conns: plan.conns,
            len: plan.len,
            window: plan.window,
            secs: Duration::from_secs_f64(plan.secs),
        };
        out.start(&format!("fanout {target} round {}", round + 1), plan.secs);
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
        out.done(plan.secs + RUN_OVERHEAD_SECS);
    }
    out.finish();
    out.human(&summary_table(&o.results, &["external".to_string()]));
    finish_status(&o)
}

/// The exit status: an error if a run failed, counted errors or verified no delivery.
pub(crate) fn finish_status(o: &Outcome) -> io::Result<()> {
    let bad = o.bad();
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

/// Runs every server `rounds` times (and hogged, with `hog`), the order reversed every other
/// round. Failed runs are recorded; the plan goes on.
pub(crate) fn run_plan(plan: &Plan, out: &Out) -> Outcome {
    let (server_cpu, client_cpu) = crate::machine::pin_plan();
    let mut o = Outcome::default();
    for round in 0..plan.rounds {
        let mut order: Vec<&String> = plan.servers.iter().collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for hog in plan.loads() {
            for server in &order {
                let what = format!(
                    "fanout {server}{}: c={} l={} round {}",
                    if hog { " (hog)" } else { "" },
                    plan.conns,
                    plan.len,
                    round + 1
                );
                out.start(&what, plan.secs + RUN_OVERHEAD_SECS);
                match run_one(plan, server, round, hog, server_cpu, client_cpu) {
                    Ok(r) => {
                        out.measurement(&r);
                        out.warn_run(
                            &what,
                            r.deliveries,
                            "delivery",
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
                out.done(plan.secs + RUN_OVERHEAD_SECS);
            }
        }
    }
    o
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
    plan: &Plan,
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
    let client_cpu_pct = record::cpu_pct(o.cpu, o.wall);
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
        client_bound: !hog && record::client_bound(client_cpu_pct, m.cpu_pct),
        hog_cpu_pct,
        connected: o.connected,
        pinned,
    }
}

/// Median over rounds of `f` for `server` under load `hog`.
fn med(
    results: &[FanoutResult],
    server: &str,
    hog: bool,
    f: impl Fn(&FanoutResult) -> Option<f64>,
) -> Option<f64> {
    let v: Vec<f64> = results
        .iter()
        .filter(|r| r.server == server && r.hog == hog)
        .filter_map(f)
        .collect();
    median(&v)
}

/// Median over rounds of `num`'s `f` / `base`'s `f`, paired within each round and load.
pub(crate) fn pair_ratio(
    results: &[FanoutResult],
    num: &str,
    base: &str,
    hog: bool,
    f: impl Fn(&FanoutResult) -> Option<f64>,
) -> Option<f64> {
    let ratios: Vec<f64> = results
        .iter()
        .filter(|r| r.server == num && r.hog == hog)
        .filter_map(|n| {
            let b = results
                .iter()
                .find(|r| r.server == base && r.hog == hog && r.round == n.round)?;
            let (x, y) = (f(n)?, f(b)?);
            (y > 0.0).then(|| x / y)
        })
        .collect();
    median(&ratios)
}

/// The loads present in `results`: unloaded first.
fn loads_of(results: &[FanoutResult]) -> Vec<bool> {
    [false, true]
        .into_iter()
        .filter(|&h| results.iter().any(|r| r.hog == h))
        .collect()
}

/// The table (markdown): medians over rounds, and hoop (io_uring)'s ratios to every server,
/// paired within a round.
pub(crate) fn summary_table(results: &[FanoutResult], servers: &[String]) -> String {
    let f0 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
    let f1 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let f2 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    let f3 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
    let reference = servers.iter().any(|s| s == "hoop");
    let mut s = String::from(
        "| load | server | deliveries/s | messages/s | p50 µs | p99 µs | server CPU µs/delivery | \
         server CPU % | syscalls/delivery | client CPU % | hog CPU % | errors | client-bound runs |",
    );
    if reference {
        s.push_str(" hoop (io_uring)/this deliveries/s | hoop (io_uring)/this CPU/delivery |");
    }
    s.push_str("\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    if reference {
        s.push_str("---:|---:|");
    }
    s.push('\n');
    for hog in loads_of(results) {
        for server in servers {
            let runs: Vec<&FanoutResult> = results
                .iter()
                .filter(|r| &r.server == server && r.hog == hog)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let m = |f: fn(&FanoutResult) -> Option<f64>| med(results, server, hog, f);
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} |",
                load_label(hog),
                label(server),
                f0(m(|r| Some(r.deliveries_per_sec))),
                f0(m(|r| Some(r.messages_per_sec))),
                f1(m(|r| r.latency.p50_us)),
                f1(m(|r| r.latency.p99_us)),
                f3(m(|r| r.cpu_us_per_delivery)),
                f1(m(|r| r.server_cpu_pct)),
                f3(m(|r| r.syscalls_per_delivery)),
                f1(m(|r| Some(r.client_cpu_pct))),
                f1(m(|r| r.hog_cpu_pct)),
                runs.iter().map(|r| r.errors).sum::<u64>(),
                runs.iter().filter(|r| r.client_bound).count(),
                runs.len(),
            ));
            if reference {
                let (d, c) = if server == "hoop" {
                    ("1.00".to_string(), "1.00".to_string())
                } else {
                    (
                        f2(pair_ratio(results, "hoop", server, hog, |r| {
                            Some(r.deliveries_per_sec)
                        })),
                        f2(pair_ratio(results, "hoop", server, hog, |r| {
                            r.cpu_us_per_delivery
                        })),
                    )
                };
                s.push_str(&format!(" {d} | {c} |"));
            }
            s.push('\n');
        }
    }
    s
}

/// hoop (io_uring)/hoop (epoll) and hoop (io_uring)/tokio, per load: deliveries/s and server
/// CPU per delivery, medians of per-round ratios.
pub(crate) fn ratio_lines(results: &[FanoutResult]) -> Vec<String> {
    let mut lines = Vec::new();
    for hog in loads_of(results) {
        for base in ["hoop-epoll", "tokio"] {
            let d = pair_ratio(results, "hoop", base, hog, |r| Some(r.deliveries_per_sec));
            let c = pair_ratio(results, "hoop", base, hog, |r| r.cpu_us_per_delivery);
            if let Some(d) = d {
                let cpu = c.map_or(String::new(), |c| {
                    format!(", server CPU per delivery {c:.2}x")
                });
                lines.push(format!(
                    "- fanout ({}): hoop (io_uring)/{}: deliveries/s {d:.2}x{cpu}",
                    load_label(hog),
                    label(base)
                ));
            }
        }
    }
    lines
}

/// The report's section: what ran, the table, the ratios.
pub(crate) fn section(plan: &Plan, o: &Outcome) -> String {
    let mut s = format!(
        "## Fan-out (chat broadcast)\n\n`hoop serve fanout` (a line chat server: every line goes \
         to every connected client, the sender included; one `tokio::sync::broadcast` channel, a \
         reader and a writer task per connection, one thread) on hoop io_uring, on hoop epoll \
         (the same code) and on tokio's current-thread runtime, each a child process pinned like \
         the echo servers; the client (`hoop bench fanout`, one hoop thread on the other CPU) \
         verifies every delivery per sender in order, byte for byte. {}. Values are medians over \
         rounds; ratios are taken pair by pair within a round.\n\n",
        plan.describe()
    );
    if o.results.is_empty() {
        s.push_str("No fan-out measurement.\n\n");
    } else {
        s.push_str(&summary_table(&o.results, &plan.servers));
        s.push('\n');
        for l in ratio_lines(&o.results) {
            s.push_str(&l);
            s.push('\n');
        }
        s.push('\n');
    }
    for f in &o.failures {
        s.push_str(&format!("- failed: {f}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(server: &str, round: u32, hog: bool, dps: f64, cpu: f64) -> FanoutResult {
        FanoutResult {
            bench: "fanout",
            server: server.to_string(),
            addr: "127.0.0.1:1".into(),
            round,
            conns: 10,
            len: 64,
            window: 4,
            hog,
            secs: 1.0,
            deliveries: dps as u64,
            messages: dps as u64 / 10,
            errors: 0,
            first_error: None,
            deliveries_per_sec: dps,
            messages_per_sec: dps / 10.0,
            latency: Latency {
                p50_us: Some(10.0),
                p99_us: Some(20.0),
                p999_us: Some(30.0),
                max_us: Some(40.0),
            },
            cpu_us_per_delivery: Some(cpu),
            server_cpu_pct: Some(99.0),
            syscalls_per_delivery: None,
            client_cpu_pct: 50.0,
            client_bound: false,
            hog_cpu_pct: hog.then_some(50.0),
            connected: 10,
            pinned: true,
        }
    }

    #[test]
    fn ratios_pair_within_round_and_load() {
        let servers: Vec<String> = SERVERS.iter().map(|s| s.to_string()).collect();
        let mut results = Vec::new();
        for round in 0..2 {
            for hog in [false, true] {
                let k = if hog { 0.5 } else { 1.0 };
                results.push(result("hoop", round, hog, 300.0 * k, 1.0));
                results.push(result("hoop-epoll", round, hog, 200.0 * k, 2.0));
                results.push(result("tokio", round, hog, 100.0 * k, 4.0));
            }
        }
        let t = summary_table(&results, &servers);
        let row = |load: &str, name: &str| {
            t.lines()
                .find(|l| l.starts_with(&format!("| {load} | {name} |")))
                .unwrap_or_else(|| panic!("no {load}/{name} row: {t}"))
                .to_string()
        };
        assert!(
            row("unloaded", "hoop (epoll)").ends_with("| 1.50 | 0.50 |"),
            "{t}"
        );
        assert!(row("unloaded", "tokio").ends_with("| 3.00 | 0.25 |"), "{t}");
        assert!(
            row("CPU hog on the server's core", "tokio").ends_with("| 3.00 | 0.25 |"),
            "{t}"
        );
        let header_cols = t.lines().next().unwrap().matches('|').count();
        for line in t.lines().skip(1) {
            assert_eq!(line.matches('|').count(), header_cols, "{line}");
        }
        let lines = ratio_lines(&results);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].contains("hoop (io_uring)/hoop (epoll): deliveries/s 1.50x"));
        assert!(lines[3].contains("CPU hog"), "{lines:?}");
    }

    #[test]
    fn plans_are_checked() {
        let ok = Plan {
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
            Plan {
                len: 31,
                ..ok.clone()
            },
            Plan {
                window: 0,
                ..ok.clone()
            },
            Plan {
                conns: 0,
                ..ok.clone()
            },
            Plan {
                conns: 10_001,
                ..ok.clone()
            },
            Plan {
                rounds: 0,
                ..ok.clone()
            },
            Plan {
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
