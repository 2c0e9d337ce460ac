//! `soak.svg`: fds, RSS and throughput over the run, one panel each, one line per process.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use hoop_bench::report::canvas::{titled, COLORS};

use super::sample::Sample;

/// One line: a label and (seconds, value) points.
type Line = (String, Vec<(f64, f64)>);

/// Draws the three panels into `path`.
pub(crate) fn draw(path: &Path, samples: &[Sample], title: &str) -> Result<(), Box<dyn Error>> {
    let root = SVGBackend::new(path, (900, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = titled(&root, title)?;
    let panels = root.split_evenly((3, 1));
    let mut fds: Vec<Line> = vec![(
        "soak process (servers in-process + clients)".into(),
        Vec::new(),
    )];
    let mut rss: Vec<Line> = vec![("soak process".into(), Vec::new())];
    for s in samples {
        fds[0].1.push((s.t_secs, s.fds as f64));
        rss[0].1.push((s.t_secs, s.rss_kib as f64 / 1024.0));
        for (i, c) in s.children.iter().enumerate() {
            if fds.len() <= i + 1 {
                fds.push((c.name.clone(), Vec::new()));
                rss.push((c.name.clone(), Vec::new()));
            }
            fds[i + 1].1.push((s.t_secs, c.fds as f64));
            rss[i + 1].1.push((s.t_secs, c.rss_kib as f64 / 1024.0));
        }
    }
    let ops: Vec<Line> = vec![(
        "operations/s (all loads)".into(),
        samples.iter().map(|s| (s.t_secs, s.ops_per_sec)).collect(),
    )];
    panel(&panels[0], "open fds", "fds", &fds)?;
    panel(&panels[1], "RSS", "MiB", &rss)?;
    panel(&panels[2], "throughput", "ops/s", &ops)?;
    root.present()?;
    Ok(())
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    caption: &str,
    y_desc: &str,
    lines: &[Line],
) -> Result<(), Box<dyn Error>> {
    let x_max = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.0))
        .fold(1.0f64, f64::max);
    let y_max = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.1))
        .fold(1.0f64, f64::max)
        * 1.2;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc(y_desc)
        .draw()?;
    for (i, (label, points)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(points.iter().copied(), &color))?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::sample::ChildSample;
    use super::*;

    /// The chart of a run with child servers draws; with `HOOP_CHARTS_DIR` set it is kept
    /// there to be looked at.
    #[test]
    fn draws_a_run_with_children() {
        let samples: Vec<Sample> = (0..30)
            .map(|i| Sample {
                t_secs: f64::from(i) * 2.0,
                fds: 40 + (i % 3) as usize,
                rss_kib: 20_000 + u64::from(i as u32) * 10,
                in_flight: 8,
                ops_per_sec: 150_000.0,
                children: ["serve http (io_uring)", "serve http (epoll)"]
                    .iter()
                    .map(|n| ChildSample {
                        name: n.to_string(),
                        fds: 12,
                        rss_kib: 8_000,
                    })
                    .collect(),
            })
            .collect();
        let keep = std::env::var_os("HOOP_CHARTS_DIR");
        let dir = keep.clone().map_or_else(
            || std::env::temp_dir().join(format!("hoop-soak-chart-{}", std::process::id())),
            std::path::PathBuf::from,
        );
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("soak.svg");
        draw(
            &path,
            &samples,
            "hoop soak: 60 s, seed 12345678901234567890",
        )
        .unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("open fds"));
        if keep.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
