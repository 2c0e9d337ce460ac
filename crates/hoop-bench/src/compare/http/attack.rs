//! `hoop bench http --attack`: each server in turn, pinned as in the side-by-side runs, loaded
//! without attack, then again one second after the slowloris and idle attackers connected,
//! with a fresh client asking meanwhile; RSS before, during and after, connections held.
//! Every phase is bounded in time; everything is on 127.0.0.1.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::load::http::attack::{Attacker, FILE_BYTES};
use crate::load::http::client::{self, HttpClientConfig, HttpOutcome};
use crate::load::http::files::{file_name, make_files};
use crate::load::http::fresh::FreshClient;
use crate::machine::proc::{listen_overflows, process_cpu, rss_bytes};
use crate::measure::latency as stats;
use crate::output::Out;
use crate::plan::http::HttpPlan;
use crate::plan::{check_secs, invalid};
use crate::record::attack::AttackResult;
use crate::target::child::ServerChild;
use crate::target::http::start_server;

/// The servers of `--attack` by default, in run order.
const ATTACK_SERVERS: [&str; 3] = ["hoop", "hoop-epoll", "nginx"];
/// The servers `--attack` accepts.
const ATTACK_KNOWN: [&str; 4] = ["hoop", "hoop-epoll", "nginx", "hyper"];
/// Slowloris attackers by default.
const DEFAULT_SLOWLORIS: usize = 4000;
/// Idle attackers by default.
const DEFAULT_IDLE: usize = 4000;
/// Most attackers of each kind.
const MAX_ATTACKERS: usize = 20_000;
/// Attackers' connects in flight at a time, by default (`--attack-in-flight`).
const CONNECT_IN_FLIGHT: usize = 256;
/// The legitimate load starts this long after the last attacker connected.
const SETTLE: Duration = Duration::from_secs(1);
/// RSS is read again this long after the attackers left.
const AFTER: Duration = Duration::from_secs(2);
/// Descriptors the bench and the server need beyond one per connection.
const FD_SLACK: u64 = 256;

/// What `--attack` runs.
#[derive(Debug, Clone)]
pub(crate) struct AttackPlan {
    /// Servers, in run order.
    pub servers: Vec<String>,
    /// Slowloris connections.
    pub slowloris: usize,
    /// Idle keep-alive connections.
    pub idle: usize,
    /// Seconds of each legitimate run.
    pub secs: f64,
    /// Legitimate keep-alive connections.
    pub conns: usize,
    /// Attackers' connects in flight at a time.
    pub in_flight: usize,
    /// Files and nginx's prefix.
    pub dir: PathBuf,
}

impl AttackPlan {
    /// Planned seconds, for the progress bar.
    pub(crate) fn planned_secs(&self) -> f64 {
        let per = 2.0 * self.secs + SETTLE.as_secs_f64() + AFTER.as_secs_f64() + 2.0;
        per * self.servers.len() as f64
    }

    /// Checks the numbers.
    pub(crate) fn check(&self) -> io::Result<()> {
        if self.slowloris > MAX_ATTACKERS || self.idle > MAX_ATTACKERS {
            return Err(invalid(format!(
                "--slowloris and --idle are at most {MAX_ATTACKERS} each"
            )));
        }
        crate::plan::check_conns(self.conns)?;
        if self.in_flight == 0 {
            return Err(invalid("--attack-in-flight must be at least 1"));
        }
        Ok(())
    }
}

/// Runs the plan: one result per server that could be started and measured; failures and
/// notes (nginx missing) in the second and third lists.
pub(crate) fn run_attack(
    plan: &AttackPlan,
    out: &Out,
) -> (Vec<AttackResult>, Vec<String>, Vec<String>) {
    let mut results = Vec::new();
    let mut failures = Vec::new();
    let mut notes = Vec::new();
    let need = (plan.slowloris + plan.idle + plan.conns) as u64 + FD_SLACK;
    let limit = crate::machine::nofile_limit();
    if limit < need {
        failures.push(format!(
            "the open-file limit is {limit} (raised to the hard limit): {} attackers and {} \
             legitimate connections need at least {need} in the bench and in the server; raise \
             the hard limit (`ulimit -Hn`, /etc/security/limits.conf) or attack with fewer",
            plan.slowloris + plan.idle,
            plan.conns
        ));
        return (results, failures, notes);
    }
    let (root, files) = match make_files(&plan.dir) {
        Ok(f) => f,
        Err(e) => {
            failures.push(format!(
                "cannot write the test files under {}: {e}",
                plan.dir.display()
            ));
            return (results, failures, notes);
        }
    };
    let Some(body) = files.get(&FILE_BYTES).cloned() else {
        failures.push("no 1 KiB test file".into());
        return (results, failures, notes);
    };
    let (server_cpu, client_cpu) = crate::machine::pin_plan();
    notes.push(match (server_cpu, client_cpu) {
        (Some(s), Some(c)) => {
            format!("pinning: the server on CPU {s}; the legitimate client, the fresh client and the attackers on CPU {c}")
        }
        _ => "pinning: none (fewer than two CPUs)".into(),
    });
    notes.push(backlog_note());
    for name in &plan.servers {
        out.start(
            &format!("attack {name}"),
            plan.planned_secs() / plan.servers.len() as f64,
        );
        let child = match start_server(name, &root, &plan.dir, server_cpu) {
            Ok(Some(c)) => c,
            Ok(None) => {
                notes.push(crate::target::nginx::MISSING.to_string());
                continue;
            }
            Err(e) => {
                out.note(&format!("warning: {e}"));
                failures.push(e.to_string());
                continue;
            }
        };
        let mut child = child;
        match attack_one(name, plan, &mut child, body.clone(), client_cpu, out) {
            Ok(mut r) => {
                r.pinned = server_cpu.is_some() && client_cpu.is_some();
                out.measurement(&r);
                results.push(r);
            }
            Err(e) => {
                out.note(&format!("warning: attack {name}: {e}"));
                failures.push(format!("attack {name}: {e}"));
            }
        }
        drop(child);
        out.done(plan.planned_secs() / plan.servers.len() as f64);
    }
    (results, failures, notes)
}

