//! The summary as text (tables for a terminal of 100 columns) and as CSV (the operations
//! table, one row per operation and size bucket).

use super::tables::{Figures, Spread};
use super::Summary;
use std::collections::BTreeMap;

/// Communicators with more ranks than this show only their spread in the text.
const RANKS_LISTED: usize = 16;

/// The essentials of how the trace was made, in at most three lines of 100 columns.
fn provenance(summary: &Summary, out: &mut String) {
    let p = &summary.provenance;
    let get = |name: &str| p[name].as_str().filter(|v| !v.is_empty());
    if p.is_null() {
        return;
    }
    let mut made = vec![format!("NCCL {}", get("nccl_version").unwrap_or("unknown"))];
    if let Some(api) = get("profiler_api") {
        made.push(format!("profiler API v{api}"));
    }
    if let Some(plugin) = get("plugin_version") {
        made.push(format!("nccl-scorep {plugin}"));
    }
    if let Some(mask) = get("event_mask") {
        made.push(format!("events {mask}"));
    }
    if let Some(clock) = get("clock") {
        made.push(format!("clock {clock}"));
    }
    out.push_str(&made.join(", "));
    out.push('\n');
    let mut run = Vec::new();
    if let Some(job) = get("job_id") {
        run.push(format!("job {job}"));
    }
    if let Some(hosts) = get("hosts").or(get("host")) {
        run.push(format!("on {}", cut(hosts, 40)));
    }
    let ns = |name: &str| get(name).and_then(|v| v.parse::<i64>().ok());
    if let Some(start) = ns("start_realtime_ns") {
        let when = chrono::DateTime::from_timestamp_nanos(start);
        let mut text = when.format("%Y-%m-%d %H:%M:%S UTC").to_string();
        if let Some(end) = ns("end_realtime_ns").filter(|end| *end >= start) {
            text.push_str(&format!(", {:.1} s", (end - start) as f64 / 1e9));
        }
        run.push(text);
    }
    if !run.is_empty() {
        out.push_str(&run.join(", "));
        out.push('\n');
    }
    if let Some(command) = get("command") {
        out.push_str(&format!(
            "command: {}\n",
            cut(command, 100 - "command: ".len())
        ));
    }
}

/// The human-readable report.
pub fn render(summary: &Summary) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{} process(es), from the {} ({})\n",
        summary.processes, summary.source, summary.input
    ));
    provenance(summary, &mut out);
    if !summary.incomplete.is_empty() {
        out.push_str(&format!(
            "incomplete (killed, or still running): {}\n",
            summary.incomplete.join(", ")
        ));
    }
    if !summary.ranks_without_part.is_empty() {
        out.push_str(&format!(
            "ranks without a trace part (the others' messages to them and from them are \
             unmatched): {}{}\n",
            summary.ranks_without_part[..summary.ranks_without_part.len().min(32)].join(", "),
            if summary.ranks_without_part.len() > 32 {
                format!(", … ({} in all)", summary.ranks_without_part.len())
            } else {
                String::new()
            }
        ));
    }
    out.push_str(&format!(
        "time of all ranks in NCCL: {:.3} ms\n\n",
        summary.total_time_ms
    ));
    operations(summary, &mut out);
    ranks(summary, &mut out);
    stragglers(summary, &mut out);
    if summary.pxn_foreign_ops > 0 {
        out.push_str(&format!(
            "{} proxy operations were progressed for another process (PXN)",
            summary.pxn_foreign_ops
        ));
        if summary.source == "trace" {
            out.push_str(&format!(
                ";\n  {} of them linked to their operation in the originating process",
                summary.pxn_linked_ops
            ));
        }
        out.push('\n');
    }
    if !summary.gpu_times_rejected.is_empty() {
        let total: u64 = summary.gpu_times_rejected.values().sum();
        let reasons: Vec<String> = summary
            .gpu_times_rejected
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        out.push_str(&format!(
            "{total} GPU kernel intervals had impossible times from NCCL ({}): their \
             operations are timed by the host (nccl.gpu_time_rejected in the trace)\n",
            reasons.join(", ")
        ));
    }
    if summary.lost_records > 0 {
        out.push_str(&format!(
            "{} records were lost before they reached the trace (its gaps)\n",
            summary.lost_records
        ));
    }
    let held = summary.held_back;
    if held.waits > 0 {
        let times = match held.waits {
            1 => "once".to_owned(),
            n => format!("{n} times"),
        };
        out.push_str(&format!(
            "NCCL's threads waited {times} for room in the plugin's buffers, {:.3} ms in \
             all, the longest {:.3} ms (NCCL held back by the plugin)\n",
            held.total_ns as f64 / 1e6,
            held.longest_ns as f64 / 1e6,
        ));
    }
    losses(&summary.losses, summary.lost_records, &mut out);
    out
}

