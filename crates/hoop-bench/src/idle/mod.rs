//! `hoop bench idle`: many idle connections held against an echo server while a few active
//! ones load it, side by side (hoop on io_uring, hoop on epoll, tokio, monoio).
//!
//! Per server (a child process pinned like `hoop bench echo`'s, started fresh): the active
//! load (`-c` connections of the echo client, every reply verified) for `-t` seconds with no
//! idle connection; the server's RSS; then N idle connections opened by helper processes
//! ([`holder`]; as many as one process's open-file limit allows each) from their own
//! 127.0.0.x source addresses, a sample of them checked for an echo once all are open; RSS
//! again; the same active load with the idle connections held; how many of them the server
//! still holds; then they leave, and RSS is read once more [`AFTER`] later.
//!
//! N is capped, with a line, at the servers' open-file hard limit less [`SERVER_FD_SLACK`]
//! (every server raises its soft limit to the hard one). Connections that could not be opened
//! or, sampled, got no echo are counted (`idle_failed`): every connect and every read is
//! bounded in time, so a server that stops serving new clients is seen, not waited for.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

use crate::echo_client::{self, ClientConfig, ClientOutcome};
use crate::load::idle as holder;
use crate::measure::latency as stats;
use crate::plan::{check_conns, check_len, check_secs, invalid};
use crate::report::output::Out;
use crate::target::child::ServerChild;

mod table;

pub(crate) use crate::side_by_side::label;
pub(crate) use table::{section, table};

/// The servers by default, in run order.
pub(crate) const SERVERS: [&str; 4] = ["hoop", "hoop-epoll", "tokio", "monoio"];
/// The servers `--servers` accepts.
const KNOWN: [&str; 5] = ["hoop", "hoop-basic", "hoop-epoll", "tokio", "monoio"];
/// Idle connections by default.
pub(crate) const DEFAULT_IDLE: usize = 100_000;
/// The quick suite's size: idle connections and seconds of each active run.
pub(crate) const QUICK_IDLE: usize = 2000;
/// Descriptors a server needs beyond its idle connections (the active ones, its listener, its
/// ring or epoll, stdio, spare).
const SERVER_FD_SLACK: u64 = 500;
/// Descriptors a helper needs beyond its connections.
const HELPER_FD_SLACK: u64 = 256;
/// RSS is read this long after the idle connections left.
const AFTER: Duration = Duration::from_secs(1);
/// The first 127.0.0.x source address of the idle connections (127.0.0.1 is the active
/// client's).
const FIRST_SOURCE: usize = 2;
/// Planned overhead per server (start, connects, checks, stop), for the progress bar.
const OVERHEAD_SECS: f64 = 3.0;

/// Arguments of `hoop bench idle`.
#[derive(Debug, clap::Args)]
pub struct IdleArgs {
    /// Idle connections held against each server; capped, with a line, at the servers'
    /// open-file hard limit less 500.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_IDLE)]
    pub idle: usize,
    /// Active connections, each with one request in flight.
    #[arg(
        short = 'c',
        long = "conns",
        value_name = "CONNS",
        default_value_t = 50
    )]
    pub conns: usize,
    /// Payload bytes per active request.
    #[arg(
        short = 'l',
        long = "len",
        value_name = "LEN_BYTES",
        default_value_t = 128
    )]
    pub len: usize,
    /// Seconds of each active run (without, then with the idle connections).
    #[arg(short = 't', long = "secs", value_name = "SECS", default_value_t = 3.0)]
    pub secs: f64,
    /// The servers, comma-separated (hoop = io_uring, hoop-basic, hoop-epoll, tokio, monoio).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// Idle connections whose echo is checked once all are open (evenly spread, the last
    /// opened included).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub sample: usize,
    /// Idle connections per helper process [default: its open-file hard limit less 256].
    #[arg(long, value_name = "N")]
    pub per_client: Option<usize>,
}

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Servers, in run order.
    pub servers: Vec<String>,
    /// Idle connections asked for.
    pub asked: usize,
    /// Idle connections held (`asked`, capped).
    pub idle: usize,
    /// Why `idle` is below `asked`, when it is.
    pub cap_note: Option<String>,
    /// Active connections.
    pub conns: usize,
    /// Payload bytes per active request.
    pub len: usize,
    /// Seconds of each active run.
    pub secs: f64,
    /// Idle connections checked for an echo.
    pub sample: usize,
    /// Idle connections per helper process.
    pub per_client: usize,
}

