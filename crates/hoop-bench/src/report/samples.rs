//! Every chart of the report drawn from sample data as large as the suite's (every server,
//! every cell of the full matrices), and each text of each SVG checked to lie inside its
//! canvas. With `HOOP_CHARTS_DIR` set, the SVGs are kept there to be looked at.

use std::path::{Path, PathBuf};

use crate::compare::file_quick::fixtures::result as file_result;
use crate::plan::http::{full_cells, Cell};
use crate::record::arena::{test_result as arena_result, ArenaResult};
use crate::record::echo::{test_result as echo_result, EchoResult};
use crate::record::fanout::{test_result as fanout_result, FanoutResult};
use crate::record::file::{FileResult, FileSuite};
use crate::record::http::{test_result as http_result, HttpResult};
use crate::record::nop::{test_result as nop_result, NopResult};
use crate::report::canvas::text_width;

/// Where the charts go: `HOOP_CHARTS_DIR`, or a directory of this test's own.
fn out_dir() -> (PathBuf, bool) {
    match std::env::var_os("HOOP_CHARTS_DIR") {
        Some(d) => (PathBuf::from(d), true),
        None => (
            std::env::temp_dir().join(format!("hoop-charts-{}", std::process::id())),
            false,
        ),
    }
}

/// Every profile at both connection counts, one and two threads, every server, three rounds.
fn arena() -> Vec<ArenaResult> {
    use crate::plan::arena::{Profile, ARENA_SERVERS};
    let mut v = Vec::new();
    for p in Profile::ALL {
        for conns in p.conns() {
            for threads in [1, 2] {
                for (k, s) in ARENA_SERVERS.iter().enumerate() {
                    for round in 0..3 {
                        let rps = 50_000.0 + 7_000.0 * k as f64 + 1_000.0 * round as f64;
                        let mut r = arena_result(p.name(), s, round, threads, rps);
                        r.conns = conns;
                        v.push(r);
                    }
                }
            }
        }
    }
    v
}

fn echo() -> (Vec<EchoResult>, Vec<String>) {
    let servers = crate::compare::echo::SERVERS.map(String::from).to_vec();
    let mut v = Vec::new();
    for (k, s) in servers.iter().enumerate() {
        for round in 0..3 {
            for (conns, len) in [(50, 128), (500, 128), (1000, 128), (50, 4096)] {
                let mut r = echo_result(s, round, 100_000.0 + 10_000.0 * k as f64, 5.0);
                r.conns = conns;
                r.len_bytes = len;
                v.push(r);
            }
        }
    }
    (v, servers)
}

fn http() -> Vec<HttpResult> {
    let mut v = Vec::new();
    for (k, s) in crate::plan::http::ALL_SERVERS.iter().enumerate() {
        for round in 0..3 {
            for c in full_cells() {
                let Cell {
                    file_bytes,
                    conns,
                    close,
                    mix,
                } = c;
                let mut r = http_result(s, round, conns, 50_000.0 + 5_000.0 * k as f64, 9.0);
                r.file_bytes = file_bytes;
                r.mode = if close { "close" } else { "keep-alive" };
                r.mix = mix;
                v.push(r);
            }
        }
    }
    v
}

fn fanout() -> Vec<FanoutResult> {
    let mut v = Vec::new();
    for (k, s) in crate::compare::fanout::SERVERS.iter().enumerate() {
        for round in 0..3 {
            for hog in [false, true] {
                v.push(fanout_result(s, round, hog, 1e6 + 1e5 * k as f64, 1.0));
            }
        }
    }
    v
}

fn nop() -> Vec<NopResult> {
    let mut v = Vec::new();
    use crate::load::nop::{HOOP, PEERS, RAW, SHARED};
    for (k, e) in [HOOP, RAW, SHARED].iter().chain(&PEERS).enumerate() {
        for threads in [1, 2, 4] {
            v.push(nop_result(e, threads, 1e7 + 1e6 * k as f64, 50.0));
        }
    }
    v
}

fn file() -> FileSuite {
    let engines = crate::plan::file::Engine::ALL.map(|e| e.name());
    FileSuite {
        direct: engines
            .iter()
            .map(|e| file_result(e, 150_000.0, true))
            .collect(),
        buffered: engines
            .iter()
            .map(|e| file_result(e, 400_000.0, false))
            .collect(),
        ..FileSuite::default()
    }
}

fn file_sweep() -> (Vec<FileResult>, Vec<usize>) {
    let depths = vec![1, 2, 4, 8, 16, 32, 64, 128];
    let mut v = Vec::new();
    for (k, e) in crate::plan::file::Engine::ALL.iter().enumerate() {
        for &qd in &depths {
            let mut r = file_result(
                e.name(),
                10_000.0 * (qd as f64).sqrt() * (1 + k) as f64,
                true,
            );
            r.qd = qd;
            v.push(r);
        }
    }
    (v, depths)
}

/// The texts of an SVG that plotters wrote, each with where it lies across the canvas's
/// width (rotated texts are left out: the y axis' name stands along its label area).
fn texts(svg: &str) -> (f64, Vec<(String, f64, f64)>) {
    let attr = |tag: &str, name: &str| -> Option<String> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag[at..at + tag[at..].find('"')?].to_string())
    };
    let width: f64 = attr(&svg[..svg.find('>').unwrap()], "width")
        .and_then(|w| w.parse().ok())
        .unwrap();
    let mut out = Vec::new();
    for part in svg.split("<text").skip(1) {
        let (tag, rest) = part.split_at(part.find('>').unwrap());
        if tag.contains("rotate(") {
            continue;
        }
        let text = rest[1..rest.find("</text>").unwrap()]
            .trim()
            .replace("&apos;", "'")
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">");
        let x: f64 = attr(tag, "x").unwrap().parse().unwrap();
        let size: f64 = attr(tag, "font-size").unwrap().parse().unwrap();
        let w = text_width(&text, size);
        let (left, right) = match attr(tag, "text-anchor").as_deref() {
            Some("middle") => (x - w / 2.0, x + w / 2.0),
            Some("end") => (x - w, x),
            _ => (x, x + w),
        };
        out.push((text, left, right));
    }
    (width, out)
}

/// The texts of the SVG at `path` that stick out of its canvas, one line each.
fn outside(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap();
    let (width, texts) = texts(&svg);
    assert!(!texts.is_empty(), "{}", path.display());
    texts
        .into_iter()
        .filter(|(_, left, right)| *left < 0.0 || *right > width)
        .map(|(text, left, right)| {
            format!(
                "{}: {text:?} spans {left:.0}..{right:.0} of {width}",
                path.display()
            )
        })
        .collect()
}

#[test]
fn every_chart_keeps_its_texts_inside_its_canvas() {
    let (dir, keep) = out_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let (echo, servers) = echo();
    let (http, fanout, nop, file) = (http(), fanout(), nop(), file());
    let mut names =
        crate::report::charts::write_charts(&dir, &echo, &servers, &nop, &file, &http).unwrap();
    names.extend(crate::report::ratios::write(&dir, &echo, &http, &fanout, &arena()).unwrap());
    let (sweep, depths) = file_sweep();
    crate::report::file_sweep::draw(
        &dir.join("file_qd.svg"),
        &sweep,
        &depths,
        "file: randread 4 KiB IOPS by queue depth, buffered (hot cache)",
    )
    .unwrap();
    names.push("file_qd.svg".into());
    assert_eq!(names.len(), 11, "{names:?}");
    let bad: Vec<String> = names.iter().flat_map(|n| outside(&dir.join(n))).collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
