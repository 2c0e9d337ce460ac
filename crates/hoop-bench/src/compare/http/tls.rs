//! `hoop bench http --tls [--h2]`: hoop's HTTPS against nginx configured the same way (the
//! same certificate, suites in the same server order, session tickets, HTTP/2 by ALPN,
//! compression on the fly), with wrk (HTTP/1.1) or h2load (HTTP/2) as the load: 1 KiB, 64 KiB
//! and 1 MiB files, the static mix, the mix without precompressed variants (compressed on
//! the fly: hoop `--compress`, nginx `gzip on`), and new handshakes per second (a connection
//! per request, wrk). Servers pinned to one CPU, the client to another, rounds in
//! alternating order.
//!
//! What counts is verified: before its load each server's answers to every path of the cell
//! are fetched over TLS and compared byte for byte (a gzip body decoded); during the load
//! only 2xx answers count (wrk's non-2xx and socket errors, h2load's failures and other
//! statuses are subtracted), and h2load's body bytes must be the file's size times the
//! answers (plus less than one file per connection, cut by the end of the run) in the
//! single-file cells. A server that fails a check has no figure in that
//! cell, and the bench exits with an error.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::load::http::files::{file_name, make_files};
use crate::load::http::mix::{self, MixFile};
use crate::machine::proc::process_cpu;
use crate::output::Out;
use crate::plan::invalid;
use crate::target::child::{Ready, ServerChild};
use crate::target::nginx;
use crate::target::tls::{self as target, fetch, h2load_command, h2load_path, H2loadArgs};
use crate::target::wrk::{self, wrk_path, WrkArgs};

/// The servers compared by default, in run order.
pub(crate) const SERVERS: [&str; 3] = ["hoop", "hoop-epoll", "nginx"];

/// One cell of the TLS bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsCell {
    /// One file of this size, keep-alive.
    Size(u64),
    /// The static mix (with `.gz` variants), `Accept-Encoding: br, gzip`.
    Mix,
    /// The mix with no variants, `Accept-Encoding: gzip`: compressed on the fly.
    GzipMix,
    /// A new connection per request (`Connection: close`, 1 KiB): full handshakes.
    Handshakes,
}

impl TlsCell {
    /// Every cell, in table order.
    pub const ALL: [TlsCell; 6] = [
        TlsCell::Size(1024),
        TlsCell::Size(64 * 1024),
        TlsCell::Size(1 << 20),
        TlsCell::Mix,
        TlsCell::GzipMix,
        TlsCell::Handshakes,
    ];

    /// Its name on the command line and in the table.
    pub fn label(self) -> String {
        match self {
            TlsCell::Size(n) if n >= 1 << 20 => format!("{}m", n >> 20),
            TlsCell::Size(n) => format!("{}k", n >> 10),
            TlsCell::Mix => "mix".into(),
            TlsCell::GzipMix => "gzip-mix".into(),
            TlsCell::Handshakes => "handshakes".into(),
        }
    }

    /// The cell named `s`.
    pub fn parse(s: &str) -> io::Result<TlsCell> {
        TlsCell::ALL
            .into_iter()
            .find(|c| c.label() == s)
            .ok_or_else(|| {
                let names: Vec<String> = TlsCell::ALL.iter().map(|c| c.label()).collect();
                invalid(format!(
                    "unknown TLS cell {s:?} (one of {})",
                    names.join(", ")
                ))
            })
    }

    /// The `Accept-Encoding` its requests carry.
    fn accept_encoding(self) -> Option<&'static str> {
        match self {
            TlsCell::Mix => Some(mix::ACCEPT_ENCODING),
            TlsCell::GzipMix => Some("gzip"),
            _ => None,
        }
    }
}

/// The TLS bench as planned.
#[derive(Debug, Clone)]
pub struct TlsPlan {
    /// HTTP/2 (h2load) rather than HTTP/1.1 (wrk).
    pub h2: bool,
    /// Connections (each with one request in flight).
    pub conns: usize,
    /// Whole seconds per run.
    pub secs: u64,
    /// Rounds, servers in alternating order.
    pub rounds: u32,
    /// The cells.
    pub cells: Vec<TlsCell>,
    /// The servers.
    pub servers: Vec<String>,
    /// Files, certificate and nginx's prefix.
    pub dir: PathBuf,
}

