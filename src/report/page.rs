//! The report as one self-contained HTML page: the summary's tables, the pictures as
//! inline SVG, the timeline's data as inline JSON drawn by the page's own script
//! (`timeline.js`), and a self-check the script writes into the page once it has drawn.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::json;

use super::data::{Report, Timeline};
use super::plots::Plot;

const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("timeline.js");

/// How to read each picture, shown under its title (docs/report.md says more).
fn explanation(id: &str) -> &'static str {
    match id {
        "bandwidth" => {
            "Per communicator and collective (and per communicator for its sends), one point \
             per message-size bucket: the median bus bandwidth of its calls (from the last \
             rank's arrival to the end; a send from its start), the bar from the slowest to \
             the fastest call. The x axis is logarithmic."
        }
        "skew-heatmap" => {
            "Each row a rank, each column a call: how long after the first rank this rank \
             arrived. A straggler is a bright row; a bright column is one late call."
        }
        "timeline" => {
            "The same window as the interactive timeline below, as a picture (for --png)."
        }
        "p2p-matrix" => {
            "Bytes sent by each rank (row) to each rank (column) with ncclSend, over the \
             whole run. Grey: nothing."
        }
        _ => {
            "Per process, the time of its NCCL intervals by kind, summed over its threads, \
             GPU channels and proxy lanes (so it may exceed the run's length)."
        }
    }
}

/// The timeline as the script reads it: times in ns since the window's start, names
/// and details as indices into string tables.
#[derive(Serialize)]
struct TimelineData<'a> {
    start_ns: i64,
    length_ns: i64,
    strings: Vec<&'a str>,
    /// The ops streams' interval names, in colour order.
    operations: Vec<&'a str>,
    tracks: Vec<TrackData<'a>>,
}

#[derive(Serialize)]
struct TrackData<'a> {
    process: &'a str,
    name: &'a str,
    kind: &'a str,
    /// [start, end, depth, name, details]
    intervals: Vec<[i64; 5]>,
}

fn timeline_data<'a>(timeline: &'a Timeline) -> TimelineData<'a> {
    let mut strings: Vec<&'a str> = Vec::new();
    let mut index: std::collections::HashMap<&'a str, i64> = std::collections::HashMap::new();
    let mut tracks = Vec::new();
    for track in &timeline.tracks {
        let mut intervals = Vec::with_capacity(track.intervals.len());
        for interval in &track.intervals {
            let mut id = |s: &'a str| -> i64 {
                *index.entry(s).or_insert_with(|| {
                    strings.push(s);
                    strings.len() as i64 - 1
                })
            };
            intervals.push([
                interval.start - timeline.start_ns,
                interval.end - timeline.start_ns,
                i64::from(interval.depth),
                id(interval.name.as_str()),
                id(interval.details.as_str()),
            ]);
        }
        tracks.push(TrackData {
            process: &track.process,
            name: &track.name,
            kind: track.kind,
            intervals,
        });
    }
    TimelineData {
        start_ns: timeline.start_ns,
        length_ns: (timeline.end_ns - timeline.start_ns).max(1),
        strings,
        operations: timeline.operation_names(),
        tracks,
    }
}

/// HTML text with `&`, `<`, `>`, `"` and `'` escaped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON safe inside a `<script>` element (no `</` can close it).
fn script_json(value: &impl Serialize) -> Result<String, String> {
    let text = serde_json::to_string(value).map_err(|e| e.to_string())?;
    Ok(text.replace("</", "<\\/"))
}

