//! The comparison a reader looks for, one chart per bench: hoop's ratio to each peer in every
//! cell (the median of the ratios paired within a round), the rounds' spread as a whisker from
//! the lowest to the highest paired ratio, and a line at 1.0. Absolute bars hide a 1 MiB cell
//! next to a 1 KiB one; ratios put every cell on one scale.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use crate::compare::{pair_ratios, Sample};
use crate::measure::latency::median;
use crate::report::canvas::{
    above_legend, categories_width, category_label, legend, titled, COLORS,
};

type Res<T> = Result<T, Box<dyn Error>>;

/// A cell of a ratio chart: its name, and which samples it holds.
pub type CellOf<'a, R> = (String, &'a dyn Fn(&R) -> bool);

/// The paired ratios of one peer in one cell: their median and their range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The median of the paired ratios.
    pub median: f64,
    /// The lowest paired ratio.
    pub low: f64,
    /// The highest paired ratio.
    pub high: f64,
}

impl Spread {
    /// The spread of `ratios`; `None` when there is none.
    pub fn of(ratios: &[f64]) -> Option<Spread> {
        let finite = ratios.iter().copied().filter(|r| r.is_finite());
        let low = finite.clone().fold(f64::INFINITY, f64::min);
        let high = finite.fold(f64::NEG_INFINITY, f64::max);
        Some(Spread {
            median: median(ratios)?,
            low,
            high,
        })
    }
}

/// One ratio chart: cells along x, one series per peer.
#[derive(Debug, Clone)]
pub struct RatioChart {
    /// The chart's title.
    pub title: String,
    /// What the ratio is of (the y axis).
    pub y_desc: String,
    /// The cells' names, in order.
    pub cells: Vec<String>,
    /// Per peer (its label): the spread in each cell, `None` where the pair has no round.
    pub peers: Vec<(String, Vec<Option<Spread>>)>,
}

impl RatioChart {
    /// `base`'s `f` over each peer's, per cell: `cells` names each cell with the samples it
    /// holds. Peers with no ratio in any cell are left out.
    pub fn of<R: Sample>(
        title: impl Into<String>,
        y_desc: impl Into<String>,
        results: &[R],
        base: &str,
        peers: &[(String, String)],
        cells: &[CellOf<'_, R>],
        f: impl Fn(&R) -> Option<f64> + Copy,
    ) -> RatioChart {
        let peers = peers
            .iter()
            .filter(|(name, _)| name != base)
            .map(|(name, label)| {
                let spreads = cells
                    .iter()
                    .map(|(_, in_cell)| Spread::of(&pair_ratios(results, base, name, in_cell, f)))
                    .collect::<Vec<_>>();
                (label.clone(), spreads)
            })
            .filter(|(_, s)| s.iter().any(Option::is_some))
            .collect();
        RatioChart {
            title: title.into(),
            y_desc: y_desc.into(),
            cells: cells.iter().map(|(n, _)| n.clone()).collect(),
            peers,
        }
    }

    /// Whether there is anything to draw.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// The y range: 0 to a little above the highest whisker, and never below 1.2 so that the
    /// line at 1.0 is always in view.
    fn y_max(&self) -> f64 {
        let top = self
            .peers
            .iter()
            .flat_map(|(_, s)| s.iter().flatten())
            .map(|s| s.high)
            .filter(|h| h.is_finite())
            .fold(1.0f64, f64::max);
        (top * 1.15).max(1.2)
    }

    /// Draws the chart as an SVG at `path` (at most 1,000 pixels wide unless its cells' labels
    /// need more; the title wraps).
    pub fn draw(&self, path: &Path) -> Res<()> {
        let n = self.cells.len().max(1);
        // Wider than 1,000 pixels only when the cells' labels need it (the y label area and
        // the margins besides).
        let width = (120 * n as u32 + 200)
            .clamp(560, 1000)
            .max(categories_width(&self.cells) + 60 + 24);
        let root = SVGBackend::new(path, (width, 400)).into_drawing_area();
        root.fill(&WHITE)?;
        let area = titled(&root, &self.title)?;
        // The plot: below the title, less the margins and the x label area.
        let plot_h = area.dim_in_pixel().1.saturating_sub(2 * 12 + 40);
        let y_max = above_legend(self.y_max(), self.peers.len(), plot_h);
        let mut chart = ChartBuilder::on(&area)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)?;
        let label = category_label(self.cells.clone());
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n + 1)
            .x_label_formatter(&label)
            .y_desc(self.y_desc.as_str())
            .y_label_formatter(&|y: &f64| format!("{y:.1}x"))
            .draw()?;
        // Above the line hoop is ahead.
        chart.draw_series(LineSeries::new(
            [(-0.5, 1.0), (n as f64 - 0.5, 1.0)],
            BLACK.stroke_width(2),
        ))?;
        let k = self.peers.len().max(1) as f64;
        for (j, (name, spreads)) in self.peers.iter().enumerate() {
            let color = COLORS[j % COLORS.len()];
            // Peers side by side within a cell, so that whiskers never overlap.
            let dx = (j as f64 + 0.5) / k * 0.6 - 0.3;
            let points: Vec<(f64, Spread)> = spreads
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.map(|s| (i as f64 + dx, s)))
                .collect();
            chart.draw_series(points.iter().map(|&(x, s)| {
                PathElement::new([(x, s.low), (x, s.high)], color.stroke_width(2))
            }))?;
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|&(x, s)| Circle::new((x, s.median), 5, color.filled())),
                )?
                .label(format!("hoop / {name}"))
                .legend(move |(x, y)| Circle::new((x + 6, y), 5, color.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::matrix::fixture::{r, R};

    #[test]
    fn spreads_are_the_median_and_range_of_paired_ratios() {
        assert_eq!(Spread::of(&[]), None);
        let s = Spread::of(&[1.5, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.low, s.high), (1.5, 1.0, 2.0));
    }

    #[test]
    fn a_chart_pairs_within_rounds_and_leaves_out_peers_without_ratios() {
        let rs = [
            r("hoop", 0, 0, 300.0),
            r("tokio", 0, 0, 100.0),
            r("hoop", 1, 0, 100.0),
            r("tokio", 1, 0, 100.0),
            r("hoop", 0, 1, 50.0),
            r("tokio", 0, 1, 100.0),
        ];
        let c0 = |x: &R| x.cell == 0;
        let c1 = |x: &R| x.cell == 1;
        let cells: [CellOf<'_, R>; 2] = [("a".into(), &c0), ("b".into(), &c1)];
        let peers = [
            ("hoop".to_string(), "hoop".to_string()),
            ("tokio".to_string(), "tokio".to_string()),
            ("monoio".to_string(), "monoio".to_string()),
        ];
        let chart = RatioChart::of("t", "x", &rs, "hoop", &peers, &cells, |x| Some(x.v));
        assert_eq!(chart.peers.len(), 1, "hoop is the base; monoio has no runs");
        let (name, s) = &chart.peers[0];
        assert_eq!(name, "tokio");
        let a = s[0].unwrap();
        assert_eq!((a.median, a.low, a.high), (2.0, 1.0, 3.0));
        assert_eq!(s[1].unwrap().median, 0.5);
        assert!(chart.y_max() >= 3.0 * 1.15 - 1e-9);
        let dir = std::env::temp_dir().join(format!("hoop-ratio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ratio.svg");
        chart.draw(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("hoop / tokio") && svg.contains("<circle"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
