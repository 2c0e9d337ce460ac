//! wrk beside the load generator in `hoop bench http`'s side-by-side runs: one run against a
//! server in a cell, the server measured meanwhile, as an `HttpResult` with `client: "wrk"`.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::Duration;

use crate::load::http::files::file_name;
use crate::load::http::mix;
use crate::measure::latency as stats;
use crate::measure::usage::ServerProbe;
use crate::output::Out;
use crate::plan::http::{Cell, RUN_OVERHEAD_SECS};
use crate::record::http::HttpResult;
use crate::target::child::ServerChild;
use crate::target::wrk::{self, wrk_secs, WrkArgs};

/// One wrk run beside the load generator's, with its progress and warnings; `None` (and a
/// line in the notes) when wrk could not run or be read. wrk's errors never fail the run:
/// it verifies no body, the load generator does.
pub(crate) fn run_wrk_logged(
    wrk: &Path,
    child: &ServerChild,
    cell: &Cell,
    script: Option<&Path>,
    run: WrkRun<'_>,
    out: &Out,
    notes: &mut Vec<String>,
) -> Option<HttpResult> {
    let what = format!(
        "wrk {}: {}, c={} {} round {}",
        run.server,
        cell.file_label(),
        cell.conns,
        cell.mode(),
        run.round + 1
    );
    let secs = wrk_secs(run.secs) as f64 + RUN_OVERHEAD_SECS;
    out.start(&what, secs);
    let r = run_wrk_cell(wrk, child, cell, script, run);
    out.done(secs);
    match r {
        Ok(r) => {
            if r.errors > 0 || r.requests == 0 {
                out.note(&format!(
                    "warning: {what}: {} requests, {} error(s) (wrk: socket errors and non-2xx)",
                    r.requests, r.errors
                ));
            }
            Some(r)
        }
        Err(e) => {
            out.note(&format!("warning: {what}: {e}"));
            notes.push(format!("{what}: wrk failed: {e}"));
            None
        }
    }
}

/// One wrk run: against which server, how.
pub(crate) struct WrkRun<'a> {
    /// The server's name in the results.
    pub server: &'a str,
    /// `-c`.
    pub conns: usize,
    /// The round, for pairing.
    pub round: u32,
    /// Seconds asked (rounded up to whole seconds).
    pub secs: f64,
    /// wrk is pinned there (with `taskset`).
    pub client_cpu: Option<usize>,
    /// The server's CPUs, for the result.
    pub server_cpus: Option<String>,
    /// Server and client pinned to different CPUs.
    pub pinned: bool,
}

/// `wrk -t1 -c50` on the 1 KiB file against hoop (the second-client check of the table).
pub(crate) fn run_wrk(wrk: &Path, server: &ServerChild, run: WrkRun<'_>) -> io::Result<HttpResult> {
    run_wrk_cell(wrk, server, &Cell::file(1024, 50, false), None, run)
}

/// `wrk -t1 -cCONNS -dSECS` on the cell's test file, pinned to the client CPU, the server
/// measured over the run: `-H 'Connection: close'` in close cells; in the static mix
/// `-H 'Accept-Encoding: br, gzip'` and `script` (`-s`), cycling over the mix's paths.
fn run_wrk_cell(
    wrk: &Path,
    server: &ServerChild,
    cell: &Cell,
    script: Option<&Path>,
    run: WrkRun<'_>,
) -> io::Result<HttpResult> {
    let file_bytes = cell.file_bytes;
    let url = if cell.mix {
        format!("http://{}/mix/", server.addr)
    } else {
        format!("http://{}/{}", server.addr, file_name(file_bytes))
    };
    let secs_whole = wrk_secs(run.secs);
    let script = match (cell.mix, script) {
        (false, _) => None,
        (true, Some(s)) => Some((mix::ACCEPT_ENCODING, s)),
        (true, None) => return Err(io::Error::other("no wrk script for the static mix")),
    };
    let mut cmd = wrk::command(
        wrk,
        &WrkArgs {
            conns: run.conns,
            secs_whole,
            client_cpu: run.client_cpu,
            close: cell.close,
            script,
            url: &url,
        },
    );
    let probe = ServerProbe::start(server.pid(), Duration::from_secs(secs_whole));
    let outp = cmd.output()?;
    let (requests, rps, errors) = wrk::read(&outp)?;
    let m = probe.finish(Duration::from_secs(secs_whole), requests);
    Ok(HttpResult {
        bench: "http",
        server: run.server.into(),
        client: "wrk",
        url,
        round: run.round,
        file_bytes,
        conns: run.conns,
        mode: cell.mode(),
        pipeline: 1,
        secs: secs_whole as f64,
        requests,
        errors,
        errors_by_kind: BTreeMap::new(),
        first_error: None,
        verified_bytes: false,
        loopback_mtu: crate::target::netns::loopback_mtu(),
        rps,
        mib_s: stats::round3(rps * file_bytes as f64 / (1 << 20) as f64),
        p50_us: None,
        p99_us: None,
        p999_us: None,
        max_us: None,
        client_cpu_pct: None,
        server_cpu_pct: m.cpu_pct,
        server_cpu_us_per_req: m.cpu_us_per_req,
        syscalls_per_req: m.syscalls_per_req,
        ctx_switches_per_req: m.ctx_switches_per_req,
        server_cpus: run.server_cpus,
        server_threads: m.threads,
        client_bound: false,
        pinned: run.pinned,
        connected: run.conns,
        mix: cell.mix,
        requests_by_encoding: None,
        wrk_req_per_sec: None,
        reconnects: 0,
    })
}
