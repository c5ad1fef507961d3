//! Ending the event file of a killed process where OTF2 can read it.
//!
//! OTF2 writes an event file in chunks of a fixed size. Each chunk starts with a header
//! (record kind, byte order, the numbers of its first and last event), holds records, and
//! is padded with end-of-chunk bytes. Only closing the trace writes the end-of-file record
//! that tells a reader to stop: a reader of a file that lacks it asks for a chunk after the
//! last one and never returns. A killed process leaves whole chunks, and the start of the
//! chunk it was filling: the plugin writes what a chunk holds now and then, records and
//! the header's event count, so the file ends after a record (unless the write itself was
//! cut short).
//!
//! Ending such a file means walking the records of its last chunk to where they end and
//! putting the end-of-file record there. Records say their own length, so the walk needs
//! no knowledge of event kinds (the layout: [`otf2_sys::event_format`]).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use nccl_scorep_common::event_files::WrittenEventFile;

use otf2_sys::event_format::{
    ATTRIBUTE_LIST, BIG_ENDIAN, CHUNK_HEADER, END_OF_BUFFER, END_OF_CHUNK, END_OF_FILE,
    FIRST_EVENT_AT, FIRST_EVENT_KIND, HEADER_BYTES, LAST_EVENT_AT, LITTLE_ENDIAN, LONG_LENGTH,
    TIMESTAMP,
};

/// What the walk of one chunk found.
#[derive(Debug)]
struct ChunkRecords {
    /// The number of the chunk's first event (events are numbered from 1 in a file).
    first_event: u64,
    big_endian: bool,
    /// Where each event record of the chunk ends (offsets in the chunk).
    event_ends: Vec<usize>,
    /// Where the records end: the offset of the end-of-chunk byte.
    records_end: usize,
}

fn read_u64(bytes: &[u8], at: usize, big_endian: bool) -> Option<u64> {
    let raw: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(if big_endian {
        u64::from_be_bytes(raw)
    } else {
        u64::from_le_bytes(raw)
    })
}

/// Walks the records of one chunk up to its end-of-chunk (or end-of-file) byte, or to the
/// last record that ends within its first `data_end` bytes (the rest of the chunk is
/// zeros: what was never written). Fails on anything that is not such a chunk: a bad
/// header, an unknown record kind, a record crossing the chunk's end, or no byte left for
/// the end-of-file record.
fn walk_chunk(chunk: &[u8], data_end: usize) -> Result<ChunkRecords, String> {
    if data_end < HEADER_BYTES {
        return Err("the chunk header is cut off".to_owned());
    }
    if chunk.len() < HEADER_BYTES || chunk[0] != CHUNK_HEADER {
        return Err("the chunk does not start with a chunk header".to_owned());
    }
    let big_endian = match chunk[1] {
        LITTLE_ENDIAN => false,
        BIG_ENDIAN => true,
        other => return Err(format!("unknown byte order mark {other:#04x}")),
    };
    let first_event = read_u64(chunk, FIRST_EVENT_AT, big_endian).unwrap_or_default();
    if first_event == 0 {
        return Err("the chunk header numbers its first event 0".to_owned());
    }
    let mut event_ends = Vec::new();
    let mut at = HEADER_BYTES;
    while at < chunk.len() {
        let kind = chunk[at];
        let end = match kind {
            // A chunk this module ended has an end-of-file record where its records end.
            END_OF_CHUNK | END_OF_FILE => {
                return Ok(ChunkRecords {
                    first_event,
                    big_endian,
                    event_ends,
                    records_end: at,
                })
            }
            TIMESTAMP => at + 9,
            ATTRIBUTE_LIST | FIRST_EVENT_KIND.. => {
                let length_at = at + 1;
                let &short = chunk
                    .get(length_at)
                    .ok_or_else(|| "a record's length is cut off".to_owned())?;
                let (data_at, length) = if short == LONG_LENGTH {
                    let long = read_u64(chunk, length_at + 1, big_endian)
                        .ok_or_else(|| "a record's length is cut off".to_owned())?;
                    (length_at + 9, long)
                } else {
                    (length_at + 1, u64::from(short))
                };
                usize::try_from(length)
                    .ok()
                    .and_then(|length| data_at.checked_add(length))
                    .ok_or_else(|| format!("a record claims {length} bytes"))?
            }
            other => return Err(format!("unknown record kind {other} at byte {at}")),
        };
        // The end-of-chunk byte must follow within the chunk.
        if end >= chunk.len() {
            return Err(format!("a record at byte {at} runs past the chunk's end"));
        }
        if end > data_end {
            // Cut short by the end of the data: the records end before it.
            return Ok(ChunkRecords {
                first_event,
                big_endian,
                event_ends,
                records_end: at,
            });
        }
        if kind >= FIRST_EVENT_KIND {
            event_ends.push(end);
        }
        at = end;
    }
    Err("the chunk has no end-of-chunk byte".to_owned())
}