impl Plan {
    /// A plan: `idle` capped at the fd limit (the note says so).
    pub(crate) fn new(
        servers: Vec<String>,
        asked: usize,
        conns: usize,
        len: usize,
        secs: f64,
        sample: usize,
        per_client: Option<usize>,
    ) -> io::Result<Plan> {
        check_conns(conns)?;
        check_len(len)?;
        check_secs("-t/--secs", secs)?;
        if asked == 0 {
            return Err(invalid("--idle must be at least 1"));
        }
        if asked > DEFAULT_IDLE {
            return Err(invalid(format!("--idle must be at most {DEFAULT_IDLE}")));
        }
        let hard = nofile_hard_limit();
        let cap = usize::try_from(hard.saturating_sub(SERVER_FD_SLACK)).unwrap_or(usize::MAX);
        let (idle, cap_note) = if asked > cap {
            (
                cap,
                Some(format!(
                    "idle: {asked} asked, capped at {cap}: a process may open at most {hard} \
                     files here (the hard limit, `ulimit -Hn`, to which every server raises \
                     its own), less {SERVER_FD_SLACK} for the active connections and the rest"
                )),
            )
        } else {
            (asked, None)
        };
        if idle == 0 {
            return Err(invalid(format!(
                "the open-file hard limit ({hard}) leaves no room for idle connections"
            )));
        }
        let per_default = usize::try_from(hard.saturating_sub(HELPER_FD_SLACK)).unwrap_or(1);
        let per_client = per_client.unwrap_or(per_default).max(1);
        let sources = holder::sources_needed(idle, per_client);
        if FIRST_SOURCE + sources * servers.len() > 254 {
            return Err(invalid(format!(
                "{idle} idle connections x {} servers need more 127.0.0.x source addresses \
                 than there are; fewer connections or a larger --per-client",
                servers.len()
            )));
        }
        Ok(Plan {
            servers,
            asked,
            idle,
            cap_note,
            conns,
            len,
            secs,
            sample,
            per_client,
        })
    }

    /// The suite's plan: [`QUICK_IDLE`] idle connections, `secs` per active run, the servers
    /// of `servers` this bench knows (none: no plan).
    pub(crate) fn quick(servers: &[String], secs: f64) -> io::Result<Option<Plan>> {
        let servers: Vec<String> = servers
            .iter()
            .filter(|s| SERVERS.contains(&s.as_str()))
            .cloned()
            .collect();
        if servers.is_empty() {
            return Ok(None);
        }
        Plan::new(servers, QUICK_IDLE, 50, 128, secs, 200, None).map(Some)
    }

    /// Planned seconds, for the progress bar.
    pub(crate) fn planned_secs(&self) -> f64 {
        let connect = self.idle as f64 / 20_000.0;
        self.servers.len() as f64
            * (2.0 * self.secs + connect + AFTER.as_secs_f64() + OVERHEAD_SECS)
    }

    /// Helper processes per server.
    pub(crate) fn helpers(&self) -> usize {
        self.idle.div_ceil(self.per_client)
    }
}

/// One server's figures (a JSON line).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct IdleResult {
    /// Always "idle".
    pub bench: &'static str,
    /// "hoop" (io_uring), "hoop-basic", "hoop-epoll", "tokio", "monoio".
    pub server: String,
    /// Idle connections asked for (before the cap).
    pub idle_asked: usize,
    /// Idle connections tried (after the cap).
    pub idle_tried: usize,
    /// Idle connections open (held) while the active load ran.
    pub idle_conns: usize,
    /// Idle connections that could not be opened, plus sampled ones with no or a wrong echo.
    pub idle_failed: usize,
    /// Of those, the ones that could not be opened.
    pub idle_connect_failed: usize,
    /// Idle connections checked for an echo once all were open.
    pub idle_sampled: usize,
    /// Of those, the ones with no or a wrong echo within 5 s.
    pub idle_sample_failed: usize,
    /// The first idle failure.
    pub idle_first_error: Option<String>,
    /// Idle connections still open after the active run with them (the rest the server
    /// closed).
    pub idle_still_open: usize,
    /// Seconds the idle connections took to connect.
    pub idle_connect_secs: f64,
    /// Helper processes holding them.
    pub idle_clients: usize,
    /// Active connections.
    pub active_conns: usize,
    /// Payload bytes per active request.
    pub len_bytes: usize,
    /// Seconds of each active run.
    pub secs: f64,
    /// Server RSS before the idle connections, bytes (`VmRSS`).
    pub rss_bytes_before: Option<u64>,
    /// Server RSS with them open.
    pub rss_bytes_with_idle: Option<u64>,
    /// Server RSS 1 s after they left.
    pub rss_bytes_after: Option<u64>,
    /// (with - before) / idle connections held: user memory per idle connection.
    pub rss_bytes_per_idle_conn: Option<f64>,
    /// Verified active requests per second with the idle connections.
    pub active_rps: f64,
    /// The same without them.
    pub active_rps_no_idle: f64,
    /// active_rps / active_rps_no_idle.
    pub active_rps_ratio: Option<f64>,
    /// p99 latency of the active requests with the idle connections, µs.
    pub p99_us: Option<f64>,
    /// The same without them.
    pub p99_us_no_idle: Option<f64>,
    /// Active errors with the idle connections.
    pub active_errors: u64,
    /// Active errors without them.
    pub active_errors_no_idle: u64,
    /// The first active error (or why the active run could not run).
    pub active_first_error: Option<String>,
    /// Server and clients on two CPUs.
    pub pinned: bool,
}

