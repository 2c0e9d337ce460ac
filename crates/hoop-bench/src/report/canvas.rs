//! What every chart shares: the palette, and a canvas that holds its texts: the title wrapped
//! onto as many lines as the width needs, and the width grown for the axis labels.

use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The report's palette (matplotlib's tab10), one color per series in order.
pub const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The width in pixels of `text` in a sans-serif font of `size` pixels as the SVG says it, on
/// the wide side. The SVG names no face (the viewer picks its own sans-serif) and plotters' own
/// estimate, without a font loaded, is about 0.4 em a character, narrower than any real face:
/// 0.6 em covers the common ones (DejaVu Sans, the widest, averages about 0.55 em over mixed
/// text).
pub fn text_width(text: &str, size: f64) -> f64 {
    (text.chars().count() as f64 * size * 0.6).ceil()
}

/// The title's font size as plotters is given it (its SVG writes every size divided by 1.24).
pub const TITLE_FONT: f64 = 18.0;
/// The axis labels' size in the SVG's pixels: plotters' default of 12, divided by 1.24.
pub const LABEL_PX: f64 = 12.0 / 1.24;
/// Pixels kept clear beside a title line, and above and below the title.
const PAD: u32 = 8;

/// `title` broken at spaces into lines that each fit `width` pixels (less a pad on each side);
/// a word longer than a line stands on a line of its own.
pub fn title_lines(title: &str, width: u32) -> Vec<String> {
    let room = f64::from(width.saturating_sub(2 * PAD));
    let px = TITLE_FONT / 1.24;
    let mut lines: Vec<String> = Vec::new();
    for word in title.split_whitespace() {
        match lines.last_mut() {
            Some(line) if text_width(&format!("{line} {word}"), px) <= room => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// Writes `title` at the top of `area`, centred, on as many lines as its width needs, and
/// returns the area below it (where plotters' own caption is one line, cut at both edges when
/// it is wider than the canvas).
pub fn titled<'a>(
    area: &DrawingArea<SVGBackend<'a>, Shift>,
    title: &str,
) -> Result<DrawingArea<SVGBackend<'a>, Shift>, Box<dyn std::error::Error>> {
    let (width, _) = area.dim_in_pixel();
    let style = TextStyle::from(("sans-serif", TITLE_FONT).into_font())
        .pos(Pos::new(HPos::Center, VPos::Top));
    let line_h = (TITLE_FONT / 1.24 * 1.25).ceil() as i32;
    let lines = title_lines(title, width);
    for (i, line) in lines.iter().enumerate() {
        let y = PAD as i32 + i as i32 * line_h;
        area.draw_text(line, &style, (width as i32 / 2, y))?;
    }
    let used = 2 * PAD as i32 + lines.len() as i32 * line_h;
    Ok(area.split_vertically(used).1)
}

/// The width a category axis needs for `labels`: each category as wide as the widest label
/// and a gap, so that no label runs into its neighbour or past the canvas's edge.
pub fn categories_width(labels: &[String]) -> u32 {
    let widest = labels
        .iter()
        .map(|l| text_width(l, LABEL_PX))
        .fold(0.0, f64::max);
    (labels.len() as f64 * (widest + 16.0)).ceil() as u32
}

/// The x labels of a category axis where category `i` is centred on x = `i`: its name at the
/// integer key points, nothing between them.
pub fn category_label(names: Vec<String>) -> impl Fn(&f64) -> String {
    move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
            names[i as usize].clone()
        } else {
            String::new()
        }
    }
}

/// `y_max` raised so that a legend of `entries` lines in a top corner stands above the data
/// instead of over it: the plot is `plot_h` pixels high, and the data keeps at least 40% of it.
pub fn above_legend(y_max: f64, entries: usize, plot_h: u32) -> f64 {
    // plotters' legend: about 15 pixels a line, and its box's margins.
    let legend_h = 15.0 * entries as f64 + 14.0;
    let share = (legend_h / f64::from(plot_h.max(1))).min(0.6);
    y_max / (1.0 - share)
}

/// Draws the series' legend at `pos` of `chart`'s plot: the report's one style, a white box
/// (a little transparent, so that what it covers still shows) with a black border.
pub fn legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    pos: SeriesLabelPosition,
) -> Result<(), Box<dyn std::error::Error>> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(pos)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_wrap_at_spaces_to_fit() {
        let t = "fan-out: hoop's deliveries/s over each peer's (paired by round; whiskers: the \
                 rounds' range)";
        let lines = title_lines(t, 560);
        assert!(lines.len() >= 2, "{lines:?}");
        assert_eq!(lines.join(" "), t);
        for l in &lines {
            assert!(
                text_width(l, TITLE_FONT / 1.24) <= f64::from(560 - 2 * PAD),
                "{l}"
            );
        }
        assert_eq!(title_lines("short", 560), ["short"]);
        assert_eq!(title_lines("", 560), Vec::<String>::new());
        assert_eq!(title_lines("unbreakable-and-far-too-long", 40).len(), 1);
    }

    #[test]
    fn a_legend_gets_room_above_the_data() {
        assert_eq!(above_legend(1.0, 0, 300), 1.0 / (1.0 - 14.0 / 300.0));
        assert!(above_legend(1.0, 5, 300) > 1.3);
        // However many lines, the data keeps 40% of the height.
        assert_eq!(above_legend(1.0, 100, 300), 1.0 / 0.4);
    }

    #[test]
    fn categories_are_as_wide_as_their_widest_label() {
        let labels = [
            "a".to_string(),
            "static mix (20 files, 3-300 KB) c50 ka".to_string(),
        ];
        let w = categories_width(&labels);
        assert!(
            f64::from(w) >= 2.0 * text_width(&labels[1], LABEL_PX),
            "{w}"
        );
        assert_eq!(categories_width(&[]), 0);
    }
}
