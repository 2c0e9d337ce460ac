//! `hoop bench http --attack`: the static server under a slowloris and idle
//! keep-alive attack, on loopback, against each server in turn (hoop on io_uring, hoop on
//! epoll, nginx when installed; each a child process pinned to the first CPU as the
//! side-by-side runs are, the clients on the second).
//!
//! For each server: the legitimate load (the bench's own client, 50 keep-alive connections on
//! the 1 KiB file, every body verified) for `-t` seconds without attack; then the attackers
//! connect (at most [`CONNECT_IN_FLIGHT`] connects at a time, so the listen backlog of 1024
//! does not overflow and no SYN is dropped; `--attack-in-flight 8000` connects them all at once,
//! as a flood would, and then the kernel's SYN retransmits, 1 s and 3 s, show in every server's
//! figures): `--slowloris N` connections that send a request head
//! that never ends, one byte every 2 s, and `--idle N` that send one complete keep-alive
//! request, read its response and then stay silent. One second after the last attacker
//! connected, the same legitimate load runs again for `-t` seconds. A fresh client (a new
//! connection per request, as curl) asks every 100 ms from the moment the attackers start
//! connecting to the end of that run. Then the attackers check which of their connections the
//! server closed, and leave; 2 s later the server's RSS is read again.
//!
//! Reported per server (a table, and one JSON line with `--json`): legitimate req/s and p99
//! latency unattacked and attacked, p99 in the attacked run's first second, whether any
//! second of it verified no request or a fresh client waited a second or more (`stalled`), the fresh clients' worst time, the server's
//! RSS before the attack, during it (at the end of the attacked run) and 2 s after the
//! attackers left (`/proc/PID/status` VmRSS), the attackers still connected at the end
//! (`held_connections`; the rest were closed by the server's header or idle timeouts), RSS
//! per held connection, and the server's CPU time while the attackers connected.
//!
//! Every phase is bounded in time; everything is on 127.0.0.1.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::http::client::{self, HttpClientConfig, HttpOutcome};
use crate::http::side_by_side::{make_files, nofile_limit, start_server};
use crate::http::{file_name, label};
use crate::machine::proc::process_cpu;
use crate::measure::latency as stats;
use crate::plan::invalid;
use crate::report::output::Out;
use crate::target::child::ServerChild;

/// The servers of `--attack` by default, in run order.
pub(crate) const ATTACK_SERVERS: [&str; 3] = ["hoop", "hoop-epoll", "nginx"];
/// The servers `--attack` accepts.
pub(crate) const ATTACK_KNOWN: [&str; 4] = ["hoop", "hoop-epoll", "nginx", "hyper"];
/// Slowloris and idle attackers by default.
pub(crate) const DEFAULT_SLOWLORIS: usize = 4000;
pub(crate) const DEFAULT_IDLE: usize = 4000;
/// Most attackers of each kind.
const MAX_ATTACKERS: usize = 20_000;
/// The file every request asks for.
const FILE_BYTES: u64 = 1024;
/// Attackers' connects in flight at a time, by default (`--attack-in-flight`).
pub(crate) const CONNECT_IN_FLIGHT: usize = 256;
/// How long the attackers may take to connect (and the idle ones to be answered).
const CONNECT_PHASE: Duration = Duration::from_secs(30);
/// A slowloris attacker sends one more byte of its head this often.
const SLOW_TICK: Duration = Duration::from_secs(2);
/// The legitimate load starts this long after the last attacker connected.
const SETTLE: Duration = Duration::from_secs(1);
/// RSS is read again this long after the attackers left.
const AFTER: Duration = Duration::from_secs(2);
/// A fresh client asks this often while the attackers connect and during the attacked run,
/// and waits at most this long.
const FRESH_EVERY: Duration = Duration::from_millis(100);
const FRESH_TIMEOUT: Duration = Duration::from_secs(5);
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

