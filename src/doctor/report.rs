//! The doctor's report: sections of aligned `status  item  detail` lines.

use std::ffi::OsStr;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Found,
    Missing,
    Set,
    Unset,
    Disabled,
    Uses,
    Error,
    Note,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = match self {
            Status::Found => "found",
            Status::Missing => "missing",
            Status::Set => "set",
            Status::Unset => "unset",
            Status::Disabled => "disabled",
            Status::Uses => "uses",
            Status::Error => "error",
            Status::Note => "note",
        };
        // `pad` (not `write_str`) so that width flags such as `{:<8}` apply.
        f.pad(word)
    }
}

#[derive(Debug)]
struct Line {
    status: Status,
    item: String,
    detail: String,
}

#[derive(Debug, Default)]
pub(super) struct Report {
    sections: Vec<(&'static str, Vec<Line>)>,
}

impl Report {
    pub(super) fn section(&mut self, title: &'static str) {
        self.sections.push((title, Vec::new()));
    }

    pub(super) fn line(
        &mut self,
        status: Status,
        item: impl Into<String>,
        detail: impl Into<String>,
    ) {
        let line = Line {
            status,
            item: item.into(),
            detail: detail.into(),
        };
        match self.sections.last_mut() {
            Some((_, lines)) => lines.push(line),
            None => self.sections.push(("", vec![line])),
        }
    }

    pub(super) fn write(&self, out: &mut impl Write) -> io::Result<()> {
        const MAX_ITEM_WIDTH: usize = 26;
        let item_width = self
            .sections
            .iter()
            .flat_map(|(_, lines)| lines)
            .map(|line| line.item.chars().count())
            .filter(|&width| width <= MAX_ITEM_WIDTH)
            .max()
            .unwrap_or(0);
        for (title, lines) in &self.sections {
            writeln!(out)?;
            writeln!(out, "{title}")?;
            for line in lines {
                let text = format!(
                    "  {:<8}  {:<item_width$}  {}",
                    line.status, line.item, line.detail
                );
                writeln!(out, "{}", text.trim_end())?;
            }
        }
        Ok(())
    }
}

pub(super) fn show(path: &Path) -> String {
    path.display().to_string()
}

pub(super) fn show_os(value: &OsStr) -> String {
    value.to_string_lossy().into_owned()
}

/// `path`, plus the file it finally points to when it is a symlink.
pub(super) fn show_with_target(path: &Path) -> String {
    match std::fs::canonicalize(path) {
        Ok(real) if real != path => format!("{} -> {}", path.display(), real.display()),
        _ => show(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_aligns_its_columns() -> io::Result<()> {
        let mut report = Report::default();
        report.section("Section");
        report.line(Status::Found, "short", "a");
        report.line(Status::Missing, "a longer item", "b");
        let mut text = Vec::new();
        report.write(&mut text)?;
        let text = String::from_utf8_lossy(&text);
        assert!(text.contains("\nSection\n"), "{text}");
        assert!(text.contains("\n  found     short          a\n"), "{text}");
        assert!(text.contains("\n  missing   a longer item  b\n"), "{text}");
        Ok(())
    }
}
