//! The queue-depth sweep's report: IOPS by engine and depth as a table, and `file_qd.svg`, IOPS
//! against depth (log scale), one line per engine, so a reader sees where io_uring pulls ahead
//! of linux-aio and the thread pool. Engines of depth 1 by nature ran once and count at every
//! depth.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use crate::plan::file::Engine;
use crate::record::file::FileResult;
use crate::report::canvas::{legend, titled, COLORS};

/// Whether the engine named `name` keeps one I/O in flight whatever the depth (one run).
fn once(name: &str) -> bool {
    Engine::by_name(name).is_some_and(Engine::depth_one_by_nature)
}

/// The sweep's table: one row per engine, one IOPS column per depth (`-` where the engine did
/// not run or failed); the engines of depth 1 by nature show their one figure in every column.
pub(crate) fn table(results: &[FileResult], depths: &[usize]) -> String {
    let mut s = String::from("| engine |");
    for d in depths {
        s.push_str(&format!(" QD {d} IOPS |"));
    }
    s.push_str("\n|---|");
    s.push_str(&"---:|".repeat(depths.len()));
    s.push('\n');
    for engine in engine_order(results) {
        s.push_str(&format!("| {engine} |"));
        for &d in depths {
            match point(results, engine, d) {
                Some(iops) => s.push_str(&format!(" {iops:.0} |")),
                None => s.push_str(" - |"),
            }
        }
        s.push('\n');
    }
    s
}

/// The engines of `results`, in the order they first appear.
fn engine_order(results: &[FileResult]) -> Vec<&'static str> {
    let mut engines: Vec<&'static str> = Vec::new();
    for r in results {
        if !engines.contains(&r.engine) {
            engines.push(r.engine);
        }
    }
    engines
}

/// The IOPS of `engine` at depth `qd` (a passing run only); an engine of depth 1 by nature
/// has its one run at every depth.
fn point(results: &[FileResult], engine: &str, qd: usize) -> Option<f64> {
    let mut runs = results.iter().filter(|r| r.engine == engine && r.ok());
    if once(engine) {
        runs.next()
    } else {
        runs.find(|r| r.qd == qd)
    }
    .map(|r| r.iops)
}

/// Draws `file_qd.svg` at `path`: IOPS against depth (log-x), one line per engine.
pub(crate) fn draw(
    path: &Path,
    results: &[FileResult],
    depths: &[usize],
    title: &str,
) -> Result<(), Box<dyn Error>> {
    let lines: Vec<(&str, Vec<(f64, f64)>)> = engine_order(results)
        .into_iter()
        .map(|engine| {
            let points = depths
                .iter()
                .filter_map(|&d| point(results, engine, d).map(|iops| (d as f64, iops)))
                .collect();
            (engine, points)
        })
        .collect();
    let x_min = depths.first().copied().unwrap_or(1).max(1) as f64;
    let x_max = (depths.last().copied().unwrap_or(1) as f64).max(x_min * 2.0);
    let y_max = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.1))
        .fold(1.0f64, f64::max)
        * 1.15;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let area = titled(&root, title)?;
    let mut chart = ChartBuilder::on(&area)
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((x_min..x_max).log_scale(), 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("queue depth (I/Os in flight, log scale)")
        .y_desc("IOPS (verified)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
        .draw()?;
    for (i, (engine, points)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let label = if once(engine) {
            format!("{engine} (QD 1 by nature)")
        } else {
            engine.to_string()
        };
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}