/// One server's figures under attack (a JSON line).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AttackResult {
    /// Always "http-attack".
    pub bench: &'static str,
    /// "hoop" (io_uring), "hoop-epoll", "nginx", "hyper".
    pub server: String,
    /// Slowloris connections asked for.
    pub slowloris: usize,
    /// Idle keep-alive connections asked for.
    pub idle: usize,
    /// Legitimate keep-alive connections.
    pub legit_conns: usize,
    /// Size of the file the legitimate clients load.
    pub file_bytes: u64,
    /// Length of each legitimate run, seconds.
    pub secs: f64,
    /// Verified requests per second without attack.
    pub legit_req_per_sec_unattacked: f64,
    /// Verified requests per second under attack.
    pub legit_req_per_sec_attacked: f64,
    /// attacked / unattacked.
    pub attacked_ratio: Option<f64>,
    /// p99 latency of the legitimate requests without attack, ms.
    pub p99_ms_unattacked: Option<f64>,
    /// p99 latency under attack, ms.
    pub p99_ms_attacked: Option<f64>,
    /// p99 latency of the requests of the attacked run's first second, ms.
    pub p99_ms_first_second: Option<f64>,
    /// Largest latency under attack, ms.
    pub max_ms_attacked: Option<f64>,
    /// Verified requests in each second of the attacked run.
    pub legit_requests_per_second_attacked: Vec<u64>,
    /// A second of the attacked run verified no request, its connections took a second or
    /// more to connect, or a fresh client's request took a second or more or failed.
    pub stalled: bool,
    /// How long the legitimate connections took to connect under attack, ms.
    pub legit_connect_ms_attacked: f64,
    /// Errors of the legitimate client without and with attack.
    pub legit_errors_unattacked: u64,
    pub legit_errors_attacked: u64,
    /// The first legitimate error under attack.
    pub first_error_attacked: Option<String>,
    /// Fresh clients (a new connection per request, every 100 ms) from the moment the
    /// attackers start connecting to the end of the attacked run:
    /// answered, failed (timeout 5 s, or a wrong answer), and the slowest, ms.
    pub fresh_requests: u64,
    pub fresh_failures: u64,
    pub fresh_max_ms: Option<f64>,
    /// The fresh clients' slowest connect, ms (1,000 and more: a SYN dropped because the
    /// listen queue was full).
    pub fresh_connect_max_ms: Option<f64>,
    /// The machine's `TcpExt: ListenOverflows` while the attackers connected and the attacked
    /// run lasted (every listener of the machine: anything else running counts too).
    pub listen_overflows: Option<u64>,
    /// Attackers connected (slowloris + idle), and how long that took, seconds.
    pub attackers_connected: usize,
    pub attackers_connect_secs: f64,
    /// Idle attackers whose request was answered.
    pub idle_answered: usize,
    /// Attackers still connected at the end of the attacked run.
    pub held_connections: usize,
    /// Of them, slowloris ones (the rest are idle ones).
    pub held_slowloris: usize,
    /// Attackers the server closed before the end of the attacked run (timeouts).
    pub closed_by_server: usize,
    /// Server RSS before the attack, at the end of the attacked run, 2 s after the attackers
    /// left (bytes).
    pub rss_bytes_before: Option<u64>,
    pub rss_bytes_during: Option<u64>,
    pub rss_bytes_after: Option<u64>,
    /// (during - before) / held connections.
    pub rss_bytes_per_held_connection: Option<f64>,
    /// Server CPU time while the attackers connected (and the idle ones were answered), ms.
    pub server_cpu_ms_attack_connect: Option<f64>,
    /// Server and clients pinned to different CPUs.
    pub pinned: bool,
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
    let limit = nofile_limit();
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
    })
}

/// A process's resident set (`VmRSS` of `/proc/PID/status`), bytes.
pub(crate) fn rss_bytes(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&s)
}

/// `VmRSS:   77484 kB` -> bytes.
pub(crate) fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// `TcpExt: ListenOverflows` of `/proc/net/netstat`: connections the kernel dropped because
/// a listener's accept queue was full.
pub(crate) fn listen_overflows() -> Option<u64> {
    parse_listen_overflows(&std::fs::read_to_string("/proc/net/netstat").ok()?)
}