/// The listen backlog every server asks for and what the kernel gives: the accept queue the
/// attackers' connects wait in (ovfl counts those that found it full). The bench does not
/// raise `net.core.somaxconn`: a machine-wide setting is the operator's, so it says it instead.
fn backlog_note() -> String {
    let limits = hoop::net::listen_limits();
    let asked = hoop::net::DEFAULT_BACKLOG;
    let n = |v: Option<u32>| v.map_or("unknown".to_string(), |v| v.to_string());
    format!(
        "listen backlog: every server asks for {asked} (hoop's default; nginx's backlog=), the \
         kernel gives {} (net.core.somaxconn {}; tcp_max_syn_backlog {}, tcp_syncookies {}){}",
        limits.effective(asked),
        n(limits.somaxconn),
        n(limits.tcp_max_syn_backlog),
        n(limits.tcp_syncookies),
        if limits.effective(asked) < asked {
            "; raise somaxconn (`sysctl -w net.core.somaxconn=65535`) for a deeper queue"
        } else {
            ""
        }
    )
}

/// The legitimate load: `conns` keep-alive connections on the 1 KiB file, every body verified.
fn legit_config(addr: SocketAddr, plan: &AttackPlan, body: Arc<[u8]>) -> HttpClientConfig {
    HttpClientConfig {
        addr,
        host: addr.to_string(),
        path: format!("/{}", file_name(FILE_BYTES)),
        conns: plan.conns,
        secs: Duration::from_secs_f64(plan.secs),
        close: false,
        pipeline: 1,
        file_bytes: FILE_BYTES,
        verify: Some(body),
        mix: None,
    }
}

/// A legitimate run, and how long its connections took to connect.
fn legit_run(cfg: &HttpClientConfig, cpu: Option<usize>) -> io::Result<(HttpOutcome, Duration)> {
    let t0 = Instant::now();
    let mut connected_after = Duration::ZERO;
    let o = client::run_client(cfg, cpu, || connected_after = t0.elapsed())?;
    Ok((o, connected_after))
}

fn ms(us: Option<f64>) -> Option<f64> {
    us.map(|v| stats::round3(v / 1000.0))
}