fn bytes_text(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// The page.
pub fn render(report: &Report, plots: &[(Plot, String)]) -> Result<String, String> {
    let summary = &report.summary;
    let mut html = String::with_capacity(1 << 20);
    let title = format!("NCCL report: {}", report.input);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n",
        escape(&title)
    );
    // Errors of the page's scripts land in the self-check (set up before any other).
    html.push_str(
        "<script>\nwindow.reportErrors = [];\n\
         window.addEventListener('error', function (e) { \
         window.reportErrors.push(String(e.message)); });\n\
         (function () { var original = console.error; console.error = function () { \
         window.reportErrors.push(Array.prototype.join.call(arguments, ' ')); \
         original.apply(console, arguments); }; })();\n</script>\n</head>\n<body>\n",
    );
    let _ = write!(
        html,
        "<header><h1>NCCL report</h1><p class=\"input\">{}</p>",
        escape(&report.input)
    );
    let nccl = summary.provenance["nccl"]["version"]
        .as_str()
        .or_else(|| summary.provenance["nccl_version"].as_str())
        .unwrap_or("");
    let _ = writeln!(
        html,
        "<p>{} processes, {:.3} ms in NCCL operations over all ranks{}{}.</p></header>",
        summary.processes,
        summary.total_time_ms,
        if nccl.is_empty() { "" } else { ", NCCL " },
        escape(nccl)
    );
    html.push_str("<nav><a href=\"#summary\">summary</a>");
    for (plot, _) in plots {
        let _ = write!(
            html,
            " · <a href=\"#{}\">{}</a>",
            plot.id,
            escape(&plot.title)
        );
    }
    html.push_str(" · <a href=\"#timeline-interactive\">interactive timeline</a></nav>\n");

    summary_section(report, &mut html);
    for (plot, svg) in plots {
        let _ = write!(
            html,
            "<section id=\"{id}\" class=\"plot\" data-plot=\"{id}\">\n<h2>{}</h2>\n<p>{}</p>\n",
            escape(&plot.title),
            explanation(plot.id),
            id = plot.id,
        );
        if plot.id == "skew-heatmap" {
            if let Some(heatmap) = &report.heatmap {
                let _ = writeln!(
                    html,
                    "<p>{} calls of {} on {}; latest rank on median: <b id=\"hottest-rank\">\
                     {}</b>.</p>",
                    heatmap.instances,
                    escape(&heatmap.func),
                    escape(&heatmap.comm),
                    heatmap
                        .hottest_rank()
                        .map_or_else(|| "none".to_owned(), |r| format!("rank {r}"))
                );
            }
        }
        if plot.id == "timeline" {
            let _ = writeln!(html, "<p>Window: {}.</p>", escape(&report.timeline.why));
        }
        if plot.id == "time-per-rank" {
            let _ = writeln!(
                html,
                "<p id=\"time-split-source\">From {}.</p>",
                escape(&report.time_split_source)
            );
        }
        // The SVG's XML declaration is not wanted inside HTML.
        let svg = svg
            .trim_start()
            .strip_prefix("<?xml")
            .and_then(|rest| rest.split_once("?>").map(|x| x.1))
            .unwrap_or(svg);
        html.push_str("<div class=\"figure\">");
        html.push_str(svg.trim());
        html.push_str("</div>\n</section>\n");
    }
    timeline_section(&report.timeline, &mut html);
    let data = json!({
        "heatmap": report.heatmap,
        "plots": plots.iter().map(|(p, _)| p.id).collect::<Vec<_>>(),
        "time_split": report.time_split,
        "time_split_source": report.time_split_source,
    });
    // The self-check's element first: the script fills it in.
    let _ = write!(
        html,
        "<pre id=\"self-check\" hidden></pre>\n\
         <script type=\"application/json\" id=\"report-data\">{}</script>\n\
         <script type=\"application/json\" id=\"timeline-data\">{}</script>\n\
         <script>\n{SCRIPT}</script>\n</body>\n</html>\n",
        script_json(&data)?,
        script_json(&timeline_data(&report.timeline))?,
    );
    Ok(html)
}