/// The `ListenOverflows` value of `/proc/net/netstat` (a line of names, then one of values).
pub(crate) fn parse_listen_overflows(netstat: &str) -> Option<u64> {
    let mut lines = netstat.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if !names.starts_with("TcpExt:") {
            continue;
        }
        let i = names
            .split_whitespace()
            .position(|n| n == "ListenOverflows")?;
        return values.split_whitespace().nth(i)?.parse().ok();
    }
    None
}

// ----- the attackers ---------------------------------------------------------------------------

/// What the attackers got when they connected.
#[derive(Debug, Clone, Copy, Default)]
struct Connected {
    slowloris: usize,
    idle: usize,
    idle_answered: usize,
    secs: f64,
}

/// Attackers still connected when asked to leave.
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    slowloris: usize,
    idle: usize,
}

enum Report {
    Connected(Connected),
    Held(Held),
    Failed(String),
}

/// The attackers: a thread with a hoop runtime of its own holding every attacking connection.
struct Attacker {
    stop: Arc<AtomicBool>,
    rx: mpsc::Receiver<Report>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Attacker {
    fn start(
        addr: SocketAddr,
        (slowloris, idle, in_flight): (usize, usize, usize),
        cpu: Option<usize>,
    ) -> io::Result<Attacker> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("hoop-bench-attack".into())
            .spawn(move || {
                let fail = |e: io::Error| {
                    let _ = tx.send(Report::Failed(e.to_string()));
                };
                if let Some(cpu) = cpu {
                    if let Err(e) = hoop::runtime::pin_to_cpu(cpu) {
                        return fail(e);
                    }
                }
                let rt = match hoop::Runtime::builder().entries(4096).build() {
                    Ok(rt) => rt,
                    Err(e) => return fail(e),
                };
                rt.block_on(attack(
                    addr,
                    (slowloris, idle, in_flight),
                    stop2,
                    tx.clone(),
                ));
            })?;
        Ok(Attacker {
            stop,
            rx,
            thread: Some(thread),
        })
    }

    /// Waits until every attacker connected (or gave up).
    fn connected(&self) -> io::Result<Connected> {
        match self
            .rx
            .recv_timeout(CONNECT_PHASE + Duration::from_secs(10))
        {
            Ok(Report::Connected(c)) => Ok(c),
            Ok(Report::Failed(e)) => Err(io::Error::other(format!("the attackers failed: {e}"))),
            Ok(Report::Held(_)) => Err(io::Error::other("the attackers reported out of turn")),
            Err(_) => Err(io::Error::other("the attackers did not connect in time")),
        }
    }

    /// Asks the attackers which connections are still open, then closes them all.
    fn leave(mut self) -> io::Result<Held> {
        self.stop.store(true, Ordering::Release);
        let r = match self.rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Report::Held(h)) => Ok(h),
            Ok(Report::Failed(e)) => Err(io::Error::other(format!("the attackers failed: {e}"))),
            Ok(Report::Connected(_)) => Err(io::Error::other("the attackers reported out of turn")),
            Err(_) => Err(io::Error::other("the attackers did not report in time")),
        };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        r
    }
}

