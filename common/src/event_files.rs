//! The list a finished part keeps of its event files: the length and number of events
//! each was written with. The merge compares the files with it instead of reading them
//! (a file cut short, or not all written, no longer matches it).
//!
//! A text file, `<part>/event-files.txt`:
//!
//! ```text
//! nccl-scorep event files 1
//! <location id> <bytes> <events>
//! ...
//! ```
//!
//! A location whose file was not all written (a failed write) is not listed: the merge
//! then reads that file to judge it.

use std::collections::HashMap;

/// The first line, which names the format and its version.
const HEADER: &str = "nccl-scorep event files 1";

/// One event file as its process finished it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrittenEventFile {
    pub location: u64,
    /// Its length in bytes.
    pub bytes: u64,
    /// The events it holds.
    pub events: u64,
}

/// The file's text for `files`.
pub fn render(files: &[WrittenEventFile]) -> String {
    let mut text = String::with_capacity(HEADER.len() + 1 + files.len() * 32);
    text.push_str(HEADER);
    text.push('\n');
    for file in files {
        text.push_str(&format!(
            "{} {} {}\n",
            file.location, file.bytes, file.events
        ));
    }
    text
}

/// The files listed in `text`, by location: `None` when it is not such a list (another
/// version, or damaged), so that nothing is taken from it.
pub fn parse(text: &str) -> Option<HashMap<u64, WrittenEventFile>> {
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let mut files = HashMap::new();
    for line in lines {
        let mut fields = line.split(' ').map(str::parse::<u64>);
        let (Some(Ok(location)), Some(Ok(bytes)), Some(Ok(events)), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return None;
        };
        let file = WrittenEventFile {
            location,
            bytes,
            events,
        };
        if files.insert(location, file).is_some() {
            return None;
        }
    }
    Some(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_reads_back_as_written_and_anything_else_is_refused() {
        let files = [
            WrittenEventFile {
                location: 0,
                bytes: 339_811,
                events: 12_000,
            },
            WrittenEventFile {
                location: 4_294_967_296,
                bytes: 20,
                events: 0,
            },
        ];
        let text = render(&files);
        assert!(text.starts_with("nccl-scorep event files 1\n0 339811 12000\n"));
        let read = parse(&text).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[&4_294_967_296], files[1]);
        assert_eq!(parse(HEADER).unwrap().len(), 0);
        for bad in [
            "",
            "nccl-scorep event files 2\n0 1 2\n",
            "nccl-scorep event files 1\n0 1\n",
            "nccl-scorep event files 1\n0 1 2 3\n",
            "nccl-scorep event files 1\n0 1 x\n",
            "nccl-scorep event files 1\n0 1 2\n0 1 2\n",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
    }
}