impl TlsPlan {
    /// Seconds the runs take, about.
    pub fn planned_secs(&self) -> f64 {
        (self.cells.len() * self.servers.len()) as f64
            * self.rounds as f64
            * (self.secs as f64 + 0.5)
    }
}

/// One run, as a JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct TlsRun {
    /// `http-tls`.
    pub bench: &'static str,
    /// `http/1.1` or `h2`.
    pub protocol: &'static str,
    /// The load generator: `wrk` or `h2load`.
    pub tool: &'static str,
    /// The cell's label.
    pub cell: String,
    /// The server.
    pub server: String,
    /// The round (from 0).
    pub round: u32,
    /// Connections.
    pub conns: usize,
    /// Verified answers per second.
    pub req_per_sec: f64,
    /// Verified answers.
    pub requests: u64,
    /// Answers that did not count (errors, other statuses, a byte count that did not add up).
    pub errors: u64,
    /// The server's CPU time (user + system) per verified answer, microseconds.
    pub server_cpu_us_per_req: Option<f64>,
}

/// What the bench found.
#[derive(Debug, Default)]
pub struct TlsOutcome {
    /// Every run.
    pub runs: Vec<TlsRun>,
    /// Lines for the table's foot (a missing tool or server, a failed check).
    pub notes: Vec<String>,
    /// A server answered wrongly or a run could not be read.
    pub failed: bool,
}

/// The files a cell asks for, with what each answer must be.
struct Site {
    root: PathBuf,
    files: crate::load::http::files::Files,
    mix: Vec<MixFile>,
    plain_mix: Vec<MixFile>,
    cert: (PathBuf, PathBuf),
}

/// Runs the plan.
pub fn run_tls(plan: &TlsPlan, out: &Out) -> io::Result<TlsOutcome> {
    let mut o = TlsOutcome::default();
    let tool = match plan.h2 {
        true => h2load_path().ok_or_else(|| invalid(target::H2LOAD_MISSING))?,
        false => wrk_path().ok_or_else(|| invalid(wrk::WRK_MISSING))?,
    };
    let wrk_bin = wrk_path();
    std::fs::create_dir_all(&plan.dir)?;
    let (root, files) = make_files(&plan.dir)?;
    let (mix_files, mix_note) = mix::make(&root)?;
    o.notes.extend(mix_note);
    let site = Site {
        plain_mix: mix::make_plain_at(&root, "cmix")?,
        mix: mix_files,
        files,
        cert: target::make_cert(&plan.dir.join("tls"))?,
        root,
    };
    let (server_cpu, client_cpu) = crate::machine::pin_plan();
    let mut started = Vec::new();
    for name in &plan.servers {
        match start(name, &site, plan, server_cpu)? {
            Some(s) => started.push((name.clone(), s)),
            None => o.notes.push(format!("{name}: {}", nginx::MISSING)),
        }
    }
    for &cell in &plan.cells {
        // Before the load: each server's answers checked, once per cell.
        let mut ok: Vec<bool> = Vec::new();
        for (name, server) in &started {
            match check(cell, &site, server) {
                Ok(()) => ok.push(true),
                Err(e) => {
                    o.failed = true;
                    o.notes
                        .push(format!("{name}, {}: check failed: {e}", cell.label()));
                    ok.push(false);
                }
            }
        }
        for round in 0..plan.rounds {
            let mut order: Vec<usize> = (0..started.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                if !ok[i] {
                    continue;
                }
                let (name, server) = &mut started[i];
                out.start(&format!("https {} {name}", cell.label()), plan.secs as f64);
                let run = load(
                    plan,
                    cell,
                    &site,
                    server,
                    (&tool, wrk_bin.as_deref()),
                    client_cpu,
                );
                out.done(plan.secs as f64 + 0.5);
                server.check_alive()?;
                match run {
                    Ok(mut r) => {
                        r.server = name.clone();
                        r.round = round;
                        if r.errors > 0 || r.requests == 0 {
                            o.notes.push(format!(
                                "{name}, {} round {round}: {} verified, {} not counted",
                                cell.label(),
                                r.requests,
                                r.errors
                            ));
                        }
                        out.measurement(&r);
                        o.runs.push(r);
                    }
                    Err(e) => {
                        o.failed = true;
                        o.notes.push(format!("{name}, {}: {e}", cell.label()));
                    }
                }
            }
        }
    }
    Ok(o)
}

