//! The suite's ratio charts: hoop (io_uring) against every other server of the echo, HTTP,
//! HTTP profile and fan-out comparisons, cell by cell.

use std::path::Path;

use crate::compare::Sample;
use crate::record::arena::ArenaResult;
use crate::record::echo::EchoResult;
use crate::record::fanout::FanoutResult;
use crate::record::http::HttpResult;
use crate::report::ratio::{CellOf, RatioChart};

/// Which samples a cell holds.
type Pred<R> = Box<dyn Fn(&R) -> bool>;

/// The servers of `results` other than hoop, in order of first appearance, with `label`s.
fn peers_of<R: Sample>(results: &[R], label: fn(&str) -> &str) -> Vec<(String, String)> {
    let mut peers: Vec<(String, String)> = Vec::new();
    for r in results {
        let t = r.target();
        if t != "hoop" && !peers.iter().any(|(n, _)| n == t) {
            peers.push((t.to_string(), label(t).to_string()));
        }
    }
    peers
}

/// Echo: requests/s of hoop over each peer, one cell per (connections, length).
pub(crate) fn echo(echo: &[EchoResult]) -> RatioChart {
    let configs = crate::report::echo::configurations(echo);
    let preds: Vec<Pred<EchoResult>> = configs
        .iter()
        .map(|&(c, l)| {
            Box::new(move |r: &EchoResult| r.conns == c && r.len_bytes == l) as Pred<EchoResult>
        })
        .collect();
    let cells: Vec<CellOf<'_, EchoResult>> = configs
        .iter()
        .zip(&preds)
        .map(|(&(c, l), p)| (format!("c={c} l={l}"), p.as_ref()))
        .collect();
    RatioChart::of(
        "echo: hoop's requests/s over each peer's (paired by round; whiskers: the rounds' range)",
        "hoop / peer",
        echo,
        "hoop",
        &peers_of(echo, crate::report::echo::label),
        &cells,
        |r| Some(r.rps),
    )
}

/// HTTP: requests/s of hoop over each peer, one cell per (file, connections, mode), loaded by
/// hoop's own client (the one that verifies bodies).
pub(crate) fn http(http: &[HttpResult]) -> RatioChart {
    let mine: Vec<&HttpResult> = http.iter().filter(|r| r.client == "hoop").collect();
    let cells_of = crate::report::http::cells_of(http);
    let preds: Vec<Pred<&HttpResult>> = cells_of
        .iter()
        .map(|c| {
            let (bytes, conns, close, mix) = (c.file_bytes, c.conns, c.close, c.mix);
            Box::new(move |r: &&HttpResult| {
                r.file_bytes == bytes
                    && r.conns == conns
                    && (r.mode == "close") == close
                    && r.mix == mix
            }) as Pred<&HttpResult>
        })
        .collect();
    let cells: Vec<CellOf<'_, &HttpResult>> = cells_of
        .iter()
        .zip(&preds)
        .map(|(c, p)| (c.name(), p.as_ref()))
        .collect();
    RatioChart::of(
        "http: hoop's requests/s over each peer's (paired by round; whiskers: the rounds' range)",
        "hoop / peer",
        &mine,
        "hoop",
        &peers_of(&mine, crate::plan::http::label),
        &cells,
        |r| Some(r.rps),
    )
}

/// Fan-out: deliveries/s of hoop over each peer, unloaded and with the CPU hog.
pub(crate) fn fanout(fanout: &[FanoutResult]) -> RatioChart {
    let unloaded = |r: &FanoutResult| !r.hog;
    let hogged = |r: &FanoutResult| r.hog;
    let mut cells: Vec<CellOf<'_, FanoutResult>> = Vec::new();
    if fanout.iter().any(|r| !r.hog) {
        cells.push(("unloaded".into(), &unloaded));
    }
    if fanout.iter().any(|r| r.hog) {
        cells.push(("CPU hog on the server's core".into(), &hogged));
    }
    RatioChart::of(
        "fan-out: hoop's deliveries/s over each peer's (paired by round; whiskers: the rounds' range)",
        "hoop / peer",
        fanout,
        "hoop",
        &peers_of(fanout, crate::report::fanout::label),
        &cells,
        |r| Some(r.deliveries_per_sec),
    )
}

/// HttpArena's profiles: requests/s of hoop (io_uring) over each server, one cell per profile
/// and connection count, the one-thread pinned rows (the targets) only.
pub(crate) fn arena(results: &[ArenaResult]) -> RatioChart {
    let targets: Vec<&ArenaResult> = results.iter().filter(|r| r.target).collect();
    let mut keys: Vec<(&'static str, usize)> = Vec::new();
    for r in &targets {
        if !keys.contains(&(r.profile, r.conns)) {
            keys.push((r.profile, r.conns));
        }
    }
    let preds: Vec<Pred<&ArenaResult>> = keys
        .iter()
        .map(|&(p, c)| {
            Box::new(move |r: &&ArenaResult| r.profile == p && r.conns == c) as Pred<&ArenaResult>
        })
        .collect();
    let cells: Vec<CellOf<'_, &ArenaResult>> = keys
        .iter()
        .zip(&preds)
        .map(|((p, c), pred)| (format!("{p} c{c}"), pred.as_ref()))
        .collect();
    RatioChart::of(
        "http profiles (HttpArena): hoop's requests/s over each server's, 1 pinned thread \
         (paired by round; whiskers: the rounds' range)",
        "hoop / server",
        &targets,
        "hoop",
        &peers_of(&targets, crate::plan::arena::label),
        &cells,
        |r| Some(r.rps),
    )
}

/// Draws every non-empty ratio chart into `dir`; returns the file names written.
pub(crate) fn write(
    dir: &Path,
    echo_results: &[EchoResult],
    http_results: &[HttpResult],
    fanout_results: &[FanoutResult],
    arena_results: &[ArenaResult],
) -> Result<Vec<String>, String> {
    let mut written = Vec::new();
    for (name, chart) in [
        ("echo_ratio.svg", echo(echo_results)),
        ("http_ratio.svg", http(http_results)),
        ("http_profiles_ratio.svg", arena(arena_results)),
        ("fanout_ratio.svg", fanout(fanout_results)),
    ] {
        if chart.is_empty() {
            continue;
        }
        chart
            .draw(&dir.join(name))
            .map_err(|e| format!("cannot draw {name}: {e}"))?;
        written.push(name.to_string());
    }
    Ok(written)
}