/// What a plan produced.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// One result per server measured.
    pub results: Vec<IdleResult>,
    /// Servers that could not be measured, with why.
    pub failures: Vec<String>,
}

impl Outcome {
    /// Results with active errors, no verified active request, or failed idle connections.
    pub(crate) fn bad(&self) -> Vec<String> {
        self.results
            .iter()
            .filter(|r| {
                r.idle_failed > 0
                    || r.active_errors + r.active_errors_no_idle > 0
                    || r.active_rps <= 0.0
                    || r.active_rps_no_idle <= 0.0
            })
            .map(|r| r.server.clone())
            .collect()
    }
}

/// Runs `hoop bench idle`.
pub fn run_idle_command(args: IdleArgs, json: bool) -> io::Result<()> {
    let asked = args
        .servers
        .unwrap_or_else(|| SERVERS.iter().map(|s| s.to_string()).collect());
    let servers = crate::plan::parse_server_list(Some(asked), &KNOWN)?;
    crate::machine::raise_nofile_limit();
    let plan = Plan::new(
        servers,
        args.idle,
        args.conns,
        args.len,
        args.secs,
        args.sample,
        args.per_client,
    )?;
    let out = Out::new(json, plan.planned_secs());
    if let Some(n) = &plan.cap_note {
        out.note(n);
    }
    let outcome = run_plan(&plan, &out);
    out.finish();
    out.human(&table(&plan, &outcome));
    if !outcome.failures.is_empty() {
        return Err(io::Error::other(format!(
            "{} server(s) could not be measured; first: {}",
            outcome.failures.len(),
            outcome.failures[0]
        )));
    }
    let bad = outcome.bad();
    if !bad.is_empty() {
        return Err(io::Error::other(format!(
            "{}: idle connections failed, or the active load counted errors or verified nothing \
             (see the table)",
            bad.join(", ")
        )));
    }
    Ok(())
}

/// Runs every server in turn; failures are recorded, the plan goes on.
pub(crate) fn run_plan(plan: &Plan, out: &Out) -> Outcome {
    let (server_cpu, client_cpu) = crate::machine::pin_plan();
    let mut o = Outcome::default();
    let per = plan.planned_secs() / plan.servers.len().max(1) as f64;
    let block = holder::sources_needed(plan.idle, plan.per_client);
    for (k, name) in plan.servers.iter().enumerate() {
        let what = format!("idle {name}: {} idle + {} active", plan.idle, plan.conns);
        out.start(&what, per);
        // Each server's idle connections come from addresses of their own: the previous
        // server's TIME_WAIT sockets never hold the ports they need.
        let source = u8::try_from(FIRST_SOURCE + k * block).unwrap_or(u8::MAX);
        match run_one(name, plan, source, server_cpu, client_cpu, out) {
            Ok(mut r) => {
                r.pinned = server_cpu.is_some() && client_cpu.is_some();
                out.measurement(&r);
                if r.idle_failed > 0 {
                    out.note(&format!(
                        "warning: {what}: {} idle connection(s) failed ({} not opened, {} of {} \
                         sampled without an echo); first: {}",
                        r.idle_failed,
                        r.idle_connect_failed,
                        r.idle_sample_failed,
                        r.idle_sampled,
                        r.idle_first_error.as_deref().unwrap_or("?")
                    ));
                }
                out.warn_run(
                    &what,
                    u64::from(r.active_rps > 0.0),
                    "active request",
                    r.active_errors,
                    r.active_first_error.as_deref(),
                );
                o.results.push(r);
            }
            Err(e) => {
                out.note(&format!("warning: {what}: {e}"));
                o.failures.push(format!("{what}: {e}"));
            }
        }
        out.done(per);
    }
    o
}

