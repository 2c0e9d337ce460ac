//! `hoop soak`: echo and HTTP servers on both drivers and file I/O under load for N seconds,
//! with random cancellations, connection resets, half-closes and slow readers (and injected
//! faults when built with `fault-injection` and run with `HOOP_FAULTS`), every byte verified.
//! Samples fds, RSS and operations in flight every few seconds; fails on a wrong byte, a hang,
//! an fd or in-flight slot that does not come back once the load stops, or RSS that keeps
//! growing after warm-up (`growth.rs` states the rule). Prints a summary table (`--json`: the
//! samples and the summary as JSON) and writes `soak.svg` beside the report.

mod chart;
mod echo;
mod files;
mod growth;
mod http;
mod sample;
mod tally;

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use hoop::DriverKind;
use serde::Serialize;

use self::sample::{ChildSample, Sample};
use self::tally::{Failures, LoadSummary, Rng, Tally};
use hoop_bench::machine;

/// `hoop soak` arguments.
#[derive(Debug, Args)]
pub struct SoakArgs {
    /// How long the load runs, in seconds.
    #[arg(long, default_value_t = 60)]
    secs: u64,
    /// Seed of every random choice (default: taken from the clock and printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Print the samples and the summary as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    json: bool,
    /// Directory for soak.svg (default: target/hoop-report of this build).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// How long fds and in-flight operations may take to come back once the load stopped.
const SETTLE: Duration = Duration::from_secs(5);
/// Past the run's end, how long the loads may take to stop before the soak calls it a hang.
const HARD_STOP_GRACE: Duration = Duration::from_secs(60);

#[derive(Debug, Serialize)]
struct Machine {
    cpu: String,
    cores_online: usize,
    kernel: String,
    pinning: &'static str,
}

#[derive(Debug, Serialize)]
struct Report {
    machine: Machine,
    secs: u64,
    seed: u64,
    drivers: Vec<String>,
    faults: Option<String>,
    faults_injected: Vec<(&'static str, u64)>,
    loads: Vec<LoadSummary>,
    start: Sample,
    end: Sample,
    rss_rule: &'static str,
    samples: Vec<Sample>,
    failures: Vec<String>,
    passed: bool,
    svg: Option<String>,
}

fn fd_count(pid: Option<u32>) -> usize {
    let dir = match pid {
        Some(p) => format!("/proc/{p}/fd"),
        None => "/proc/self/fd".to_string(),
    };
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

/// A process's fds by kind (`socket`, `pipe`, `anon_inode:[eventfd]`, `file`, ...).
fn fd_census(pid: u32) -> Vec<(String, usize)> {
    let mut kinds: Vec<(String, usize)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for e in dir.flatten() {
            let target = std::fs::read_link(e.path())
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            let kind = match target.split_once(':') {
                Some((k, rest)) if k == "anon_inode" => format!("{k}:{rest}"),
                Some((k, _)) => k.to_string(),
                None => "file".to_string(),
            };
            match kinds.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => kinds.push((kind, 1)),
            }
        }
    }
    kinds.sort();
    kinds
}

fn fmt_census(c: &[(String, usize)]) -> String {
    c.iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The HTTP server keeps up to this many spare splice pipes per thread (http/splice.rs's
/// `POOL_MAX`), two fds each: its pipe count may grow by that much under concurrency.
const HTTP_PIPE_POOL_FDS: usize = 2 * 64;

/// Whether a child's fds came back: every kind as before, pipes at most the splice pool's
/// bound above (fewer is fine).
fn census_back(before: &[(String, usize)], after: &[(String, usize)]) -> bool {
    let count = |c: &[(String, usize)], k: &str| c.iter().find(|(x, _)| x == k).map_or(0, |e| e.1);
    let kinds = before.iter().chain(after).map(|(k, _)| k.as_str());
    kinds.into_iter().all(|k| {
        let (b, a) = (count(before, k), count(after, k));
        if k == "pipe" {
            // The pool also shrinks: a pipe a failed splice left with unknown contents is
            // closed, not kept. Only growth past the pool's bound is a leak.
            a <= b + HTTP_PIPE_POOL_FDS
        } else {
            a == b
        }
    })
}

fn rss_kib(pid: Option<u32>) -> u64 {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".to_string(),
    };
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Runs the soak; an error when it failed (the reasons are printed first).
pub fn run(args: SoakArgs) -> io::Result<()> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let say = |line: String| {
        if args.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    let machine = Machine {
        cpu: machine::cpu_model(),
        // SAFETY: sysconf has no memory-safety preconditions.
        cores_online: usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) })
            .unwrap_or(0),
        kernel: machine::kernel(),
        pinning: "none (servers, clients and file loads share every CPU)",
    };
    say(format!(
        "hoop soak: {} s, seed {seed}, on {} ({} CPUs), {}; pinning: {}",
        args.secs, machine.cpu, machine.cores_online, machine.kernel, machine.pinning
    ));
    let faults = hoop::fault::describe();
    match &faults {
        Some(f) => say(format!("faults: HOOP_FAULTS={f}")),
        None if std::env::var_os("HOOP_FAULTS").is_some() => say(
            "faults: HOOP_FAULTS is set but this build has no fault injection (build with \
             --features fault-injection)"
                .into(),
        ),
        None => say("faults: none (no HOOP_FAULTS)".into()),
    }
    let mut drivers = vec![DriverKind::Uring, DriverKind::Epoll];
    if let Err(e) = hoop::Runtime::builder().driver(DriverKind::Uring).build() {
        say(format!(
            "io_uring unavailable here, soaking epoll only: {e}"
        ));
        drivers.retain(|d| *d == DriverKind::Epoll);
    }