impl Drop for Attacker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The head a slowloris attacker sends, one byte every [`SLOW_TICK`], and never finishes (past
/// its end it repeats `a`, the value of the last header).
const SLOW_HEAD: &[u8] = b"GET /f1024.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slowloris: ";

/// A connected attacker, and (idle ones) whether its request was answered with the file.
type Attacking = (hoop::net::TcpStream, bool);

fn slow_byte(i: usize) -> u8 {
    SLOW_HEAD.get(i).copied().unwrap_or(b'a')
}

async fn attack(
    addr: SocketAddr,
    (slowloris, idle, in_flight): (usize, usize, usize),
    stop: Arc<AtomicBool>,
    tx: mpsc::Sender<Report>,
) {
    let t0 = Instant::now();
    let give_up = t0 + CONNECT_PHASE;
    let request = Rc::new(client::request_bytes(
        &addr.to_string(),
        &format!("/{}", file_name(FILE_BYTES)),
        false,
    ));
    let total = slowloris + idle;
    let mut slow: Vec<hoop::net::TcpStream> = Vec::with_capacity(slowloris);
    let mut quiet: Vec<hoop::net::TcpStream> = Vec::with_capacity(idle);
    let mut answered = 0;
    let mut next = 0;
    // Connect in waves of at most CONNECT_IN_FLIGHT, slowloris first, then idle.
    while next < total && Instant::now() < give_up && !stop.load(Ordering::Acquire) {
        let wave: Vec<(bool, hoop::JoinHandle<Option<Attacking>>)> = (next..total
            .min(next + in_flight))
            .map(|i| {
                let is_slow = i < slowloris;
                let request = request.clone();
                let left = give_up.saturating_duration_since(Instant::now());
                (
                    is_slow,
                    hoop::spawn(async move {
                        hoop::time::timeout(left, connect_one(addr, is_slow, request))
                            .await
                            .ok()
                            .flatten()
                    }),
                )
            })
            .collect();
        next += wave.len();
        for (is_slow, h) in wave {
            if let Ok(Some((s, ok))) = h.await {
                if is_slow {
                    slow.push(s);
                } else {
                    answered += usize::from(ok);
                    quiet.push(s);
                }
            }
        }
    }
    let _ = tx.send(Report::Connected(Connected {
        slowloris: slow.len(),
        idle: quiet.len(),
        idle_answered: answered,
        secs: t0.elapsed().as_secs_f64(),
    }));
    // One more byte of every slowloris head every SLOW_TICK, until told to stop (at most an
    // hour: the bench asks well before).
    let hard_stop = Instant::now() + Duration::from_secs(3600);
    let mut sent = 1;
    let mut next_tick = Instant::now() + SLOW_TICK;
    let mut open: Vec<bool> = vec![true; slow.len()];
    while !stop.load(Ordering::Acquire) && Instant::now() < hard_stop {
        hoop::time::sleep(Duration::from_millis(10)).await;
        if Instant::now() < next_tick {
            continue;
        }
        next_tick += SLOW_TICK;
        let b = [slow_byte(sent)];
        sent += 1;
        for (s, open) in slow.iter().zip(open.iter_mut()) {
            if *open && !send_now(s, &b) {
                *open = false;
            }
        }
    }
    let held = Held {
        slowloris: slow
            .iter()
            .zip(&open)
            .filter(|(s, o)| **o && still_open(s))
            .count(),
        idle: quiet.iter().filter(|s| still_open(s)).count(),
    };
    let _ = tx.send(Report::Held(held));
    drop(slow);
    drop(quiet);
}

/// Connects one attacker: a slowloris one sends the first byte of its head; an idle one its
/// whole request, and reads the response (whether it was a 200 with the body).
async fn connect_one(addr: SocketAddr, slow: bool, request: Rc<Vec<u8>>) -> Option<Attacking> {
    let s = hoop::net::TcpStream::connect(addr).await.ok()?;
    if slow {
        let (r, _) = s.write_all(vec![slow_byte(0)]).await;
        r.ok()?;
        return Some((s, true));
    }
    let (r, _) = s.write_all(request.to_vec()).await;
    r.ok()?;
    let mut got: Vec<u8> = Vec::with_capacity(4096);
    // At most 64 reads: a 1 KiB answer comes in one or two.
    for _ in 0..64 {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        if let Ok(httparse::Status::Complete(n)) = resp.parse(&got) {
            let len = resp
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| {
                    std::str::from_utf8(h.value)
                        .ok()?
                        .trim()
                        .parse::<usize>()
                        .ok()
                });
            if let Some(len) = len {
                if got.len() >= n + len {
                    return Some((s, resp.code == Some(200) && len as u64 == FILE_BYTES));
                }
            }
        }
        if got.len() > 64 * 1024 {
            break;
        }
        let buf = Vec::with_capacity(8192);
        let (r, buf) = s.read(buf).await;
        match r {
            Ok(n) if n > 0 => got.extend_from_slice(&buf),
            _ => return Some((s, false)),
        }
    }
    Some((s, false))
}

