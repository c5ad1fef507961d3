//! `nccl-scorep report`: a job's merged trace as one self-contained HTML page that opens
//! offline (docs/report.md): the summary's tables, bus bandwidth per message size, the
//! ranks' arrival skew, a timeline of one window, the point-to-point bytes and where each
//! process's time went; `--png DIR` also writes each picture as a PNG.
//!
//! The trace is read three times, each streamed: the summary's pass (one record per rank
//! and operation), the profile's (one value per call path and location) and the
//! timeline's (only the window's intervals are kept); twice when the job's profile.cubex,
//! written by the merge after the trace, gives the time per process instead.

mod data;
mod page;
mod plots;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::export::Window;

/// The options of `nccl-scorep report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run directory (its merged traces.otf2), or an archive's anchor file.
    path: PathBuf,
    /// Where to write the page (default: report.html beside the trace).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Also write each picture as a PNG into this directory (made when missing).
    #[arg(long, value_name = "DIR")]
    png: Option<PathBuf>,
    /// The timeline's window instead of the slowest collective's, relative to the
    /// trace's start: START:END, each a number with a unit s, ms, us or ns (seconds
    /// without one); either may be left out.
    #[arg(long, value_name = "START:END", value_parser = Window::parse)]
    window: Option<Window>,
}

/// What a report wrote.
pub struct Written {
    pub page: PathBuf,
    pub pngs: Vec<PathBuf>,
    pub plots: Vec<&'static str>,
}

/// `nccl-scorep report`: exit status 0 when written, 2 when the trace cannot be found or
/// opened, 1 for other failures.
pub fn main(args: &Args) -> ExitCode {
    let anchor = match crate::profile::archive_of(&args.path) {
        Ok(anchor) => anchor,
        Err(error) => {
            eprintln!("nccl-scorep report: {error}");
            return ExitCode::from(2);
        }
    };
    let target = args
        .output
        .clone()
        .unwrap_or_else(|| anchor.with_file_name("report.html"));
    match write(&anchor, &target, args.png.as_deref(), args.window) {
        Ok(written) => {
            println!(
                "report written to {} ({})",
                written.page.display(),
                written.plots.join(", ")
            );
            for png in &written.pngs {
                println!("picture written to {}", png.display());
            }
            ExitCode::SUCCESS
        }
        Err(crate::summary::Error::CannotOpen(error)) => {
            eprintln!("nccl-scorep report: {error}");
            ExitCode::from(2)
        }
        Err(crate::summary::Error::Failed(error)) => {
            eprintln!("nccl-scorep report: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Writes the report of the trace at `anchor` to `target`, and the PNGs into `png`.
pub fn write(
    anchor: &Path,
    target: &Path,
    png: Option<&Path>,
    window: Option<Window>,
) -> Result<Written, crate::summary::Error> {
    use crate::summary::Error::Failed;
    plots::load_font().map_err(Failed)?;
    let report = data::gather(anchor, window)?;
    for warning in &report.summary.warnings {
        eprintln!("nccl-scorep report: warning: {warning}");
    }
    let plots = plots::plots(&report);
    let mut drawn = Vec::with_capacity(plots.len());
    for plot in plots {
        let svg = plot
            .svg(&report)
            .map_err(|e| Failed(format!("cannot draw {}: {e}", plot.id)))?;
        drawn.push((plot, svg));
    }
    let html = page::render(&report, &drawn).map_err(Failed)?;
    // Through a temporary file beside it, so that a failed write leaves no half page.
    let mut partial = target.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, html)
        .and_then(|()| std::fs::rename(&partial, target))
        .map_err(|e| {
            drop(std::fs::remove_file(&partial));
            Failed(format!("cannot write {}: {e}", target.display()))
        })?;
    let mut pngs = Vec::new();
    if let Some(dir) = png {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failed(format!("cannot make {}: {e}", dir.display())))?;
        for (plot, _) in &drawn {
            let path = dir.join(format!("{}.png", plot.id));
            plot.png(&report, &path).map_err(Failed)?;
            pngs.push(path);
        }
    }
    Ok(Written {
        page: target.to_path_buf(),
        pngs,
        plots: drawn.iter().map(|(plot, _)| plot.id).collect(),
    })
}