/// What [`end_written_file`] kept of a file.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct EndedFile {
    /// Events in the ended file (0: nothing could be kept, no file was written).
    pub events: u64,
    /// Chunks at its end that could not be read and were left out.
    pub unreadable_chunks: u64,
}

/// Reads `length` bytes of chunk `index` into `into`, and zeros after them.
fn read_chunk(
    file: &mut File,
    index: u64,
    chunk_bytes: u64,
    length: usize,
    into: &mut [u8],
) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(index * chunk_bytes))?;
    file.read_exact(&mut into[..length])?;
    into[length..].fill(0);
    Ok(())
}

/// Writes at `to` the chunks of the event file `from` up to the last one that reads as a
/// chunk (the last, unfinished one included), with the end-of-file record after that
/// chunk's last record: a file OTF2 reads to its end. `chunk_bytes` is the archive's event
/// chunk size.
pub(crate) fn end_written_file(
    from: &Path,
    to: &Path,
    chunk_bytes: u64,
) -> Result<EndedFile, String> {
    let failed = |what: &str, path: &Path, e: std::io::Error| {
        format!("cannot {what} {}: {e}", path.display())
    };
    let mut input = File::open(from).map_err(|e| failed("open", from, e))?;
    let length = input.metadata().map_err(|e| failed("read", from, e))?.len();
    let whole = length / chunk_bytes;
    let unfinished = (length % chunk_bytes) as usize;
    // The unfinished chunk first, then the whole ones from the last.
    let candidates = (unfinished > 0)
        .then_some((whole, unfinished))
        .into_iter()
        .chain((0..whole).rev().map(|index| (index, chunk_bytes as usize)));
    let mut found = EndedFile::default();
    let mut chunk = vec![0u8; chunk_bytes as usize];
    for (index, data_end) in candidates {
        read_chunk(&mut input, index, chunk_bytes, data_end, &mut chunk)
            .map_err(|e| failed("read", from, e))?;
        let Ok(records) = walk_chunk(&chunk, data_end) else {
            found.unreadable_chunks += 1;
            continue;
        };
        found.events = records.first_event - 1 + records.event_ends.len() as u64;
        input
            .seek(SeekFrom::Start(0))
            .map_err(|e| failed("read", from, e))?;
        let mut output = File::create(to).map_err(|e| failed("create", to, e))?;
        std::io::copy(&mut (&mut input).take(index * chunk_bytes), &mut output)
            .map_err(|e| failed("copy", from, e))?;
        end_chunk_at(&mut chunk, &records, records.records_end);
        output
            .write_all(&chunk)
            .map_err(|e| failed("write", to, e))?;
        return Ok(found);
    }
    Ok(found)
}

/// Puts the end-of-file record at `end` of `chunk` (after an event record, or where the
/// records end) and numbers the chunk's last event accordingly.
fn end_chunk_at(chunk: &mut [u8], records: &ChunkRecords, end: usize) {
    let kept = records.event_ends.iter().take_while(|&&e| e <= end).count() as u64;
    let last_event = records.first_event - 1 + kept;
    let bytes = if records.big_endian {
        last_event.to_be_bytes()
    } else {
        last_event.to_le_bytes()
    };
    chunk[LAST_EVENT_AT..LAST_EVENT_AT + 8].copy_from_slice(&bytes);
    chunk[end] = END_OF_FILE;
    if let Some(next) = chunk.get_mut(end + 1) {
        *next = END_OF_BUFFER;
    }
}