/// Starts server `name` serving the site over HTTPS (`Ok(None)`: nginx is not installed).
fn start(
    name: &str,
    site: &Site,
    plan: &TlsPlan,
    cpu: Option<usize>,
) -> io::Result<Option<ServerChild>> {
    let (cert, key) = (&site.cert.0, &site.cert.1);
    let (cmd, ready) = match name {
        "hoop" | "hoop-epoll" => {
            let driver = if name == "hoop" { "uring" } else { "epoll" };
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.args(["serve", "http", "--addr", "127.0.0.1:0", "--root"])
                .arg(&site.root)
                .arg("--tls-cert")
                .arg(cert)
                .arg("--tls-key")
                .arg(key)
                .args(["--compress", "--driver", driver])
                .arg(format!("--http2={}", plan.h2));
            (cmd, Ready::ListeningLine)
        }
        "nginx" => {
            let Some(bin) = nginx::find() else {
                return Ok(None);
            };
            let addr = nginx::free_addr()?;
            let root = std::fs::canonicalize(&site.root)?;
            let prefix = plan.dir.join("nginx-tls");
            let text = target::nginx_config(&prefix, &root, addr, (cert, key), plan.h2, true);
            (
                nginx::command_with(&bin, &prefix, &text)?,
                Ready::Connect(addr),
            )
        }
        other => {
            return Err(invalid(format!(
                "--tls: unknown server {other} (hoop, hoop-epoll, nginx)"
            )))
        }
    };
    ServerChild::spawn_cmd(name, cmd, cpu, ready).map(Some)
}

/// The paths of a cell.
fn paths(cell: TlsCell, site: &Site) -> Vec<String> {
    match cell {
        TlsCell::Size(n) => vec![format!("/{}", file_name(n))],
        TlsCell::Handshakes => vec![format!("/{}", file_name(1024))],
        TlsCell::Mix => site.mix.iter().map(|f| f.path.clone()).collect(),
        TlsCell::GzipMix => site.plain_mix.iter().map(|f| f.path.clone()).collect(),
    }
}

/// Fetches every path of the cell over TLS and compares each answer with its file.
fn check(cell: TlsCell, site: &Site, server: &ServerChild) -> io::Result<()> {
    let enc = cell.accept_encoding();
    let expect_of = |path: &str| -> Option<(&[u8], Option<&[u8]>)> {
        match cell {
            TlsCell::Size(n) => site.files.get(&n).map(|b| (&b[..], None)),
            TlsCell::Handshakes => site.files.get(&1024).map(|b| (&b[..], None)),
            TlsCell::Mix => site
                .mix
                .iter()
                .find(|f| f.path == path)
                .map(|f| (&f.identity[..], f.gzip.as_deref())),
            TlsCell::GzipMix => site
                .plain_mix
                .iter()
                .find(|f| f.path == path)
                .map(|f| (&f.identity[..], None)),
        }
    };
    for path in paths(cell, site) {
        let Some((identity, gz)) = expect_of(&path) else {
            return Err(io::Error::other(format!("{path}: no file")));
        };
        let got = fetch(server.addr, &path, enc)?;
        if got.status != 200 {
            return Err(io::Error::other(format!("{path}: status {}", got.status)));
        }
        let body = match got.content_encoding.as_deref() {
            None => got.body,
            Some("gzip") if gz.is_some() && cell == TlsCell::Mix => {
                if Some(&got.body[..]) != gz {
                    return Err(io::Error::other(format!(
                        "{path}: not the .gz variant's bytes"
                    )));
                }
                continue;
            }
            Some("gzip") => {
                let mut decoded = Vec::new();
                flate2::read::GzDecoder::new(&got.body[..]).read_to_end(&mut decoded)?;
                decoded
            }
            Some(other) => {
                return Err(io::Error::other(format!(
                    "{path}: unasked Content-Encoding {other}"
                )))
            }
        };
        if body != identity {
            return Err(io::Error::other(format!(
                "{path}: {} body bytes differ from the file's {}",
                body.len(),
                identity.len()
            )));
        }
        if got.alpn.as_deref() != Some(b"http/1.1") {
            return Err(io::Error::other(format!(
                "{path}: ALPN http/1.1 not agreed"
            )));
        }
    }
    Ok(())
}