fn summary_section(report: &Report, html: &mut String) {
    let summary = &report.summary;
    html.push_str("<section id=\"summary\">\n<h2>Summary</h2>\n");
    if summary.stragglers.is_empty() {
        html.push_str("<p>No straggler: no rank is late in enough calls, by enough.</p>\n");
    } else {
        html.push_str("<ul class=\"stragglers\">\n");
        for late in &summary.stragglers {
            let _ = writeln!(
                html,
                "<li><b>rank {} in {} on {}</b>: {:.0} µs late on median{}, last in {} of {} \
                 calls; the other ranks waited {:.3} ms for it.</li>",
                late.rank,
                escape(&late.func),
                escape(&late.comm),
                late.median_lateness_us,
                if summary.within_clock_uncertainty(late.median_lateness_us) {
                    " (within the clocks' alignment uncertainty)"
                } else {
                    ""
                },
                late.last_calls,
                late.instances,
                late.cost_ms
            );
        }
        html.push_str("</ul>\n");
    }
    if let Some(note) = summary.clock_note() {
        let _ = writeln!(html, "<p>Note: {}.</p>", escape(&note));
    }
    for warning in &summary.warnings {
        let _ = writeln!(html, "<p class=\"warning\">{}</p>", escape(warning));
    }
    html.push_str(
        "<table>\n<thead><tr><th>communicator</th><th>operation</th><th>size</th>\
         <th>calls</th><th>bytes/call</th><th>time ms</th><th>share</th>\
         <th>µs/call</th><th>busbw GB/s</th><th>wait share</th><th>skew µs</th></tr></thead>\n<tbody>\n",
    );
    for row in &summary.operations {
        let figures = &row.figures;
        let _ = writeln!(
            html,
            "<tr class=\"operation\"><td>{}</td><td>{}</td><td>all</td><td>{}</td><td>{}</td>\
             <td>{:.3}</td><td>{:.1}%</td><td>{:.1}</td><td>{:.2}</td><td>{:.1}%</td>\
             <td>{:.1}</td></tr>",
            escape(&row.comm),
            escape(&row.func),
            figures.calls,
            bytes_text(figures.bytes_per_call),
            figures.time_ms,
            figures.share * 100.0,
            figures.time_per_call_us,
            figures.busbw_gbs,
            figures.wait_share * 100.0,
            figures.mean_skew_us
        );
        for size in &row.sizes {
            let f = &size.figures;
            let _ = writeln!(
                html,
                "<tr class=\"bucket\"><td></td><td></td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{:.3}</td><td>{:.1}%</td><td>{:.1}</td><td>{:.2}</td><td>{:.1}%</td>\
                 <td>{:.1}</td></tr>",
                escape(&size.bucket),
                f.calls,
                bytes_text(f.bytes_per_call),
                f.time_ms,
                f.share * 100.0,
                f.time_per_call_us,
                f.busbw_gbs,
                f.wait_share * 100.0,
                f.mean_skew_us
            );
        }
    }
    html.push_str("</tbody>\n</table>\n");
    let _ = write!(
        html,
        "<details><summary>The summary as <code>nccl-scorep summary</code> prints it \
         (per-rank tables, every straggler verdict)</summary>\n<pre>{}</pre></details>\n\
         </section>\n",
        escape(&crate::summary::render(summary))
    );
}

fn timeline_section(timeline: &Timeline, html: &mut String) {
    let _ = write!(
        html,
        "<section id=\"timeline-interactive\" data-plot=\"timeline-interactive\">\n\
         <h2>Interactive timeline</h2>\n<p>Window: {}, {:.3} ms to {:.3} ms after the \
         trace's start. Each rank's ops stream (its operations in the order the GPU runs \
         them) and GPU channels. Wheel: zoom; drag: move; hover: details; \
         double-click: whole window.</p>\n",
        escape(&timeline.why),
        timeline.start_ns as f64 / 1e6,
        timeline.end_ns as f64 / 1e6
    );
    if timeline.tracks.is_empty() {
        html.push_str(
            "<p class=\"warning\">No operation or GPU channel interval lies in this window \
             (or the trace has no ops streams, e.g. a Scalasca-safe trace).</p>\n",
        );
    }
    if let Some(cut) = timeline.cut_at_ns {
        let _ = writeln!(
            html,
            "<p class=\"warning\">The window holds more than {} intervals: it is cut at \
             {:.3} ms; choose a smaller one with --window.</p>",
            super::data::MAX_TIMELINE_INTERVALS,
            cut as f64 / 1e6
        );
    }
    html.push_str(
        "<div class=\"timeline\"><canvas id=\"timeline-canvas\"></canvas>\
         <div id=\"timeline-tooltip\" hidden></div></div>\n</section>\n",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_the_trace_cannot_make_markup() {
        assert_eq!(
            escape("<b>comm & \"x\" 'y'</b>"),
            "&lt;b&gt;comm &amp; &quot;x&quot; &#39;y&#39;&lt;/b&gt;"
        );
        // A name holding `</script>` does not end the data's script element.
        let json = script_json(&serde_json::json!({"name": "</script><b>"})).unwrap();
        assert!(!json.contains("</"), "{json}");
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["name"], "</script><b>");
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(bytes_text(65536), "64 KiB");
        assert_eq!(bytes_text(1536), "1.50 KiB");
        assert_eq!(bytes_text(12), "12 B");
    }
}
