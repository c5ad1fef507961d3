//! The report's pictures, drawn with plotters on any backend: SVG for the page, PNG for
//! `--png`. Text needs a TrueType font, found on the system at the first drawing.

use std::sync::OnceLock;

use plotters::coord::ranged1d::SegmentedCoord;
use plotters::coord::types::{RangedCoordf64, RangedCoordi32};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::data::{Report, Timeline, TIME_KINDS};

/// One picture: its file name (without extension), title, and drawing.
pub struct Plot {
    pub id: &'static str,
    pub title: String,
    pub size: (u32, u32),
}

/// The height of a PNG's title, px.
const TITLE_PX: u32 = 36;

/// Where fonts are looked for, in order (Debian's fonts-dejavu-core first).
const FONT_FILES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

/// Registers a sans-serif font with plotters (once): a file of [`FONT_FILES`], else the
/// one fontconfig's `fc-match` names.
pub fn load_font() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let matched = std::process::Command::new("fc-match")
                .args(["-f", "%{file}", "sans-serif:style=Regular"])
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            let candidates = FONT_FILES
                .iter()
                .map(|f| (*f).to_owned())
                .chain(matched.filter(|m| m.ends_with(".ttf") || m.ends_with(".otf")));
            for file in candidates {
                let Ok(bytes) = std::fs::read(&file) else {
                    continue;
                };
                // plotters keeps fonts for the whole process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
            Err(
                "no TrueType font found for the pictures' text (install fonts-dejavu-core, \
                 or any font fontconfig's fc-match finds)"
                    .to_owned(),
            )
        })
        .clone()
}

/// The pictures of `report` that have data, in page order.
pub fn plots(report: &Report) -> Vec<Plot> {
    let mut plots = Vec::new();
    if !report.bandwidth.is_empty() {
        plots.push(Plot {
            id: "bandwidth",
            title: "Bus bandwidth vs message size".into(),
            size: (900, 420),
        });
    }
    if let Some(heatmap) = &report.heatmap {
        plots.push(Plot {
            id: "skew-heatmap",
            title: format!(
                "Arrival skew: {} on {} (ranks × calls)",
                heatmap.func, heatmap.comm
            ),
            size: (900, 120 + 24 * heatmap.ranks.len().min(64) as u32),
        });
    }
    if !report.timeline.tracks.is_empty() {
        plots.push(Plot {
            id: "timeline",
            title: "Timeline of the window (picture; the page's is interactive)".into(),
            size: (900, 80 + 14 * report.timeline.tracks.len().min(200) as u32),
        });
    }
    if !report.p2p.is_empty() {
        plots.push(Plot {
            id: "p2p-matrix",
            title: format!("Point-to-point bytes, rank → rank ({})", report.p2p[0].comm),
            size: (560, 520),
        });
    }
    if !report.time_split.is_empty() {
        plots.push(Plot {
            id: "time-per-rank",
            title: "Where the time went, per process".into(),
            size: (900, 140 + 30 * report.time_split.len().min(64) as u32),
        });
    }
    plots
}

impl Plot {
    /// The picture as an SVG document.
    pub fn svg(&self, report: &Report) -> Result<String, String> {
        let mut svg = String::new();
        {
            let area = SVGBackend::with_string(&mut svg, self.size).into_drawing_area();
            area.fill(&WHITE).map_err(|e| e.to_string())?;
            self.draw(report, &area)?;
            area.present().map_err(|e| e.to_string())?;
        }
        Ok(svg)
    }

