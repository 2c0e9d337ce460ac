//! SVG charts of the report (plotters): grouped bars of medians over rounds.

use std::error::Error;
use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::measure::latency::median;
use crate::record::echo::EchoResult;
use crate::record::file::FileSuite;
use crate::record::nop::NopResult;
use crate::report::canvas::{
    above_legend, categories_width, category_label, legend, titled, COLORS,
};
use crate::report::echo::{configurations, label};

type Res<T> = Result<T, Box<dyn Error>>;
/// A field of a measurement that may be missing.
type Field = fn(&EchoResult) -> Option<f64>;

/// A group of bars per x label, one bar per series; `None` draws no bar.
struct Bars<'a> {
    title: &'a str,
    y_desc: &'a str,
    groups: Vec<String>,
    series: Vec<(String, Vec<Option<f64>>)>,
}

/// Writes the charts into `dir`; returns the file names written.
pub(crate) fn write_charts(
    dir: &Path,
    echo: &[EchoResult],
    servers: &[String],
    nop: &[NopResult],
    file: &FileSuite,
    http: &[crate::record::http::HttpResult],
) -> io::Result<Vec<String>> {
    let mut written = Vec::new();
    let mut go = |name: &str, f: &dyn Fn(&Path) -> Res<()>| -> io::Result<()> {
        f(&dir.join(name)).map_err(|e| io::Error::other(format!("cannot draw {name}: {e}")))?;
        written.push(name.to_string());
        Ok(())
    };
    if !echo.is_empty() {
        go("echo_rps.svg", &|p| {
            single(
                p,
                &per_config(
                    echo,
                    servers,
                    "echo: requests/s (median of rounds)",
                    "requests/s",
                    |r| Some(r.rps),
                ),
            )
        })?;
        go("echo_server_cpu.svg", &|p| {
            single(
                p,
                &per_config(
                    echo,
                    servers,
                    "echo: server CPU per request (median of rounds)",
                    "µs per request",
                    |r| r.usage.server_cpu_us_per_req,
                ),
            )
        })?;
        go("echo_latency.svg", &|p| latency(p, echo, servers))?;
    }
    if !nop.is_empty() {
        go("nop.svg", &|p| {
            let bars = Bars {
                title:
                    "no-ops per second: hoop (thread-per-core, shared) vs the raw io_uring ceiling",
                y_desc: "no-ops/s",
                groups: nop
                    .iter()
                    .map(|r| format!("batch {}", r.batch))
                    .take(1)
                    .collect(),
                series: nop
                    .iter()
                    .map(|r| {
                        (
                            format!("{}, {} thr, {} entries", r.engine, r.threads, r.entries),
                            vec![Some(r.nops_per_sec)],
                        )
                    })
                    .collect(),
            };
            single(p, &bars)
        })?;
    }
    if file.all().next().is_some() {
        go("file_iops.svg", &|p| single(p, &file_bars(file)))?;
    }
    if !http.is_empty() {
        go("http_rps.svg", &|p| single(p, &http_bars(http)))?;
    }
    Ok(written)
}

/// The file chart: one group per engine, one bar per mode (O_DIRECT, buffered).
fn file_bars(file: &FileSuite) -> Bars<'static> {
    let mut groups: Vec<String> = Vec::new();
    for r in file.all() {
        if !groups.iter().any(|g| g == r.engine) {
            groups.push(r.engine.to_string());
        }
    }
    let series = [
        ("O_DIRECT", &file.direct),
        ("buffered (hot cache)", &file.buffered),
    ]
    .into_iter()
    .map(|(name, rs)| {
        let vals = groups
            .iter()
            .map(|g| rs.iter().find(|r| r.engine == g && r.ok()).map(|r| r.iops))
            .collect();
        (name.to_string(), vals)
    })
    .collect();
    Bars {
        title: "file: 4 KiB random reads, QD 32, IOPS",
        y_desc: "IOPS",
        groups,
        series,
    }
}

/// The HTTP chart: one group per configuration, one bar per server, median requests/s.
fn http_bars(http: &[crate::record::http::HttpResult]) -> Bars<'static> {
    use crate::compare::med;
    use crate::plan::http::{label, SERVERS};
    use crate::report::http::{cells_of, in_cell};
    let cells = cells_of(http);
    let groups = cells
        .iter()
        .map(|c| {
            format!(
                "{} c{} {}",
                c.file_label(),
                c.conns,
                if c.close { "close" } else { "ka" }
            )
        })
        .collect();
    let series = SERVERS
        .iter()
        .filter(|s| http.iter().any(|r| r.server == **s))
        .map(|s| {
            let vals = cells
                .iter()
                .map(|c| med(http, s, |r| in_cell(r, c), |r| Some(r.rps)))
                .collect();
            (label(s).to_string(), vals)
        })
        .collect();
    Bars {
        title: "http: requests/s (median of rounds)",
        y_desc: "requests/s",
        groups,
        series,
    }
}