/// What the plugin dropped or refused, and apart from it the events it closed itself.
fn losses(counters: &BTreeMap<String, u64>, lost_records: u64, out: &mut String) {
    let (closed, lost): (Vec<_>, Vec<_>) = counters
        .iter()
        .partition(|(name, _)| CLOSED_BY_THE_PLUGIN.contains(&name.as_str()));
    let list = |counters: &[(&String, &u64)]| -> String {
        counters
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if lost.is_empty() && lost_records == 0 {
        out.push_str("nothing dropped or refused\n");
    } else if !lost.is_empty() {
        out.push_str(&format!("dropped or refused: {}\n", list(&lost)));
    }
    if !closed.is_empty() {
        out.push_str(&format!(
            "closed by the plugin (started by NCCL, never stopped; nothing lost): {}\n",
            list(&closed)
        ));
    }
}

/// Counters of events NCCL started and never stopped, which the plugin closed: the events
/// are in the trace, so they are told apart from what was lost (docs/event-log.md).
const CLOSED_BY_THE_PLUGIN: [&str; 4] = [
    "restarted_steps",
    "closed_with_parent",
    "closed_at_finalize",
    "abandoned_proxy_ops",
];

fn operations(summary: &Summary, out: &mut String) {
    out.push_str(&format!(
        "{:<12} {:<15} {:>5} {:>6} {:>10} {:>9} {:>7} {:>9} {:>10} {:>6}\n",
        "comm",
        "operation",
        "ranks",
        "calls",
        "bytes/call",
        "time ms",
        "share %",
        "us/call",
        "busbw GB/s",
        "wait %"
    ));
    let mut incomplete = Vec::new();
    for row in &summary.operations {
        let collective = row.kind == "collective";
        out.push_str(&figures_line(
            &cut(&row.comm, 12),
            &cut(&row.func, 15),
            &row.nranks.to_string(),
            &row.figures,
            collective,
        ));
        if row.sizes.len() > 1 {
            for size in &row.sizes {
                out.push_str(&figures_line(
                    "",
                    &format!("  {}", size.bucket),
                    "",
                    &size.figures,
                    collective,
                ));
            }
        }
        if row.figures.incomplete_calls > 0 {
            incomplete.push(format!(
                "{} on {} ({})",
                row.func, row.comm, row.figures.incomplete_calls
            ));
        }
    }
    if summary.operations.is_empty() {
        out.push_str("(no NCCL operation)\n");
    }
    if !incomplete.is_empty() {
        out.push_str(&format!(
            "calls some rank's part is missing from, not counted above: {}\n",
            incomplete.join(", ")
        ));
    }
    out.push('\n');
}

fn figures_line(comm: &str, op: &str, ranks: &str, f: &Figures, collective: bool) -> String {
    format!(
        "{:<12} {:<15} {:>5} {:>6} {:>10} {:>9.3} {:>7.1} {:>9.1} {:>10.2} {:>6}\n",
        comm,
        op,
        ranks,
        f.calls,
        bytes(f.bytes_per_call),
        f.time_ms,
        f.share * 100.0,
        f.time_per_call_us,
        f.busbw_gbs,
        if collective {
            format!("{:.1}", f.wait_share * 100.0)
        } else {
            "-".to_owned()
        }
    )
}

fn ranks(summary: &Summary, out: &mut String) {
    if summary.ranks.is_empty() {
        return;
    }
    out.push_str(&format!(
        "{:<12} {:<8} {:>7} {:>10} {:>10} {:>7} {:>11}\n",
        "comm", "rank", "calls", "time ms", "wait ms", "wait %", "busbw GB/s"
    ));
    let busbw = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
    for comm in &summary.ranks {
        let name = cut(&comm.comm, 12);
        if comm.ranks.len() <= RANKS_LISTED {
            for r in &comm.ranks {
                out.push_str(&format!(
                    "{:<12} {:<8} {:>7} {:>10.3} {:>10.3} {:>7.1} {:>11}\n",
                    name,
                    r.rank,
                    r.calls,
                    r.time_ms,
                    r.wait_ms,
                    r.wait_share * 100.0,
                    busbw(r.busbw_gbs)
                ));
            }
        } else {
            out.push_str(&format!(
                "{name:<12} {} ranks: their spread below (--json lists each)\n",
                comm.ranks.len()
            ));
        }
        let pick = |s: &Option<Spread>, which: fn(&Spread) -> f64| s.as_ref().map(which);
        for (label, which) in [
            ("min", (|s: &Spread| s.min) as fn(&Spread) -> f64),
            ("median", |s: &Spread| s.median),
            ("max", |s: &Spread| s.max),
        ] {
            out.push_str(&format!(
                "{:<12} {:<8} {:>7} {:>10.3} {:>10.3} {:>7} {:>11}\n",
                "",
                label,
                "",
                pick(&comm.time_ms, which).unwrap_or(0.0),
                pick(&comm.wait_ms, which).unwrap_or(0.0),
                "",
                busbw(pick(&comm.busbw_gbs, which))
            ));
        }
    }
    out.push('\n');
}

fn stragglers(summary: &Summary, out: &mut String) {
    straggler_verdicts(summary, out);
    if let Some(note) = summary.clock_note() {
        out.push_str(&format!("  ({note})\n"));
    }
}

fn straggler_verdicts(summary: &Summary, out: &mut String) {
    let rule = &summary.straggler_rule;
    if summary.stragglers.is_empty() {
        out.push_str("no straggler");
        match summary.latest_ranks.first() {
            Some(l) => out.push_str(&format!(
                ": the latest rank on median, rank {} in {} on comm {} ({:+.1} us{}),\n  \
                 is not named: {}\n",
                l.rank,
                l.func,
                cut(&l.comm, 24),
                l.median_lateness_us,
                within_clocks(summary, l.median_lateness_us),
                l.verdict
            )),
            None => out.push_str(" (no collective)\n"),
        }
    } else {
        out.push_str(&format!(
            "stragglers (at least {} calls, late by at least {:.0} us and {:.0}% of the others'\n\
             time in the call on median, one-sided Mann-Whitney p < {} / ranks):\n",
            rule.min_instances,
            rule.floor_us,
            rule.min_effect * 100.0,
            rule.significance
        ));
        for l in &summary.stragglers {
            out.push_str(&format!(
                "  rank {} in {} on comm {}: late by {:.1} us{} on median, last in {} of {} calls\n\
                 \x20   (p = {:.1e}); the other ranks waited {:.3} ms for it\n",
                l.rank,
                l.func,
                cut(&l.comm, 24),
                l.median_lateness_us,
                within_clocks(summary, l.median_lateness_us),
                l.last_calls,
                l.instances,
                l.p_value.unwrap_or(1.0),
                l.cost_ms
            ));
        }
    }
}

/// The mark of a lateness the hosts' clocks cannot tell (empty otherwise).
fn within_clocks(summary: &Summary, lateness_us: f64) -> &'static str {
    if summary.within_clock_uncertainty(lateness_us) {
        ", within the clocks' alignment uncertainty"
    } else {
        ""
    }
}