    /// The picture as a PNG file at `path`.
    pub fn png(&self, report: &Report, path: &std::path::Path) -> Result<(), String> {
        // Twice the page's size, fonts and marks scaled with it: sharp on slides.
        let size = (self.size.0 * 2, self.size.1 * 2);
        let area = BitMapBackend::new(path, (size.0, size.1 + TITLE_PX * 2)).into_drawing_area();
        area.fill(&WHITE).map_err(|e| e.to_string())?;
        // A picture on its own carries its title (the page has it as a heading).
        let (title, body) = area.split_vertically(TITLE_PX * 2);
        title
            .draw(&Text::new(
                self.title.clone(),
                (TITLE_PX as i32, TITLE_PX as i32),
                ("sans-serif", TITLE_PX)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
        self.draw(report, &body)?;
        area.present()
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

impl Plot {
    fn draw<DB: DrawingBackend>(
        &self,
        report: &Report,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), String> {
        match self.id {
            "bandwidth" => bandwidth(report, area),
            "skew-heatmap" => skew_heatmap(report, area),
            "timeline" => timeline(&report.timeline, area),
            "p2p-matrix" => p2p_matrix(report, area),
            _ => time_split(report, area),
        }
    }
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// A font size that grows with the picture (PNGs are drawn twice as large).
fn font_px<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, base: u32) -> u32 {
    let (w, _) = area.dim_in_pixel();
    if w >= 1100 {
        base * 2
    } else {
        base
    }
}

/// Distinct colours for series.
fn series_colour(index: usize) -> RGBColor {
    const COLOURS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    COLOURS[index % COLOURS.len()]
}

/// The colour of GPU kernel intervals in the timeline.
const KERNEL_COLOUR: RGBColor = RGBColor(44, 160, 44);

/// The colours of the timeline's operations, by their place in
/// [`Timeline::operation_names`] (none is the kernels' green; the page's script has the same
/// list).
fn operation_colour(index: usize) -> RGBColor {
    const COLOURS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    COLOURS[index % COLOURS.len()]
}

fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value >= 10.0 || unit == 0 || value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn bandwidth<DB: DrawingBackend>(
    report: &Report,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let px = font_px(area, 14);
    let points = report.bandwidth.iter().flat_map(|s| &s.points);
    let min_bytes = points.clone().map(|p| p.bytes).fold(f64::MAX, f64::min);
    let max_bytes = points.clone().map(|p| p.bytes).fold(0.0, f64::max);
    let max_gbs = points.map(|p| p.max_gbs).fold(0.0, f64::max);
    // A logarithmic x axis as log2 of the size: its labels fall on powers of two
    // (64 KiB, 128 KiB, …), as message sizes do.
    let x_range =
        (min_bytes.max(1.0).log2() - 0.5).floor()..(max_bytes.max(2.0).log2() + 0.5).ceil();
    let span = (x_range.end - x_range.start) as usize;
    let mut chart = ChartBuilder::on(area)
        .margin(px / 2 + 4)
        .x_label_area_size(px * 3)
        .y_label_area_size(px * 4)
        .margin_right(px * 2)
        .build_cartesian_2d(x_range, 0.0..(max_gbs * 1.15).max(1e-6))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("message size (as NCCL's tests count it)")
        .y_desc("bus bandwidth, GB/s")
        .x_labels(span + 1)
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-9 {
                human_bytes(x.exp2())
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", px))
        .axis_desc_style(("sans-serif", px))
        .draw()
        .map_err(err)?;
    for (index, series) in report.bandwidth.iter().enumerate() {
        let colour = series_colour(index);
        chart
            .draw_series(LineSeries::new(
                series.points.iter().map(|p| (p.bytes.log2(), p.median_gbs)),
                colour.stroke_width(2),
            ))
            .map_err(err)?
            .label(&series.label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart
            .draw_series(series.points.iter().map(|p| {
                ErrorBar::new_vertical(
                    p.bytes.log2(),
                    p.min_gbs,
                    p.median_gbs,
                    p.max_gbs,
                    colour.filled(),
                    px / 2 + 4,
                )
            }))
            .map_err(err)?;
        chart
            .draw_series(
                series.points.iter().map(|p| {
                    Circle::new((p.bytes.log2(), p.median_gbs), px / 4 + 2, colour.filled())
                }),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", px))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(err)?;
    Ok(())
}

/// Splits off a colour bar of `width` px at the right of `area`, labelled from 0 to
/// `max` with `unit`; returns the rest.
fn colour_bar<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    max: f64,
    unit: &str,
    px: u32,
) -> Result<DrawingArea<DB, Shift>, String> {
    let (w, _) = area.dim_in_pixel();
    let (rest, bar) = area.split_horizontally(w - px * 8);
    let mut chart = ChartBuilder::on(&bar)
        .margin(px)
        .margin_top(px * 3)
        .y_label_area_size(px * 4)
        .caption(unit, ("sans-serif", px))
        .build_cartesian_2d(0.0..1.0, 0.0..max.max(1e-9))
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .disable_x_axis()
        .y_labels(5)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", px))
        .draw()
        .map_err(err)?;
    const STEPS: usize = 50;
    chart
        .draw_series((0..STEPS).map(|i| {
            let low = max * i as f64 / STEPS as f64;
            let high = max * (i + 1) as f64 / STEPS as f64;
            Rectangle::new(
                [(0.0, low), (1.0, high)],
                ViridisRGB
                    .get_color_normalized(low, 0.0, max.max(1e-9))
                    .filled(),
            )
        }))
        .map_err(err)?;
    Ok(rest)
}

fn skew_heatmap<DB: DrawingBackend>(
    report: &Report,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let Some(heatmap) = &report.heatmap else {
        return Ok(());
    };
    let px = font_px(area, 14);
    // The first calls of a job often carry its start-up: the colours saturate at twice
    // the latest rank's median skew, so that a straggler stands out all the same.
    let max = heatmap
        .skew_us
        .iter()
        .flatten()
        .copied()
        .fold(0.0, f64::max);
    let scale = heatmap
        .row_medians()
        .into_iter()
        .fold(0.0, f64::max)
        .mul_add(2.0, 0.0)
        .min(max)
        .max(1.0);
    let rest = colour_bar(area, scale, "µs after first", px)?;
    let rows = heatmap.ranks.len();
    let columns = heatmap.columns.len();
    let mut chart = ChartBuilder::on(&rest)
        .margin(px / 2 + 4)
        .x_label_area_size(px * 3)
        .y_label_area_size(px * 5)
        .build_cartesian_2d(rows_axis(columns), rows_axis(rows))
        .map_err(err)?;
    let ranks = heatmap.ranks.clone();
    let columns_at = heatmap.columns.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .x_desc(if heatmap.instances > columns {
            format!(
                "call (each column: {} calls)",
                heatmap.instances.div_ceil(columns)
            )
        } else {
            "call".to_owned()
        })
        .y_labels(rows.min(32))
        .y_label_formatter(&move |y| {
            row_label(y, rows)
                .and_then(|row| ranks.get(row))
                .map_or_else(String::new, |r| format!("rank {r}"))
        })
        .x_labels(columns.min(20))
        .x_label_formatter(&move |x| match x {
            SegmentValue::CenterOf(column) => columns_at
                .get(*column as usize)
                .map_or_else(String::new, |c| format!("{}", c + 1)),
            _ => String::new(),
        })
        .label_style(("sans-serif", px))
        .axis_desc_style(("sans-serif", px))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(
            heatmap
                .skew_us
                .iter()
                .enumerate()
                .flat_map(|(row, values)| {
                    values.iter().enumerate().map(move |(column, &value)| {
                        let (top, bottom) = row_span(row, rows);
                        Rectangle::new(
                            [
                                (SegmentValue::Exact(column as i32), top),
                                (SegmentValue::Exact(column as i32 + 1), bottom),
                            ],
                            ViridisRGB
                                .get_color_normalized(value.min(scale), 0.0, scale)
                                .filled(),
                        )
                    })
                }),
        )
        .map_err(err)?;
    Ok(())
}

/// A segmented axis of `rows` rows (plotters makes one segment per value of the range,
/// its end included).
/// One entry of a legend strip: a colour square at `at` and its label to the right.
fn legend_entry<DB: DrawingBackend>(
    legend: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    px: u32,
    colour: RGBColor,
    label: String,
) -> Result<(), String> {
    let half = px as i32 / 2;
    legend
        .draw(&Rectangle::new(
            [(x, y - half), (x + px as i32, y + half)],
            colour.filled(),
        ))
        .map_err(err)?;
    legend
        .draw(&Text::new(
            label,
            (x + px as i32 * 3 / 2, y),
            ("sans-serif", px)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
    Ok(())
}

/// The axes of a chart with one named row per item and a time axis across.
struct RowsAxes {
    label_width: u32,
    x: std::ops::Range<f64>,
    x_desc: &'static str,
    /// The rows' names, top to bottom.
    names: Vec<String>,
    /// At most this many row labels are written.
    most_labels: usize,
}

/// A chart of [`RowsAxes`] on `area`, its mesh drawn.
fn rows_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    px: u32,
    axes: RowsAxes,
) -> Result<ChartContext<'a, DB, Cartesian2d<RangedCoordf64, SegmentedCoord<RangedCoordi32>>>, String>
{
    let rows = axes.names.len();
    let mut chart = ChartBuilder::on(area)
        .margin(px / 2 + 4)
        .x_label_area_size(px * 3)
        .y_label_area_size(axes.label_width)
        .build_cartesian_2d(axes.x, rows_axis(rows))
        .map_err(err)?;
    let names = axes.names;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(rows.min(axes.most_labels))
        .y_label_formatter(&move |y| {
            row_label(y, rows)
                .and_then(|row| names.get(row).cloned())
                .unwrap_or_default()
        })
        .x_desc(axes.x_desc)
        .label_style(("sans-serif", px))
        .axis_desc_style(("sans-serif", px))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

fn rows_axis(rows: usize) -> SegmentedCoord<RangedCoordi32> {
    (0..(rows as i32 - 1).max(0)).into_segmented()
}

/// Row `index` of `rows` drawn from the top (the first row at the top): its span on a
/// segmented axis.
fn row_span(index: usize, rows: usize) -> (SegmentValue<i32>, SegmentValue<i32>) {
    let row = (rows - 1 - index) as i32;
    (SegmentValue::Exact(row), SegmentValue::Exact(row + 1))
}

/// The row (counted from the top) a label of a segmented axis stands for.
fn row_label(value: &SegmentValue<i32>, rows: usize) -> Option<usize> {
    match value {
        SegmentValue::CenterOf(row) if *row >= 0 && (*row as usize) < rows => {
            Some(rows - 1 - *row as usize)
        }
        _ => None,
    }
}

fn p2p_matrix<DB: DrawingBackend>(
    report: &Report,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let Some(matrix) = report.p2p.first() else {
        return Ok(());
    };
    let px = font_px(area, 14);
    let max = matrix.bytes.iter().flatten().copied().max().unwrap_or(0) as f64;
    let rest = colour_bar(area, max / (1 << 20) as f64, "MiB", px)?;
    let n = matrix.nranks;
    let mut chart = ChartBuilder::on(&rest)
        .margin(px / 2 + 4)
        .x_label_area_size(px * 3)
        .y_label_area_size(px * 4)
        .build_cartesian_2d(rows_axis(n), rows_axis(n))
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .x_labels(n.min(32))
        .y_labels(n.min(32))
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => format!("{i}"),
            _ => String::new(),
        })
        .y_label_formatter(&move |v| row_label(v, n).map_or_else(String::new, |r| format!("{r}")))
        .x_desc("receiver rank")
        .y_desc("sender rank")
        .label_style(("sans-serif", px))
        .axis_desc_style(("sans-serif", px))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(matrix.bytes.iter().enumerate().flat_map(|(from, row)| {
            row.iter().enumerate().map(move |(to, &bytes)| {
                let colour = if bytes == 0 {
                    RGBColor(240, 240, 240)
                } else {
                    ViridisRGB.get_color_normalized(bytes as f64, 0.0, max.max(1.0))
                };
                let (top, bottom) = row_span(from, n);
                Rectangle::new(
                    [
                        (SegmentValue::Exact(to as i32), top),
                        (SegmentValue::Exact(to as i32 + 1), bottom),
                    ],
                    colour.filled(),
                )
            })
        }))
        .map_err(err)?;
    if n <= 16 {
        chart
            .draw_series(matrix.bytes.iter().enumerate().flat_map(|(from, row)| {
                row.iter()
                    .enumerate()
                    .filter(|(_, &bytes)| bytes > 0)
                    .map(move |(to, &bytes)| {
                        // Dark text on the bright end of the colour map.
                        let ink = if bytes as f64 > 0.6 * max {
                            BLACK
                        } else {
                            WHITE
                        };
                        Text::new(
                            human_bytes(bytes as f64),
                            (
                                SegmentValue::CenterOf(to as i32),
                                SegmentValue::CenterOf((n - 1 - from) as i32),
                            ),
                            ("sans-serif", px)
                                .into_font()
                                .color(&ink)
                                .pos(Pos::new(HPos::Center, VPos::Center)),
                        )
                    })
            }))
            .map_err(err)?;
    }
    Ok(())
}

fn time_split<DB: DrawingBackend>(
    report: &Report,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let px = font_px(area, 14);
    let rows = report.time_split.len();
    let max = report
        .time_split
        .iter()
        .map(|p| p.seconds.iter().sum::<f64>())
        .fold(0.0, f64::max)
        * 1e3;
    let names: Vec<String> = report
        .time_split
        .iter()
        .map(|p| p.process.clone())
        .collect();
    // The legend in a strip of its own above the bars, so that it hides none.
    let (legend, bars) = area.split_vertically(px * 3);
    let (width, _) = legend.dim_in_pixel();
    let slot = width as i32 / TIME_KINDS.len() as i32;
    for (kind, (_, label)) in TIME_KINDS.iter().enumerate() {
        let x = kind as i32 * slot + px as i32;
        let y = px as i32;
        legend_entry(&legend, (x, y), px, series_colour(kind), short_kind(label))?;
    }
    let mut chart = rows_chart(
        &bars,
        px,
        RowsAxes {
            label_width: px * 6,
            x: 0.0..(max * 1.02).max(1e-6),
            x_desc: "ms (summed over the process's threads, GPU channels and proxy lanes)",
            names,
            most_labels: 32,
        },
    )?;
    for kind in 0..TIME_KINDS.len() {
        let colour = series_colour(kind);
        chart
            .draw_series(report.time_split.iter().enumerate().map(|(row, process)| {
                let before: f64 = process.seconds[..kind].iter().sum::<f64>() * 1e3;
                let value = process.seconds[kind] * 1e3;
                let (top, bottom) = row_span(row, rows);
                let mut bar =
                    Rectangle::new([(before, top), (before + value, bottom)], colour.filled());
                bar.set_margin(px / 2, px / 2, 0, 0);
                bar
            }))
            .map_err(err)?;
    }
    Ok(())
}

/// A kind's label for the legend strip: without the part after the colon's list.
fn short_kind(label: &str) -> String {
    match label.split_once(": ") {
        Some(("host", _)) => "host".to_owned(),
        Some((_, rest)) if label.starts_with("proxy") => format!("proxy {rest}"),
        _ => label.replace(" (all channels)", ""),
    }
}

/// The timeline as a static picture: a row per track, intervals as bars.
fn timeline<DB: DrawingBackend>(
    timeline: &Timeline,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let px = font_px(area, 12);
    let rows = timeline.tracks.len().min(200);
    let operations = timeline.operation_names();
    let colour_of = |name: &str| {
        operations
            .iter()
            .position(|o| *o == name)
            .map_or(RGBColor(127, 127, 127), operation_colour)
    };
    // The operations' colours in a strip above the rows.
    let (legend, area) = area.split_vertically(px * 3);
    let area = &area;
    let mut x = px as i32 * 12;
    for (index, name) in operations.iter().enumerate() {
        let y = px as i32 * 3 / 2;
        legend_entry(
            &legend,
            (x, y),
            px,
            operation_colour(index),
            (*name).to_owned(),
        )?;
        x += px as i32 * (3 + name.chars().count() as i32 * 2 / 3);
    }
    let green = KERNEL_COLOUR;
    let start = timeline.start_ns as f64 / 1e6;
    let end = (timeline.end_ns as f64 / 1e6).max(start + 1e-6);
    let names: Vec<String> = timeline
        .tracks
        .iter()
        .take(rows)
        .map(|t| t.name.clone())
        .collect();
    let mut chart = rows_chart(
        area,
        px,
        RowsAxes {
            label_width: px * 16,
            x: start..end,
            x_desc: "ms since the trace's start",
            names,
            most_labels: 60,
        },
    )?;
    chart
        .draw_series(
            timeline
                .tracks
                .iter()
                .take(rows)
                .enumerate()
                .flat_map(|(row, track)| {
                    track.intervals.iter().map(move |interval| {
                        let colour = if track.kind == "ops" {
                            colour_of(&interval.name)
                        } else {
                            green
                        };
                        let (top, bottom) = row_span(row, rows);
                        let mut bar = Rectangle::new(
                            [
                                (interval.start.max(timeline.start_ns) as f64 / 1e6, top),
                                (interval.end.min(timeline.end_ns) as f64 / 1e6, bottom),
                            ],
                            colour.filled(),
                        );
                        // Nested intervals thinner, inside their parent.
                        let inset = 1 + interval.depth.min(2) * 2;
                        bar.set_margin(inset, inset, 0, 0);
                        bar
                    })
                }),
        )
        .map_err(err)?;
    Ok(())
}