/// Shortens an event file that [`end_written_file`] wrote to its first `keep` events (at
/// least 1, at most as many as it has).
pub(crate) fn keep_first_events(path: &Path, chunk_bytes: u64, keep: u64) -> Result<(), String> {
    let failed = |what: &str, e: std::io::Error| format!("cannot {what} {}: {e}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| failed("open", e))?;
    let chunks = file.metadata().map_err(|e| failed("read", e))?.len() / chunk_bytes;
    let mut chunk = vec![0u8; chunk_bytes as usize];
    for index in (0..chunks).rev() {
        read_chunk(&mut file, index, chunk_bytes, chunk.len(), &mut chunk)
            .map_err(|e| failed("read", e))?;
        let records = walk_chunk(&chunk, chunk.len())?;
        if records.first_event > keep {
            continue;
        }
        let index_in_chunk = (keep - records.first_event) as usize;
        let &end = records
            .event_ends
            .get(index_in_chunk)
            .ok_or_else(|| format!("{} has fewer than {keep} events", path.display()))?;
        end_chunk_at(&mut chunk, &records, end);
        file.seek(SeekFrom::Start(index * chunk_bytes))
            .map_err(|e| failed("write", e))?;
        file.write_all(&chunk).map_err(|e| failed("write", e))?;
        file.set_len((index + 1) * chunk_bytes)
            .map_err(|e| failed("shorten", e))?;
        return Ok(());
    }
    Err(format!("{} has no event {keep}", path.display()))
}

/// How much of a finished event file the merge reads to tell whether it is sound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EventFileCheck {
    /// A file as long as its process listed it, with as many events
    /// ([`nccl_scorep_common::event_files`]), is taken without reading it. Another one is
    /// read: every chunk's header (byte order, the numbers of its events), its length,
    /// and the records of its last chunk, where a write cut short would show (a few bytes
    /// per chunk). Either way the merge's reading grows with the locations, not the events.
    #[default]
    Quick,
    /// Walk every record of every chunk: reads every byte of the file once.
    Records,
}

/// Checks a finished event file: it was listed by its process as this long with `events`
/// events and is ([`EventFileCheck::Quick`]), or it passes [`check_event_file`].
pub(crate) fn check_listed_event_file(
    path: &Path,
    listed: Option<&WrittenEventFile>,
    chunk_bytes: u64,
    events: u64,
    check: EventFileCheck,
) -> Result<(), String> {
    let as_listed = check == EventFileCheck::Quick
        && listed.is_some_and(|listed| {
            listed.events == events
                && std::fs::metadata(path).is_ok_and(|file| file.len() == listed.bytes)
        });
    if as_listed {
        return Ok(());
    }
    check_event_file(path, chunk_bytes, events, check)
}

