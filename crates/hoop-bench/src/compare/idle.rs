//! `hoop bench idle`'s comparison: the servers, the checked plan, and one server's run (its
//! active load alone, its idle connections opened by helper processes, the same load with them
//! held, then RSS once they left).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::load::echo::{self as echo_client, ClientConfig, ClientOutcome};
use crate::load::idle as holder;
use crate::machine::nofile_hard_limit;
use crate::machine::proc::rss_bytes;
use crate::measure::latency as stats;
use crate::output::Out;
use crate::plan::idle::{IdlePlan, DEFAULT_IDLE};
use crate::plan::{check_conns, check_len, check_secs, invalid};
use crate::record::idle::IdleResult;
use crate::target::child::ServerChild;

/// The servers by default, in run order.
pub(crate) const SERVERS: [&str; 4] = ["hoop", "hoop-epoll", "tokio", "monoio"];
/// The servers `--servers` accepts.
const KNOWN: [&str; 5] = ["hoop", "hoop-basic", "hoop-epoll", "tokio", "monoio"];
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
    /// The plan of `hoop bench idle`: the servers checked, the open-file limit raised (every
    /// server and helper inherits it), the rest as [`Plan::new`] checks it.
    pub(crate) fn check(p: IdlePlan) -> io::Result<Plan> {
        let asked = p
            .servers
            .unwrap_or_else(|| SERVERS.iter().map(|s| s.to_string()).collect());
        let servers = crate::plan::parse_server_list(Some(asked), &KNOWN)?;
        crate::machine::raise_nofile_limit();
        Plan::new(
            servers,
            p.idle,
            p.conns,
            p.len,
            p.secs,
            p.sample,
            p.per_client,
        )
    }

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