/// The active load against `addr`.
fn active(addr: SocketAddr, plan: &Plan, cpu: Option<usize>) -> io::Result<ClientOutcome> {
    let cfg = ClientConfig {
        addr,
        conns: plan.conns,
        len: plan.len,
        secs: Duration::from_secs_f64(plan.secs),
    };
    echo_client::run_client(&cfg, cpu, || {})
}

/// One server: active alone, idle opened, active with them, idle gone.
fn run_one(
    name: &str,
    plan: &Plan,
    source: u8,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
    out: &Out,
) -> io::Result<IdleResult> {
    let mut child = ServerChild::spawn(name, server_cpu)?;
    let pid = child.pid();
    let calm = active(child.addr, plan, client_cpu)?;
    child.check_alive()?;
    let rss_before = rss_bytes(pid);
    let (holders, opened) = holder::Holders::open(
        child.addr,
        plan.idle,
        plan.per_client,
        source,
        plan.sample,
        client_cpu,
    )?;
    child.check_alive()?;
    out.note(&format!(
        "idle {name}: {} of {} idle connections open in {:.2} s, {} of {} sampled answered",
        opened.opened,
        plan.idle,
        opened.connect_secs,
        opened.sampled - opened.sample_failed,
        opened.sampled
    ));
    let rss_with = rss_bytes(pid);
    let loaded = active(child.addr, plan, client_cpu);
    let mut holders = holders;
    let still = holders.still_open();
    holders.close();
    std::thread::sleep(AFTER);
    let rss_after = rss_bytes(pid);
    child.check_alive()?;
    let secs = plan.secs;
    let rps = |o: &ClientOutcome| stats::round3(o.requests as f64 / secs);
    let (rps_idle, p99, errors, first_error) = match &loaded {
        Ok(o) => (
            rps(o),
            stats::quantile_us(&o.hist, 0.99),
            o.errors,
            // A server that answers nothing shows no error of its own: say it.
            o.first_error.clone().or_else(|| {
                (o.requests == 0).then(|| {
                    format!(
                        "no active request answered in {secs} s with the idle connections \
                         ({} of {} active connections connected)",
                        o.connected, plan.conns
                    )
                })
            }),
        ),
        Err(e) => (0.0, None, 1, Some(format!("the active run failed: {e}"))),
    };
    let rps_calm = rps(&calm);
    Ok(IdleResult {
        bench: "idle",
        server: name.to_string(),
        idle_asked: plan.asked,
        idle_tried: plan.idle,
        idle_conns: opened.opened,
        idle_failed: opened.connect_failed + opened.sample_failed,
        idle_connect_failed: opened.connect_failed,
        idle_sampled: opened.sampled,
        idle_sample_failed: opened.sample_failed,
        idle_first_error: opened.first_error,
        idle_still_open: still,
        idle_connect_secs: stats::round3(opened.connect_secs),
        idle_clients: plan.helpers(),
        active_conns: plan.conns,
        len_bytes: plan.len,
        secs,
        rss_bytes_before: rss_before,
        rss_bytes_with_idle: rss_with,
        rss_bytes_after: rss_after,
        rss_bytes_per_idle_conn: match (rss_before, rss_with) {
            (Some(b), Some(w)) if opened.opened > 0 => {
                Some(stats::round3((w as f64 - b as f64) / opened.opened as f64))
            }
            _ => None,
        },
        active_rps: rps_idle,
        active_rps_no_idle: rps_calm,
        active_rps_ratio: (rps_calm > 0.0).then(|| stats::round3(rps_idle / rps_calm)),
        p99_us: p99,
        p99_us_no_idle: stats::quantile_us(&calm.hist, 0.99),
        active_errors: errors,
        active_errors_no_idle: calm.errors,
        active_first_error: first_error.or(calm.first_error),
        pinned: false,
    })
}

/// A process's resident set, bytes.
fn rss_bytes(pid: u32) -> Option<u64> {
    crate::http::attack::rss_bytes(pid)
}

/// The open-file hard limit of this process (the servers and helpers inherit it).
pub(crate) fn nofile_hard_limit() -> u64 {
    // SAFETY: rlimit is plain old data.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes one rlimit into the valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    lim.rlim_max
}