    // A watchdog: the loads bound every operation, but a hang past the bound must still end
    // the soak, as a failure.
    let bound = Duration::from_secs(args.secs) + SETTLE + HARD_STOP_GRACE;
    std::thread::spawn(move || {
        std::thread::sleep(bound);
        eprintln!(
            "hoop soak: FAILED: still running {} s past its end (hang)",
            bound.as_secs()
        );
        std::process::exit(1);
    });

    let dir = std::env::temp_dir().join(format!("hoop-soak-{}", std::process::id()));
    let root = http::Root::create(&dir.join("www"), seed)?;
    let failures = Arc::new(Failures::default());
    let mut loads: Vec<(String, Arc<Tally>)> = Vec::new();
    let mut echo_servers = Vec::new();
    let mut http_servers = Vec::new();
    for (i, &d) in drivers.iter().enumerate() {
        let tally = Arc::new(Tally::default());
        echo_servers.push((
            d,
            echo::EchoServer::start(d, seed ^ i as u64, tally.clone())?,
        ));
        loads.push((format!("echo {d}"), tally));
        http_servers.push((d, http::start(d, &root.dir)?));
        loads.push((format!("http {d}"), Arc::new(Tally::default())));
        loads.push((format!("file {d}"), Arc::new(Tally::default())));
    }
    let file_in_flight: Vec<Arc<AtomicUsize>> = drivers
        .iter()
        .map(|_| Arc::new(AtomicUsize::new(0)))
        .collect();
    // Warm-up before the baseline: every file once through each HTTP server (its splice pipes
    // and cache are made on first use and kept), one echo through each echo server.
    let scratch = Tally::default();
    for (_, c) in &http_servers {
        http::warm_up(c.addr, &root, &scratch)?;
    }
    for (_, e) in &echo_servers {
        echo::warm_up(e.addr, &scratch)?;
    }
    std::thread::sleep(Duration::from_millis(500));

    let started = Instant::now();
    let sample = |last_ops: &mut u64, last_t: &mut f64| -> Sample {
        let t = started.elapsed().as_secs_f64();
        let ops: u64 = loads
            .iter()
            .map(|(_, l)| l.ops.load(Ordering::Relaxed))
            .sum();
        let rate = if t > *last_t {
            (ops - *last_ops) as f64 / (t - *last_t)
        } else {
            0.0
        };
        *last_ops = ops;
        *last_t = t;
        Sample {
            t_secs: t,
            fds: fd_count(None),
            rss_kib: rss_kib(None),
            in_flight: echo_servers
                .iter()
                .map(|(_, s)| s.in_flight.load(Ordering::Relaxed))
                .chain(file_in_flight.iter().map(|a| a.load(Ordering::Relaxed)))
                .sum(),
            ops_per_sec: rate,
            children: http_servers
                .iter()
                .map(|(d, c)| ChildSample {
                    name: format!("hoop serve http --driver {d}"),
                    fds: fd_count(Some(c.pid())),
                    rss_kib: rss_kib(Some(c.pid())),
                })
                .collect(),
        }
    };
    let (mut last_ops, mut last_t) = (0u64, 0f64);
    let start = sample(&mut last_ops, &mut last_t);
    let start_census: std::collections::HashMap<String, Vec<(String, usize)>> = http_servers
        .iter()
        .map(|(d, c)| (format!("hoop serve http --driver {d}"), fd_census(c.pid())))
        .collect();
    let until = Instant::now() + Duration::from_secs(args.secs);
    let mut samples = vec![start.clone()];