/// Checks a finished event file by reading it: every chunk starts with a header in a
/// known byte order, the chunks number their events without a gap, the file holds the
/// `events` events the definitions announce, and the records of the last chunk (of every
/// chunk with [`EventFileCheck::Records`]) walk to its end (known record kinds, lengths
/// within the chunk) and are as many events as its header numbers. A damaged or cut file
/// is refused before the merge links it into a trace OTF2 cannot read.
pub(crate) fn check_event_file(
    path: &Path,
    chunk_bytes: u64,
    events: u64,
    check: EventFileCheck,
) -> Result<(), String> {
    let damaged = |why: String| format!("{} is damaged: {why}", path.display());
    let file = match File::open(path) {
        Ok(file) => file,
        Err(_) if events == 0 => return Ok(()),
        Err(e) => return Err(format!("cannot open {}: {e}", path.display())),
    };
    let length = file.metadata().map_err(|e| damaged(e.to_string()))?.len();
    let chunk_bytes = chunk_bytes.max(HEADER_BYTES as u64 + 1);
    let chunks = length.div_ceil(chunk_bytes);
    if check == EventFileCheck::Quick && chunks > 1 {
        // A few bytes per chunk: without this, the kernel's read-ahead (megabytes on
        // many disks and parallel file systems) would read most of the file anyway.
        // SAFETY: advice on an open descriptor for its whole length; it reads no memory.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    }
    let mut next_event = 1u64;
    let mut chunk = Vec::new();
    for index in 0..chunks {
        let walk = check == EventFileCheck::Records || index + 1 == chunks;
        let size = if walk {
            chunk_bytes.min(length - index * chunk_bytes) as usize
        } else {
            HEADER_BYTES
        };
        chunk.resize(size, 0);
        file.read_exact_at(&mut chunk, index * chunk_bytes)
            .map_err(|e| damaged(format!("chunk {index}: {e}")))?;
        if chunk.len() < HEADER_BYTES || chunk[0] != CHUNK_HEADER {
            return Err(damaged(format!(
                "chunk {index} does not start with a chunk header"
            )));
        }
        let big_endian = match chunk[1] {
            LITTLE_ENDIAN => false,
            BIG_ENDIAN => true,
            other => {
                return Err(damaged(format!(
                    "chunk {index}: byte order mark {other:#04x}"
                )))
            }
        };
        let first = read_u64(&chunk, FIRST_EVENT_AT, big_endian).unwrap_or_default();
        let last = read_u64(&chunk, LAST_EVENT_AT, big_endian).unwrap_or_default();
        if first != next_event || last + 1 < first {
            return Err(damaged(format!(
                "chunk {index} numbers its events {first} to {last}, after {} events",
                next_event - 1
            )));
        }
        if walk {
            let records = walk_chunk(&chunk, chunk.len())
                .map_err(|why| damaged(format!("chunk {index}: {why}")))?;
            let held = records.event_ends.len() as u64;
            if held != last + 1 - first {
                return Err(damaged(format!(
                    "chunk {index} holds {held} events where its header numbers {}",
                    last + 1 - first
                )));
            }
        }
        next_event = last + 1;
    }
    if next_event - 1 != events {
        return Err(damaged(format!(
            "it holds {} events where the definitions announce {events}",
            next_event - 1
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otf2::test_archives::{write_nested_events, LOCATION};
    use crate::otf2::{scan_events, EventScan};
    use std::path::PathBuf;

    const CHUNK: u64 = 256 * 1024;

    /// A copy of the archive `from` whose event file is `evt` instead.
    fn archive_with(from: &Path, to: &Path, evt: &Path) -> PathBuf {
        std::fs::create_dir_all(to.join("traces")).unwrap();
        for file in ["traces.otf2", "traces.def"] {
            std::fs::copy(from.join(file), to.join(file)).unwrap();
        }
        std::fs::copy(evt, to.join("traces").join(format!("{LOCATION}.evt"))).unwrap();
        to.join("traces.otf2")
    }

    fn scan(anchor: &Path) -> EventScan {
        scan_events(anchor, &[LOCATION]).unwrap()[0]
    }

    /// The event file as a killed process leaves it: `chunks` whole chunks of `evt` and
    /// `extra` bytes of the next one.
    fn killed_copy(evt: &Path, to: &Path, chunks: u64, extra: u64) {
        let bytes = std::fs::read(evt).unwrap();
        let length = (chunks * CHUNK + extra) as usize;
        assert!(bytes.len() > length, "write more events");
        std::fs::write(to, &bytes[..length]).unwrap();
    }

    #[test]
    fn damaged_event_files_are_told_from_sound_ones() {
        use EventFileCheck::{Quick, Records};
        let dir = tempfile::tempdir().unwrap();
        // 30 000 pairs of nested intervals: 120 000 events in several chunks.
        let evt = write_nested_events(&dir.path().join("sound"), 30_000, 0);
        let events = 120_000;
        let sound = std::fs::read(&evt).unwrap();
        let chunks = (sound.len() as u64).div_ceil(CHUNK);
        assert!(chunks >= 3, "several chunks");
        let broken = dir.path().join("broken.evt");
        let check_broken = |bytes: &[u8], check| {
            std::fs::write(&broken, bytes).unwrap();
            check_event_file(&broken, CHUNK, events, check)
        };
        for check in [Quick, Records] {
            check_event_file(&evt, CHUNK, events, check).unwrap();
            let why = check_event_file(&evt, CHUNK, events + 1, check).unwrap_err();
            assert!(why.contains("where the definitions announce"), "{why}");
            // A chunk header overwritten.
            let mut bytes = sound.clone();
            bytes[CHUNK as usize] = 0x77;
            let why = check_broken(&bytes, check).unwrap_err();
            assert!(
                why.contains("chunk 1 does not start with a chunk header"),
                "{why}"
            );
            // The file cut after its first chunk, and inside its last one.
            let why = check_broken(&sound[..CHUNK as usize], check).unwrap_err();
            assert!(why.contains("where the definitions announce"), "{why}");
            let why = check_broken(&sound[..sound.len() - 100], check).unwrap_err();
            assert!(why.contains(&format!("chunk {}", chunks - 1)), "{why}");
            // The last chunk's records damaged (the first record's kind byte; the second's
            // length byte): its header is sound, its records are not.
            let last = ((chunks - 1) * CHUNK) as usize;
            for (at, value) in [(HEADER_BYTES, 0x03u8), (HEADER_BYTES + 10, 0xF0)] {
                let mut bytes = sound.clone();
                bytes[last + at] = value;
                let why = check_broken(&bytes, check).unwrap_err();
                assert!(why.contains(&format!("chunk {}", chunks - 1)), "{why}");
            }
            assert!(check_event_file(&dir.path().join("none.evt"), CHUNK, 0, check).is_ok());
        }
        // The records of a chunk before the last damaged: only walking every record finds
        // it; the chunks' headers and the last chunk are sound.
        for (at, value) in [(HEADER_BYTES, 0x03u8), (HEADER_BYTES + 10, 0xF0)] {
            let mut bytes = sound.clone();
            bytes[CHUNK as usize + at] = value;
            let why = check_broken(&bytes, Records).unwrap_err();
            assert!(why.contains("chunk 1"), "{why}");
            check_broken(&bytes, Quick).unwrap();
        }
    }

    #[test]
    fn a_file_as_its_process_listed_it_is_not_read() {
        use EventFileCheck::{Quick, Records};
        let dir = tempfile::tempdir().unwrap();
        let evt = write_nested_events(&dir.path().join("sound"), 1000, 0);
        let bytes = std::fs::metadata(&evt).unwrap().len();
        let listed = |bytes, events| WrittenEventFile {
            location: LOCATION,
            bytes,
            events,
        };
        let check = |listed: Option<&WrittenEventFile>, events, check| {
            check_listed_event_file(&evt, listed, CHUNK, events, check)
        };
        // Sound, listed or not.
        check(Some(&listed(bytes, 4000)), 4000, Quick).unwrap();
        check(None, 4000, Quick).unwrap();
        // Its header damaged: as listed, it is taken unread; reading it finds the damage,
        // and so does a list of another length or other events.
        let mut damaged = std::fs::read(&evt).unwrap();
        damaged[0] = 0x77;
        std::fs::write(&evt, &damaged).unwrap();
        check(Some(&listed(bytes, 4000)), 4000, Quick).unwrap();
        for (listed, check) in [
            (Some(listed(bytes, 4000)), Records),
            (Some(listed(bytes + 1, 4000)), Quick),
            (Some(listed(bytes, 3999)), Quick),
            (None, Quick),
        ] {
            let why = check_listed_event_file(&evt, listed.as_ref(), CHUNK, 4000, check);
            assert!(
                why.unwrap_err()
                    .contains("does not start with a chunk header"),
                "{listed:?} {check:?}"
            );
        }
    }

    #[test]
    fn a_killed_process_file_reads_to_its_last_complete_record() {
        let dir = tempfile::tempdir().unwrap();
        let full = dir.path().join("full");
        let evt = write_nested_events(&full, 40_000, 100);
        assert_eq!(scan(&full.join("traces.otf2")).events, 160_000);

        // Three whole chunks.
        let whole = dir.path().join("whole.evt");
        killed_copy(&evt, &whole, 3, 0);
        let in_whole = end_written_file(&whole, &dir.path().join("whole-ended.evt"), CHUNK);
        let in_whole = in_whole.unwrap().events;
        // About 13 bytes an event: three chunks hold some 60,000.
        assert!((50_000..70_000).contains(&in_whole), "{in_whole}");

        // And the first 1000 bytes of the fourth, cut inside a record.
        let killed = dir.path().join("killed.evt");
        killed_copy(&evt, &killed, 3, 1000);
        let ended = dir.path().join("ended.evt");
        let kept = end_written_file(&killed, &ended, CHUNK).unwrap();
        assert_eq!(kept.unreadable_chunks, 0);
        assert_eq!(std::fs::metadata(&ended).unwrap().len(), 4 * CHUNK);
        // Some 60 events of 12 to 14 bytes after its 18-byte header.
        assert!(
            (in_whole + 50..in_whole + 80).contains(&kept.events),
            "{kept:?} after {in_whole}"
        );

        let anchor = archive_with(&full, &dir.path().join("read"), &ended);
        let found = scan(&anchor);
        assert_eq!(
            found.events, kept.events,
            "OTF2 reads every event, and stops"
        );
        // Intervals are closed after every fourth event, the last one at 10 · its number.
        assert_eq!(found.balanced, kept.events / 4 * 4);
        assert_eq!(found.balanced_time, found.balanced * 10);
    }

    #[test]
    fn a_killed_process_file_is_cut_after_any_event() {
        let dir = tempfile::tempdir().unwrap();
        let full = dir.path().join("full");
        let evt = write_nested_events(&full, 40_000, 7);
        let killed = dir.path().join("killed.evt");
        killed_copy(&evt, &killed, 4, 0);
        let ended = dir.path().join("ended.evt");
        let kept = end_written_file(&killed, &ended, CHUNK).unwrap();
        assert_eq!(kept.unreadable_chunks, 0);

        // The number of each chunk's first event.
        let bytes = std::fs::read(&ended).unwrap();
        let firsts: Vec<u64> = bytes
            .chunks(CHUNK as usize)
            .map(|c| read_u64(c, FIRST_EVENT_AT, false).unwrap())
            .collect();
        assert_eq!(firsts.len(), 4);
        assert_eq!(firsts[0], 1);
        for keep in [kept.events - 1, kept.events / 4 * 4, 10_001, 1] {
            let cut = dir.path().join(format!("cut-{keep}.evt"));
            std::fs::copy(&ended, &cut).unwrap();
            keep_first_events(&cut, CHUNK, keep).unwrap();
            let anchor = archive_with(&full, &dir.path().join(format!("read-{keep}")), &cut);
            let found = scan(&anchor);
            assert_eq!(found.events, keep);
            assert_eq!(found.balanced, keep / 4 * 4);
            // Whole chunks up to the one with the last kept event.
            let chunks = firsts.iter().filter(|&&first| first <= keep).count() as u64;
            assert_eq!(std::fs::metadata(&cut).unwrap().len(), chunks * CHUNK);
        }
        assert!(keep_first_events(&ended, CHUNK, kept.events + 1).is_err());
    }

    #[test]
    fn an_unreadable_last_chunk_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let full = dir.path().join("full");
        let evt = write_nested_events(&full, 40_000, 0);
        let killed = dir.path().join("killed.evt");
        killed_copy(&evt, &killed, 3, 0);
        let two = dir.path().join("two.evt");
        killed_copy(&evt, &two, 2, 0);
        let in_two = end_written_file(&two, &dir.path().join("two-ended.evt"), CHUNK).unwrap();

        // A record kind OTF2 does not have, right after the third chunk's header.
        let mut bytes = std::fs::read(&killed).unwrap();
        bytes[2 * CHUNK as usize + HEADER_BYTES] = 7;
        std::fs::write(&killed, &bytes).unwrap();
        let ended = dir.path().join("ended.evt");
        let kept = end_written_file(&killed, &ended, CHUNK).unwrap();
        assert_eq!(kept.unreadable_chunks, 1);
        assert_eq!(kept.events, in_two.events);
        let anchor = archive_with(&full, &dir.path().join("read"), &ended);
        assert_eq!(scan(&anchor).events, in_two.events);

        // Less than a chunk header: nothing to keep.
        let short = dir.path().join("short.evt");
        killed_copy(&evt, &short, 0, 10);
        let nothing = end_written_file(&short, &dir.path().join("none.evt"), CHUNK).unwrap();
        assert_eq!((nothing.events, nothing.unreadable_chunks), (0, 1));
        assert!(!dir.path().join("none.evt").exists());
    }
}