/// One load run against `server`.
fn load(
    plan: &TlsPlan,
    cell: TlsCell,
    site: &Site,
    server: &ServerChild,
    (tool, wrk_bin): (&Path, Option<&Path>),
    client_cpu: Option<usize>,
) -> io::Result<TlsRun> {
    let base = format!("https://localhost:{}", server.addr.port());
    let url_of = |p: &str| format!("https://127.0.0.1:{}{p}", server.addr.port());
    let paths = paths(cell, site);
    let cpu_before = process_cpu(server.pid()).ok();
    let use_h2load = plan.h2 && cell != TlsCell::Handshakes;
    let (protocol, tool_name, requests, errors, rps) = if use_h2load {
        let uris = plan.dir.join(format!("tls-uris-{}.txt", cell.label()));
        let many = paths.len() > 1;
        if many {
            let list: Vec<String> = paths.iter().map(|p| url_of(p)).collect();
            std::fs::write(&uris, list.join("\n") + "\n")?;
        }
        let first = url_of(&paths[0]);
        let args = H2loadArgs {
            conns: plan.conns,
            secs_whole: plan.secs,
            client_cpu,
            accept_encoding: cell.accept_encoding(),
            url: &first,
            uris: many.then_some(uris.as_path()),
        };
        let outp = h2load_command(tool, &args).output()?;
        let text = String::from_utf8_lossy(&outp.stdout).to_string();
        let s = target::parse_h2load(&text).ok_or_else(|| {
            io::Error::other(format!("cannot read h2load's output: {}", text.trim()))
        })?;
        let (mut ok, mut bad) = (s.ok, s.bad);
        if let TlsCell::Size(n) = cell {
            // Every 2xx carried the whole file, or none counts: the body bytes are the
            // answers' files plus at most one unfinished answer per connection at the end.
            let (least, most) = (s.ok * n, (s.ok + plan.conns as u64) * n);
            if s.data_bytes < least || s.data_bytes >= most {
                bad += ok;
                ok = 0;
            }
        }
        let rps = match ok + bad {
            0 => 0.0,
            total => s.req_per_sec * ok as f64 / total as f64,
        };
        ("h2", "h2load", ok, bad, rps)
    } else {
        let Some(wrk_bin) = wrk_bin else {
            return Err(invalid(wrk::WRK_MISSING));
        };
        let script_path = plan.dir.join(format!("tls-{}.lua", cell.label()));
        if paths.len() > 1 {
            std::fs::write(&script_path, mix::wrk_script_of(&paths))?;
        }
        let url = if paths.len() > 1 {
            base.clone()
        } else {
            url_of(&paths[0])
        };
        let args = WrkArgs {
            conns: plan.conns,
            secs_whole: plan.secs,
            client_cpu,
            close: cell == TlsCell::Handshakes,
            script: (paths.len() > 1).then(|| {
                (
                    cell.accept_encoding().unwrap_or("identity"),
                    script_path.as_path(),
                )
            }),
            url: &url,
        };
        let outp = wrk::command(wrk_bin, &args).output()?;
        let (requests, rps, errors) = wrk::read(&outp)?;
        let ok = requests.saturating_sub(errors);
        let rps = match requests {
            0 => 0.0,
            n => rps * ok as f64 / n as f64,
        };
        ("http/1.1", "wrk", ok, errors, rps)
    };
    let cpu = match (cpu_before, process_cpu(server.pid()).ok()) {
        (Some(a), Some(b)) if requests > 0 => {
            Some((b.saturating_sub(a)).as_secs_f64() * 1e6 / requests as f64)
        }
        _ => None,
    };
    Ok(TlsRun {
        bench: "http-tls",
        protocol,
        tool: tool_name,
        cell: cell.label(),
        server: String::new(),
        round: 0,
        conns: plan.conns,
        req_per_sec: rps,
        requests,
        errors,
        server_cpu_us_per_req: cpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_parse_by_label() {
        for c in TlsCell::ALL {
            assert_eq!(TlsCell::parse(&c.label()).unwrap(), c);
        }
        assert_eq!(TlsCell::Size(1024).label(), "1k");
        assert!(TlsCell::parse("2k").is_err());
    }
}