    let every = Duration::from_secs((args.secs / 20).clamp(1, 5));
    std::thread::scope(|sc| {
        for (i, &d) in drivers.iter().enumerate() {
            let echo_addr = echo_servers[i].1.addr;
            let http_addr = http_servers[i].1.addr;
            let (echo_tally, http_tally, file_tally) =
                (&loads[3 * i].1, &loads[3 * i + 1].1, &loads[3 * i + 2].1);
            for c in 0..2u64 {
                let f = &failures;
                let rng = Rng::seeded(seed, 100 * i as u64 + c);
                sc.spawn(move || {
                    let name = format!("echo {d}");
                    echo::client(echo_addr, rng, echo_tally.client(until, f, &name))
                });
                let rng = Rng::seeded(seed, 100 * i as u64 + 10 + c);
                let root = &root;
                sc.spawn(move || {
                    let name = format!("http {d}");
                    http::client(http_addr, root, rng, http_tally.client(until, f, &name))
                });
            }
            let (f, in_flight) = (&failures, file_in_flight[i].clone());
            let path = dir.join(format!("file-{d}"));
            sc.spawn(move || {
                files::run(
                    d,
                    path,
                    seed ^ (i as u64) << 8,
                    until,
                    file_tally,
                    f,
                    in_flight.clone(),
                    &format!("file {d}"),
                );
                in_flight.store(0, Ordering::Relaxed);
            });
        }
        while Instant::now() < until {
            std::thread::sleep(every.min(until.saturating_duration_since(Instant::now())));
            samples.push(sample(&mut last_ops, &mut last_t));
        }
    });

    // The load stopped and every client socket is closed: fds and slots must come back.
    let settle_until = Instant::now() + SETTLE;
    let mut end = sample(&mut last_ops, &mut last_t);
    loop {
        let back = end.fds == start.fds
            && end.in_flight <= start.in_flight
            && start.children.iter().zip(&http_servers).all(|(s, (_, c))| {
                census_back(
                    start_census.get(&s.name).map_or(&[][..], |v| v.as_slice()),
                    &fd_census(c.pid()),
                )
            });
        if back || Instant::now() >= settle_until {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        end = sample(&mut last_ops, &mut last_t);
    }
    samples.push(end.clone());
    if end.fds != start.fds {
        failures.push(format!(
            "fds of this process: {} before the load, {} {} s after it stopped",
            start.fds,
            end.fds,
            SETTLE.as_secs()
        ));
    }
    if end.in_flight > start.in_flight {
        failures.push(format!(
            "operations in flight: {} before the load, {} after it stopped",
            start.in_flight, end.in_flight
        ));
    }
    for (s, (_, c)) in start.children.iter().zip(&http_servers) {
        let before = start_census.get(&s.name).cloned().unwrap_or_default();
        let after = fd_census(c.pid());
        if !census_back(&before, &after) {
            failures.push(format!(
                "fds of {}: before the load {}, after it {} (rule: every kind as before; \
                 pipes may grow by the splice pool, at most {HTTP_PIPE_POOL_FDS}, or shrink)",
                s.name,
                fmt_census(&before),
                fmt_census(&after)
            ));
        }
    }
    let warmup = args.secs as f64 / 4.0;
    let own: Vec<(f64, u64)> = samples.iter().map(|s| (s.t_secs, s.rss_kib)).collect();
    if let Some(why) = growth::keeps_growing(&own, warmup) {
        failures.push(format!("this process: {why}"));
    }
    for (i, (name, _)) in start.children.iter().map(|c| (&c.name, ())).enumerate() {
        let series: Vec<(f64, u64)> = samples
            .iter()
            .filter_map(|s| s.children.get(i).map(|c| (s.t_secs, c.rss_kib)))
            .collect();
        if let Some(why) = growth::keeps_growing(&series, warmup) {
            failures.push(format!("{name}: {why}"));
        }
    }
    drop(echo_servers);
    drop(http_servers);
    let _ = std::fs::remove_dir_all(&dir);

    let summaries: Vec<LoadSummary> = loads.iter().map(|(n, t)| t.snapshot(n)).collect();
    let failures = failures.take();
    let out = args.out.clone().unwrap_or_else(machine::default_out_dir);
    let svg = std::fs::create_dir_all(&out).ok().and_then(|()| {
        let path = out.join("soak.svg");
        let title = format!("hoop soak: {} s, seed {seed}", args.secs);
        match chart::draw(&path, &samples, &title) {
            Ok(()) => Some(path.display().to_string()),
            Err(e) => {
                eprintln!("hoop soak: cannot draw soak.svg: {e}");
                None
            }
        }
    });
    let report = Report {
        machine,
        secs: args.secs,
        seed,
        drivers: drivers.iter().map(|d| d.to_string()).collect(),
        faults,
        faults_injected: hoop::fault::counts(),
        loads: summaries,
        start,
        end,
        rss_rule: "after warm-up (the first quarter), RSS may not end more than max(16 MiB, 20%) \
                   above its post-warm-up low with a least-squares slope above 64 KiB/s",
        samples,
        passed: failures.is_empty(),
        failures,
        svg,
    };
    print_table(&report, args.json);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(io::Error::other)?
        );
    }
    if report.passed {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "soak failed (seed {seed}{}): {}",
            report
                .faults
                .as_ref()
                .map(|f| format!(", HOOP_FAULTS={f}"))
                .unwrap_or_default(),
            report.failures.join("; ")
        )))
    }
}