/// One server: unattacked, attacked, after.
fn attack_one(
    name: &str,
    plan: &AttackPlan,
    child: &mut ServerChild,
    body: Arc<[u8]>,
    client_cpu: Option<usize>,
    out: &Out,
) -> io::Result<AttackResult> {
    let pid = child.pid();
    let cfg = legit_config(child.addr, plan, body.clone());
    let (calm, _) = legit_run(&cfg, client_cpu)?;
    child.check_alive()?;
    let rss_before = rss_bytes(pid);
    let cpu0 = process_cpu(pid).ok();
    let overflows0 = listen_overflows();
    let fresh = FreshClient::start(child.addr, cfg.path.clone(), body.len(), client_cpu);
    let attacker = Attacker::start(
        child.addr,
        (plan.slowloris, plan.idle, plan.in_flight),
        client_cpu,
    )?;
    let connected = attacker.connected()?;
    let cpu1 = process_cpu(pid).ok();
    out.note(&format!(
        "attack {name}: {} of {} attackers connected in {:.2} s ({} idle answered)",
        connected.slowloris + connected.idle,
        plan.slowloris + plan.idle,
        connected.secs,
        connected.idle_answered
    ));
    std::thread::sleep(SETTLE);
    let attacked = legit_run(&cfg, client_cpu);
    let rss_during = rss_bytes(pid);
    let fresh = fresh.finish();
    let held = attacker.leave()?;
    std::thread::sleep(AFTER);
    let rss_after = rss_bytes(pid);
    child.check_alive()?;
    let (attacked, connect_time) = attacked?;
    let secs = plan.secs;
    let rps = |o: &HttpOutcome| stats::round3(o.requests as f64 / secs);
    let (calm_rps, hot_rps) = (rps(&calm), rps(&attacked));
    let held_total = held.slowloris + held.idle;
    let stalled = attacked.per_second.contains(&0)
        || connect_time >= Duration::from_secs(1)
        || fresh.failed > 0
        || fresh.max.is_some_and(|m| m >= Duration::from_secs(1));
    Ok(AttackResult {
        bench: "http-attack",
        server: name.to_string(),
        slowloris: plan.slowloris,
        idle: plan.idle,
        legit_conns: plan.conns,
        file_bytes: FILE_BYTES,
        secs,
        legit_req_per_sec_unattacked: calm_rps,
        legit_req_per_sec_attacked: hot_rps,
        attacked_ratio: (calm_rps > 0.0).then(|| stats::round3(hot_rps / calm_rps)),
        p99_ms_unattacked: ms(stats::quantile_us(&calm.hist, 0.99)),
        p99_ms_attacked: ms(stats::quantile_us(&attacked.hist, 0.99)),
        p99_ms_first_second: ms(stats::quantile_us(&attacked.hist_first_second, 0.99)),
        max_ms_attacked: ms(stats::max_us(&attacked.hist)),
        legit_requests_per_second_attacked: attacked.per_second.clone(),
        stalled,
        legit_connect_ms_attacked: stats::round3(connect_time.as_secs_f64() * 1000.0),
        legit_errors_unattacked: calm.error_count(),
        legit_errors_attacked: attacked.error_count(),
        first_error_attacked: attacked.first_error.clone(),
        fresh_requests: fresh.ok,
        fresh_failures: fresh.failed,
        fresh_max_ms: fresh.max.map(|d| stats::round3(d.as_secs_f64() * 1000.0)),
        fresh_connect_max_ms: fresh
            .connect_max
            .map(|d| stats::round3(d.as_secs_f64() * 1000.0)),
        listen_overflows: match (overflows0, listen_overflows()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        },
        attackers_connected: connected.slowloris + connected.idle,
        attackers_connect_secs: stats::round3(connected.secs),
        idle_answered: connected.idle_answered,
        held_connections: held_total,
        held_slowloris: held.slowloris,
        closed_by_server: (connected.slowloris + connected.idle).saturating_sub(held_total),
        rss_bytes_before: rss_before,
        rss_bytes_during: rss_during,
        rss_bytes_after: rss_after,
        rss_bytes_per_held_connection: match (rss_before, rss_during) {
            (Some(b), Some(d)) if held_total > 0 => {
                Some(stats::round3((d as f64 - b as f64) / held_total as f64))
            }
            _ => None,
        },
        server_cpu_ms_attack_connect: match (cpu0, cpu1) {
            (Some(a), Some(b)) => Some(stats::round3(b.saturating_sub(a).as_secs_f64() * 1000.0)),
            _ => None,
        },
        pinned: false,
        legit_reconnects_unattacked: calm.reconnects,
        legit_reconnects_attacked: attacked.reconnects,
    })
}

/// The plan of `--attack` from the flags, checked.
pub(crate) fn attack_plan(args: &HttpPlan) -> io::Result<AttackPlan> {
    if args.url.is_some()
        || args.cells.is_some()
        || args.full
        || args.wrk
        || args.close
        || args.pipeline != 1
        || args.netns_mtu.is_some()
        || args.verify.is_some()
        || args.server_pid.is_some()
    {
        return Err(invalid(
            "--attack takes --slowloris, --idle, --attack-in-flight, -c, -t, --servers and --dir \
             only",
        ));
    }
    let secs = args.secs.unwrap_or(5.0);
    check_secs("-t/--secs", secs)?;
    let servers = crate::plan::parse_server_list(
        Some(
            args.servers
                .clone()
                .unwrap_or_else(|| ATTACK_SERVERS.iter().map(|s| s.to_string()).collect()),
        ),
        &ATTACK_KNOWN,
    )?;
    let plan = AttackPlan {
        servers,
        slowloris: args.slowloris.unwrap_or(DEFAULT_SLOWLORIS),
        idle: args.idle.unwrap_or(DEFAULT_IDLE),
        secs,
        conns: args.conns.unwrap_or(50),
        in_flight: args.attack_in_flight.unwrap_or(CONNECT_IN_FLIGHT),
        dir: args
            .dir
            .clone()
            .unwrap_or_else(|| crate::machine::default_out_dir().join("http")),
    };
    plan.check()?;
    Ok(plan)
}

/// The exit status of `--attack`: an error if a server failed, or counted errors or verified
/// no request without attack.
pub(crate) fn attack_status(results: &[AttackResult], failures: &[String]) -> io::Result<()> {
    let bad = results
        .iter()
        .filter(|r| r.legit_errors_unattacked > 0 || r.legit_req_per_sec_unattacked <= 0.0)
        .count();
    if results.is_empty() || !failures.is_empty() || bad > 0 {
        return Err(io::Error::other(format!(
            "{} server(s) measured under attack, {} failed, {} counted errors or no verified \
             request without attack{}",
            results.len(),
            failures.len(),
            bad,
            failures
                .first()
                .map_or(String::new(), |f| format!("; first failure: {f}"))
        )));
    }
    Ok(())
}