/// Sends `b` now, without waiting (one byte fits any socket buffer); false if the connection
/// is gone.
fn send_now(s: &hoop::net::TcpStream, b: &[u8]) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: `b` is valid for reads of its length for the call; the fd is the stream's, open
    // while it is borrowed.
    let r = unsafe {
        libc::send(
            s.as_raw_fd(),
            b.as_ptr().cast(),
            b.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    r >= 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN)
}

/// Whether the server still holds the connection: reading what it sent (at most 64 reads)
/// ends in "nothing more yet", not at its end or an error.
fn still_open(s: &hoop::net::TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 4096];
    for _ in 0..64 {
        // SAFETY: `buf` is valid for writes of its length for the call; the fd is the
        // stream's, open while it is borrowed.
        let r = unsafe {
            libc::recv(
                s.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if r > 0 {
            continue;
        }
        return r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN);
    }
    true
}

// ----- the fresh client ------------------------------------------------------------------------

/// What the fresh client saw.
#[derive(Debug, Default)]
struct Fresh {
    ok: u64,
    failed: u64,
    max: Option<Duration>,
    /// The slowest connect (a SYN the kernel dropped, its accept queue full, costs 1 s).
    connect_max: Option<Duration>,
}

/// A client that, every [`FRESH_EVERY`], connects, asks for the file with `Connection:
/// close` and reads the answer to its end (as curl would), each within [`FRESH_TIMEOUT`].
struct FreshClient {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Fresh>>,
}