/// `s`, cut to `width` characters with a `~` at the end when longer.
fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_owned()
    } else {
        let mut cut: String = s.chars().take(width.saturating_sub(1)).collect();
        cut.push('~');
        cut
    }
}

/// Bytes in binary units: `512 B`, `64.0 KiB`, `1.0 MiB`.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The columns of the CSV output, in order (docs/summary.md).
pub const CSV_COLUMNS: [&str; 19] = [
    "comm",
    "comm_hash",
    "func",
    "kind",
    "size_bucket",
    "nranks",
    "calls",
    "incomplete_calls",
    "bytes_per_call",
    "time_ms",
    "share",
    "time_per_call_us",
    "mean_execution_us",
    "algbw_gbs",
    "busbw_gbs",
    "wait_ms",
    "wait_share",
    "mean_skew_us",
    "pairs",
];

/// The operations table as CSV: a header line, then per operation a row with the size
/// bucket `all` followed by a row per size bucket, the costliest operation first.
pub fn render_csv(summary: &Summary) -> String {
    let mut out = CSV_COLUMNS.join(",");
    out.push('\n');
    for row in &summary.operations {
        let pairs = row.pairs.map_or_else(String::new, |p| p.to_string());
        let line = |bucket: &str, f: &Figures| {
            [
                csv_field(&row.comm),
                csv_field(&row.comm_hash),
                csv_field(&row.func),
                row.kind.to_owned(),
                csv_field(bucket),
                row.nranks.to_string(),
                f.calls.to_string(),
                f.incomplete_calls.to_string(),
                f.bytes_per_call.to_string(),
                f.time_ms.to_string(),
                f.share.to_string(),
                f.time_per_call_us.to_string(),
                f.mean_execution_us.to_string(),
                f.algbw_gbs.to_string(),
                f.busbw_gbs.to_string(),
                f.wait_ms.to_string(),
                f.wait_share.to_string(),
                f.mean_skew_us.to_string(),
                pairs.clone(),
            ]
            .join(",")
                + "\n"
        };
        out.push_str(&line("all", &row.figures));
        for size in &row.sizes {
            out.push_str(&line(&size.bucket, &size.figures));
        }
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_fields_are_written_for_people_and_spreadsheets() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(65536), "64.0 KiB");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
        assert_eq!(csv_field("world"), "world");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(cut("averyveryverylongname", 8), "averyve~");
        assert_eq!(cut("short", 8), "short");
    }

    #[test]
    fn events_the_plugin_closed_are_told_apart_from_losses() {
        let counters = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|&(n, v)| (n.to_owned(), v)).collect()
        };
        let mut out = String::new();
        losses(&counters(&[("restarted_steps", 560)]), 0, &mut out);
        assert_eq!(
            out,
            "nothing dropped or refused\n\
             closed by the plugin (started by NCCL, never stopped; nothing lost): \
             restarted_steps=560\n"
        );
        let mut out = String::new();
        losses(
            &counters(&[("closed_at_finalize", 2), ("ring_full", 3)]),
            3,
            &mut out,
        );
        assert!(
            out.starts_with("dropped or refused: ring_full=3\n"),
            "{out}"
        );
        assert!(
            out.contains("nothing lost): closed_at_finalize=2\n"),
            "{out}"
        );
        let mut out = String::new();
        losses(&BTreeMap::new(), 0, &mut out);
        assert_eq!(out, "nothing dropped or refused\n");
    }
}