fn print_table(r: &Report, to_stderr: bool) {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<12} {:>10} {:>14} {:>8} {:>7} {:>7} {:>6} {:>8}\n",
        "load", "ops", "bytes verified", "cancels", "resets", "halfcl", "slow", "errors"
    ));
    for l in &r.loads {
        out.push_str(&format!(
            "{:<12} {:>10} {:>14} {:>8} {:>7} {:>7} {:>6} {:>8}\n",
            l.load,
            l.ops,
            l.bytes_verified,
            l.cancellations,
            l.resets,
            l.half_closes,
            l.slow_reads,
            l.errors
        ));
    }
    out.push_str(&format!(
        "this process: fds {} -> {}, RSS {:.1} -> {:.1} MiB, in flight {} -> {}\n",
        r.start.fds,
        r.end.fds,
        r.start.rss_kib as f64 / 1024.0,
        r.end.rss_kib as f64 / 1024.0,
        r.start.in_flight,
        r.end.in_flight
    ));
    for (s, e) in r.start.children.iter().zip(&r.end.children) {
        out.push_str(&format!(
            "{}: fds {} -> {}, RSS {:.1} -> {:.1} MiB\n",
            s.name,
            s.fds,
            e.fds,
            s.rss_kib as f64 / 1024.0,
            e.rss_kib as f64 / 1024.0
        ));
    }
    let injected: Vec<String> = r
        .faults_injected
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    if !injected.is_empty() {
        out.push_str(&format!("faults injected: {}\n", injected.join(", ")));
    }
    if let Some(svg) = &r.svg {
        out.push_str(&format!("chart: {svg}\n"));
    }
    if r.passed {
        out.push_str("soak: PASSED\n");
    } else {
        for f in &r.failures {
            out.push_str(&format!("soak: FAILED: {f}\n"));
        }
    }
    if to_stderr {
        eprint!("{out}");
    } else {
        print!("{out}");
    }
}

#[cfg(test)]
mod tests {
    use super::census_back;

    fn c(v: &[(&str, usize)]) -> Vec<(String, usize)> {
        v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    #[test]
    fn fd_census_rule() {
        let before = c(&[("pipe", 4), ("socket", 1)]);
        assert!(census_back(&before, &c(&[("pipe", 6), ("socket", 1)])));
        assert!(!census_back(&before, &c(&[("pipe", 4), ("socket", 2)])));
        assert!(!census_back(
            &before,
            &c(&[("pipe", 4), ("socket", 1), ("file", 1)])
        ));
        assert!(!census_back(
            &before,
            &c(&[("pipe", 4 + 130), ("socket", 1)])
        ));
        assert!(census_back(&before, &c(&[("pipe", 2), ("socket", 1)])));
    }
}