impl FreshClient {
    fn start(addr: SocketAddr, path: String, len: usize, cpu: Option<usize>) -> FreshClient {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            if let Some(cpu) = cpu {
                let _ = hoop::runtime::pin_to_cpu(cpu);
            }
            let mut f = Fresh::default();
            let request = client::request_bytes(&addr.to_string(), &path, true);
            // Bounded: at most an hour of asks (the bench stops it after one run).
            for _ in 0..36_000 {
                if stop2.load(Ordering::Acquire) {
                    break;
                }
                let t0 = Instant::now();
                let mut connect = Duration::ZERO;
                let ok = fresh_once(addr, &request, len, &mut connect).unwrap_or(false);
                f.connect_max = Some(f.connect_max.map_or(connect, |m| m.max(connect)));
                let took = t0.elapsed();
                if ok {
                    f.ok += 1;
                } else {
                    f.failed += 1;
                }
                f.max = Some(f.max.map_or(took, |m| m.max(took)));
                std::thread::sleep(FRESH_EVERY.saturating_sub(took));
            }
            f
        });
        FreshClient {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Fresh {
        self.stop.store(true, Ordering::Release);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for FreshClient {
    /// Stopped on every path (a measurement that failed half-way included).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One fresh request: whether a 200 with the file's length came back in time.
fn fresh_once(
    addr: SocketAddr,
    request: &[u8],
    len: usize,
    connect: &mut Duration,
) -> io::Result<bool> {
    let t0 = Instant::now();
    let deadline = t0 + FRESH_TIMEOUT;
    let s = std::net::TcpStream::connect_timeout(&addr, FRESH_TIMEOUT);
    *connect = t0.elapsed();
    let mut s = s?;
    s.write_all(request)?;
    let mut got = Vec::with_capacity(len + 512);
    let mut buf = [0u8; 8192];
    // Bounded by the deadline, and by size.
    while got.len() <= len + 64 * 1024 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        s.set_read_timeout(Some(left))?;
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    Ok(match resp.parse(&got) {
        Ok(httparse::Status::Complete(n)) => resp.code == Some(200) && got.len() - n == len,
        _ => false,
    })
}

// ----- the report ------------------------------------------------------------------------------

/// The table of every server's figures.
pub(crate) fn attack_table(results: &[AttackResult], notes: &[String]) -> String {
    let f = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
    let mib =
        |v: Option<u64>| v.map_or("-".to_string(), |b| format!("{:.1}", b as f64 / 1048576.0));
    let mut s = String::new();
    if let Some(r) = results.first() {
        s.push_str(&format!(
            "\n## Under attack: {} slowloris + {} idle keep-alive connections; legitimate load {} keep-alive connections on {} B, {} s per run\n\n",
            r.slowloris, r.idle, r.legit_conns, r.file_bytes, r.secs
        ));
    }
    s.push_str(&format!(
        "{:<16} {:>10} {:>10} {:>6} {:>8} {:>8} {:>8} {:>7} {:>9} {:>6} {:>6} {:>6} {:>7} {:>7} {:>7} {:>9} {:>8}\n",
        "server",
        "req/s",
        "attacked",
        "ratio",
        "p99 ms",
        "p99 att",
        "p99 1st",
        "stalled",
        "fresh max",
        "ovfl",
        "held",
        "closed",
        "RSS MiB",
        "during",
        "after",
        "B/held",
        "CPU ms"
    ));
    for r in results {
        s.push_str(&format!(
            "{:<16} {:>10.0} {:>10.0} {:>6} {:>8} {:>8} {:>8} {:>7} {:>9} {:>6} {:>6} {:>6} {:>7} {:>7} {:>7} {:>9} {:>8}\n",
            label(&r.server),
            r.legit_req_per_sec_unattacked,
            r.legit_req_per_sec_attacked,
            f(r.attacked_ratio, 2),
            f(r.p99_ms_unattacked, 2),
            f(r.p99_ms_attacked, 2),
            f(r.p99_ms_first_second, 2),
            if r.stalled { "yes" } else { "no" },
            f(r.fresh_max_ms, 1),
            r.listen_overflows.map_or("-".into(), |n| n.to_string()),
            r.held_connections,
            r.closed_by_server,
            mib(r.rss_bytes_before),
            mib(r.rss_bytes_during),
            mib(r.rss_bytes_after),
            f(r.rss_bytes_per_held_connection, 0),
            f(r.server_cpu_ms_attack_connect, 0),
        ));
    }
    s.push_str(
        "\nreq/s, p99: legitimate verified requests without and under attack (p99 1st: the attacked \
         run's first second); stalled: a second of it with no verified request; fresh max: the \
         slowest new-connection request from the attack's start; ovfl: connections the kernel \
         dropped meanwhile for a full accept queue (the whole machine's count); held: attackers still connected at the end \
         (closed: cut by the server's timeouts); RSS before / during / 2 s after the attackers \
         left; B/held: RSS growth per held connection; CPU ms: the server's CPU while the \
         attackers connected\n",
    );
    for n in notes {
        s.push_str(n);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_overflows_parse() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 3 54983 54983\n\
                    IpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(parse_listen_overflows(text), Some(54983));
        assert_eq!(parse_listen_overflows("IpExt: A\nIpExt: 1\n"), None);
    }

    #[test]
    fn vm_rss_parses() {
        let status = "Name:\thoop\nVmPeak:\t  100 kB\nVmRSS:\t   77484 kB\nThreads:\t1\n";
        assert_eq!(parse_vm_rss(status), Some(77484 * 1024));
        assert_eq!(parse_vm_rss("Name: x\n"), None);
    }

    #[test]
    fn slowloris_head_never_ends() {
        let head: Vec<u8> = (0..10_000).map(slow_byte).collect();
        assert!(head.starts_with(b"GET /f1024.bin HTTP/1.1\r\n"));
        assert!(!head.windows(4).any(|w| w == b"\r\n\r\n"));
        assert_eq!(file_name(FILE_BYTES), "f1024.bin");
    }
}