/// One bar group per configuration, one bar per server: the median of `f` over rounds.
fn per_config<'a>(
    echo: &[EchoResult],
    servers: &[String],
    title: &'a str,
    y_desc: &'a str,
    f: impl Fn(&EchoResult) -> Option<f64>,
) -> Bars<'a> {
    let configs = configurations(echo);
    Bars {
        title,
        y_desc,
        groups: configs
            .iter()
            .map(|(c, l)| format!("c={c} l={l}"))
            .collect(),
        series: servers
            .iter()
            .map(|s| {
                let values = configs
                    .iter()
                    .map(|&(c, l)| median_of(echo, s, c, l, &f))
                    .collect();
                (label(s).to_string(), values)
            })
            .collect(),
    }
}

fn median_of(
    echo: &[EchoResult],
    server: &str,
    conns: usize,
    len: usize,
    f: &dyn Fn(&EchoResult) -> Option<f64>,
) -> Option<f64> {
    let v: Vec<f64> = echo
        .iter()
        .filter(|r| r.server == server && r.conns == conns && r.len_bytes == len)
        .filter_map(f)
        .collect();
    median(&v)
}

/// One panel per configuration: p50/p99/p99.9 per server.
fn latency(path: &Path, echo: &[EchoResult], servers: &[String]) -> Res<()> {
    let configs = configurations(echo);
    let cols = configs.len().clamp(1, 2);
    let rows = configs.len().div_ceil(cols).max(1);
    let root = SVGBackend::new(path, (600 * cols as u32, 380 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((rows, cols));
    for (panel, &(c, l)) in panels.iter().zip(&configs) {
        let title = format!("latency, c={c} l={l} (µs, median of rounds)");
        let pcts: [(&str, Field); 3] = [
            ("p50", |r| r.latency.p50_us),
            ("p99", |r| r.latency.p99_us),
            ("p99.9", |r| r.latency.p999_us),
        ];
        let bars = Bars {
            title: &title,
            y_desc: "µs",
            groups: pcts.iter().map(|(n, _)| n.to_string()).collect(),
            series: servers
                .iter()
                .map(|s| {
                    let v = pcts
                        .iter()
                        .map(|(_, f)| median_of(echo, s, c, l, f))
                        .collect();
                    (label(s).to_string(), v)
                })
                .collect(),
        };
        draw_bars(panel, &bars)?;
    }
    root.present()?;
    Ok(())
}

fn single(path: &Path, bars: &Bars<'_>) -> Res<()> {
    // Wider than 1,400 pixels only when the groups' labels need it (the y label area and the
    // margins besides).
    let width = (220 * bars.groups.len() as u32)
        .clamp(640, 1400)
        .max(categories_width(&bars.groups) + 80 + 24);
    // Taller than 420 pixels only when the legend would take more than half the plot.
    let height = (2 * (15 * bars.series.len() as u32 + 14) + 130).max(420);
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    draw_bars(&root, bars)?;
    root.present()?;
    Ok(())
}

fn draw_bars(area: &DrawingArea<SVGBackend<'_>, Shift>, bars: &Bars<'_>) -> Res<()> {
    let max = bars
        .series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .fold(0.0f64, |a, &b| a.max(b));
    let y_max = if max > 0.0 { max * 1.1 } else { 1.0 };
    let n = bars.groups.len().max(1);
    let area = titled(area, bars.title)?;
    // The plot: below the title, less the margins and the x label area.
    let plot_h = area.dim_in_pixel().1.saturating_sub(2 * 12 + 36);
    let y_max = above_legend(y_max, bars.series.len(), plot_h);
    // Group i is centred on x = i, so the integer key points carry the group labels.
    let mut chart = ChartBuilder::on(&area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)?;
    let label = category_label(bars.groups.clone());
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&label)
        .y_desc(bars.y_desc)
        .y_label_formatter(&|y: &f64| format_si(*y))
        .draw()?;
    let k = bars.series.len().max(1) as f64;
    let width = 0.8 / k;
    for (j, (name, values)) in bars.series.iter().enumerate() {
        let color = COLORS[j % COLORS.len()];
        let left = -0.4 + j as f64 * width;
        chart
            .draw_series(values.iter().enumerate().filter_map(|(i, v)| {
                v.map(|v| {
                    let x0 = i as f64 + left;
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], color.filled())
                })
            }))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    Ok(())
}

/// 1234567 -> "1.23M".
fn format_si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}
