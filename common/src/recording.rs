//! The recording format of `NCCL_SCOREP_MODE=record`: every profiler call NCCL made in
//! one process, as NCCL made it, for `nccl-sim replay` (layout in docs/record.md).
//!
//! A file is a header followed by entries, all little-endian. Each entry starts with a
//! one-byte tag; the file ends with an [`Entry::End`] entry when the process finished
//! writing it (a file without one was cut short, e.g. by a crash).

use std::io::{self, Read};
use std::path::Path;

/// The first eight bytes of a recording.
pub const MAGIC: &[u8; 8] = b"NCCLREC\0";
/// The version of the layout this code writes. Version 2 stores a start's descriptor and
/// a state's arguments as *sparse* bytes (only their words that are not zero); version 1,
/// which this code also reads, stored them whole.
pub const FORMAT_VERSION: u16 = 2;
/// The oldest version this code reads.
pub const OLDEST_FORMAT_VERSION: u16 = 1;
/// The directory, in the run directory, that holds the recordings.
pub const DIR: &str = "recordings";
/// The file-name suffix of a recording.
pub const SUFFIX: &str = ".ncclrec";
/// A length that stands for "NULL pointer" (a string or argument pointer NCCL passed as
/// NULL) or "unreadable" (a string without a NUL within the bound).
pub const ABSENT: u16 = u16::MAX;

/// The file of a process's recording in a run directory.
pub fn file_name(host: &str, pid: i32) -> String {
    format!("{host}.{pid}{SUFFIX}")
}

/// What the time stamps of a recording count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockKind {
    /// CLOCK_MONOTONIC nanoseconds.
    Monotonic = 0,
    /// The CPU's time-stamp counter: [`Entry::Clock`] entries relate it to nanoseconds.
    Tsc = 1,
}

/// The file header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub format: u16,
    /// The profiler API version NCCL called (the table it picked).
    pub api: u8,
    pub clock: ClockKind,
    pub pid: i32,
    pub host: String,
    /// The real-time clock when the recording began, in ns since the epoch.
    pub realtime_ns: u64,
}

/// One call NCCL made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// `init`: the arguments NCCL passed (v1–v3 pass no communicator facts: zeros) and
    /// what the plugin returned in `*context` and `*eActivationMask`.
    Init {
        context: u64,
        mask: i32,
        comm_id: u64,
        n_nodes: i32,
        n_ranks: i32,
        rank: i32,
        name: Option<Vec<u8>>,
    },
    /// `startEvent`: the context NCCL passed, the handle the plugin returned (0 for
    /// NULL), the descriptor's bytes, and a copy of each string field (by its offset).
    Start {
        context: u64,
        handle: u64,
        descr: Vec<u8>,
        strings: Vec<(u16, Option<Vec<u8>>)>,
    },
    /// `stopEvent` with the handle NCCL passed.
    Stop { handle: u64 },
    /// `recordEventState`: handle, state and the state arguments' bytes (None: NULL).
    State {
        handle: u64,
        state: i32,
        args: Option<Vec<u8>>,
    },
    /// `finalize` with the context NCCL passed.
    Finalize { context: u64 },
}

/// One entry of a recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A call, on the process's `thread`-th thread that called the plugin, at `time`.
    Call { thread: u32, time: u64, call: Call },
    /// A reading of the recording's clock and of CLOCK_MONOTONIC, taken together.
    Clock { ticks: u64, ns: u64 },
    /// So many calls of `thread` could not be recorded (its buffer was full).
    Drops { thread: u32, count: u64 },
    /// The process finished its recording.
    End,
}

mod tag {
    pub const INIT: u8 = 1;
    pub const START: u8 = 2;
    pub const STOP: u8 = 3;
    pub const STATE: u8 = 4;
    pub const FINALIZE: u8 = 5;
    pub const CLOCK: u8 = 6;
    pub const DROPS: u8 = 7;
    pub const END: u8 = 8;
}

/// Appends encoded entries to a byte buffer: the recorder's file buffer, or a call's room
/// in its thread's ring (whose size the `*_len` functions give beforehand).
pub mod encode {
    use super::*;

    /// Where encoded bytes go.
    pub trait Out {
        fn put(&mut self, bytes: &[u8]);
        fn put_byte(&mut self, byte: u8) {
            self.put(&[byte]);
        }
    }

    impl Out for Vec<u8> {
        fn put(&mut self, bytes: &[u8]) {
            self.extend_from_slice(bytes);
        }
        fn put_byte(&mut self, byte: u8) {
            self.push(byte);
        }
    }

    /// A call's tag, thread and time.
    const HEAD_LEN: usize = 1 + 4 + 8;

    /// The encoded length of a *bytes* field.
    const fn bytes_len(len: Option<usize>) -> usize {
        match len {
            Some(len) if len < ABSENT as usize => 2 + len,
            Some(_) => 2 + ABSENT as usize - 1,
            None => 2,
        }
    }

    /// The most bytes a [`Sparse`] field holds (a descriptor or state arguments): its mask
    /// is at most 32 bits.
    pub const SPARSE_MAX: usize = 256;

    /// A *sparse* field of at most `N` bytes, ready to be written: C struct bytes, mostly
    /// zeros (padding, unused union bytes, NULL pointers, zero counts), kept as one mask
    /// bit per 8-byte word (the last word may be shorter; word `i` is bit `i % 8` of mask
    /// byte `i / 8`), set when the word is not all zeros, and those words in order. In the
    /// file: the length (u16, or [`ABSENT`] for NULL), the mask's bytes, the words.
    pub struct Sparse<const N: usize> {
        len: u16,
        /// The length and the mask's bytes, as the file holds them.
        head: [u8; 6],
        words: [u8; N],
        kept: usize,
    }

    impl<const N: usize> Sparse<N> {
        /// Packs `value` (its first `N`, at most [`SPARSE_MAX`], bytes).
        #[inline]
        pub fn of(value: &[u8]) -> Self {
            let value = &value[..value.len().min(N).min(SPARSE_MAX)];
            let mut packed = Sparse {
                len: value.len() as u16,
                head: [0; 6],
                words: [0; N],
                kept: 0,
            };
            let mut mask = 0u32;
            let mut words = value.chunks_exact(8);
            let mut i = 0;
            for word in &mut words {
                if word != [0; 8] {
                    packed.words[packed.kept..packed.kept + 8].copy_from_slice(word);
                    packed.kept += 8;
                    mask |= 1 << i;
                }
                i += 1;
            }
            let last = words.remainder();
            if last.iter().any(|&b| b != 0) {
                packed.words[packed.kept..packed.kept + last.len()].copy_from_slice(last);
                packed.kept += last.len();
                mask |= 1 << i;
            }
            packed.head[..2].copy_from_slice(&packed.len.to_le_bytes());
            packed.head[2..].copy_from_slice(&mask.to_le_bytes());
            packed
        }

        /// The mask's bytes in the file: one per 8 words.
        fn mask_len(&self) -> usize {
            (self.len as usize).div_ceil(64)
        }

        /// Its encoded length.
        #[inline]
        pub fn encoded_len(&self) -> usize {
            2 + self.mask_len() + self.kept
        }

        fn put(&self, out: &mut impl Out) {
            out.put(&self.head[..2 + self.mask_len()]);
            out.put(&self.words[..self.kept]);
        }
    }

    /// The longest encoding of a *sparse* field of `len` bytes.
    const fn largest_sparse_len(len: usize) -> usize {
        2 + len.div_ceil(64) + len
    }

    /// The length of [`start`]'s entry, from the descriptor and each string's length.
    #[inline]
    pub fn start_len<const N: usize>(
        descr: &Sparse<N>,
        strings: impl Iterator<Item = Option<usize>>,
    ) -> usize {
        HEAD_LEN
            + 8
            + 8
            + descr.encoded_len()
            + 1
            + strings.map(|s| 2 + bytes_len(s)).sum::<usize>()
    }

    /// The longest [`start`] entry for a descriptor of at most `descr` bytes and at most
    /// `strings` strings of at most `string` bytes each.
    pub const fn largest_start_len(descr: usize, strings: usize, string: usize) -> usize {
        HEAD_LEN + 8 + 8 + largest_sparse_len(descr) + 1 + strings * (2 + bytes_len(Some(string)))
    }

    /// The length of [`stop`]'s entry.
    pub const fn stop_len() -> usize {
        HEAD_LEN + 8
    }

    /// The length of [`state`]'s entry, from the arguments (None: NULL).
    #[inline]
    pub fn state_len<const N: usize>(args: Option<&Sparse<N>>) -> usize {
        HEAD_LEN + 8 + 4 + args.map_or(2, Sparse::<N>::encoded_len)
    }

    fn bytes(out: &mut impl Out, value: Option<&[u8]>) {
        match value {
            Some(value) => {
                let value = &value[..value.len().min(ABSENT as usize - 1)];
                out.put(&(value.len() as u16).to_le_bytes());
                out.put(value);
            }
            None => out.put(&ABSENT.to_le_bytes()),
        }
    }

    fn sparse<const N: usize>(out: &mut impl Out, value: Option<&Sparse<N>>) {
        match value {
            Some(value) => value.put(out),
            None => out.put(&ABSENT.to_le_bytes()),
        }
    }

    fn call_head(out: &mut impl Out, tag: u8, thread: u32, time: u64) {
        out.put(&call_head_and::<0, HEAD_LEN>(tag, thread, time, []));
    }

    /// A call's tag, thread and time followed by `rest`, as one array: the calls NCCL's
    /// threads record are written with few copies.
    #[inline]
    fn call_head_and<const N: usize, const M: usize>(
        tag: u8,
        thread: u32,
        time: u64,
        rest: [[u8; 8]; N],
    ) -> [u8; M] {
        let mut entry = [0u8; M];
        entry[0] = tag;
        entry[1..5].copy_from_slice(&thread.to_le_bytes());
        entry[5..13].copy_from_slice(&time.to_le_bytes());
        for (i, word) in rest.iter().enumerate() {
            entry[HEAD_LEN + 8 * i..HEAD_LEN + 8 * i + 8].copy_from_slice(word);
        }
        entry
    }

    pub fn header(out: &mut impl Out, header: &Header) {
        out.put(MAGIC);
        out.put(&header.format.to_le_bytes());
        out.put_byte(header.api);
        out.put_byte(header.clock as u8);
        out.put(&header.pid.to_le_bytes());
        out.put(&header.realtime_ns.to_le_bytes());
        bytes(out, Some(header.host.as_bytes()));
    }

    #[allow(clippy::too_many_arguments)]
    pub fn init(
        out: &mut impl Out,
        thread: u32,
        time: u64,
        context: u64,
        mask: i32,
        comm_id: u64,
        n_nodes: i32,
        n_ranks: i32,
        rank: i32,
        name: Option<&[u8]>,
    ) {
        call_head(out, tag::INIT, thread, time);
        out.put(&context.to_le_bytes());
        out.put(&mask.to_le_bytes());
        out.put(&comm_id.to_le_bytes());
        for value in [n_nodes, n_ranks, rank] {
            out.put(&value.to_le_bytes());
        }
        bytes(out, name);
    }

    pub fn start<'a, const N: usize>(
        out: &mut impl Out,
        thread: u32,
        time: u64,
        context: u64,
        handle: u64,
        descr: &Sparse<N>,
        strings: impl ExactSizeIterator<Item = (u16, Option<&'a [u8]>)>,
    ) {
        let (context, handle) = (context.to_le_bytes(), handle.to_le_bytes());
        out.put(&call_head_and::<2, { HEAD_LEN + 16 }>(
            tag::START,
            thread,
            time,
            [context, handle],
        ));
        sparse(out, Some(descr));
        out.put_byte(strings.len() as u8);
        for (offset, value) in strings {
            out.put(&offset.to_le_bytes());
            bytes(out, value);
        }
    }

    pub fn stop(out: &mut impl Out, thread: u32, time: u64, handle: u64) {
        let handle = handle.to_le_bytes();
        out.put(&call_head_and::<1, { HEAD_LEN + 8 }>(
            tag::STOP,
            thread,
            time,
            [handle],
        ));
    }

    pub fn state<const N: usize>(
        out: &mut impl Out,
        thread: u32,
        time: u64,
        handle: u64,
        state: i32,
        args: Option<&Sparse<N>>,
    ) {
        let handle = handle.to_le_bytes();
        let mut head = call_head_and::<1, { HEAD_LEN + 12 }>(tag::STATE, thread, time, [handle]);
        head[HEAD_LEN + 8..].copy_from_slice(&state.to_le_bytes());
        out.put(&head);
        sparse(out, args);
    }

    pub fn finalize(out: &mut impl Out, thread: u32, time: u64, context: u64) {
        call_head(out, tag::FINALIZE, thread, time);
        out.put(&context.to_le_bytes());
    }

    pub fn clock(out: &mut impl Out, ticks: u64, ns: u64) {
        out.put_byte(tag::CLOCK);
        out.put(&ticks.to_le_bytes());
        out.put(&ns.to_le_bytes());
    }

    pub fn drops(out: &mut impl Out, thread: u32, count: u64) {
        out.put_byte(tag::DROPS);
        out.put(&thread.to_le_bytes());
        out.put(&count.to_le_bytes());
    }

    pub fn end(out: &mut impl Out) {
        out.put_byte(tag::END);
    }
}

/// Why a recording cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read it: {0}")]
    Io(#[from] io::Error),
    #[error("not a recording (no NCCLREC magic)")]
    NotARecording,
    #[error("recording format {0}, this build reads formats {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}")]
    Format(u16),
    #[error("damaged at byte {0}: {1}")]
    Damaged(usize, &'static str),
}

/// A whole recording, read.
#[derive(Clone, Debug)]
pub struct Recording {
    pub header: Header,
    pub entries: Vec<Entry>,
    /// Whether the file ended with [`Entry::End`] (else it was cut short).
    pub complete: bool,
}

impl Recording {
    /// Reads a recording file, gzip-compressed when its name ends in `.gz`.
    pub fn read_file(path: &Path) -> Result<Recording, ReadError> {
        let file = std::fs::File::open(path)?;
        let mut data = Vec::new();
        if path.extension().is_some_and(|e| e == "gz") {
            flate2::read::MultiGzDecoder::new(file).read_to_end(&mut data)?;
        } else {
            io::BufReader::new(file).read_to_end(&mut data)?;
        }
        Recording::parse(&data)
    }

    /// Parses a recording's bytes. A last entry cut short is left out.
    pub fn parse(data: &[u8]) -> Result<Recording, ReadError> {
        let mut cursor = Cursor {
            data,
            at: 0,
            format: FORMAT_VERSION,
        };
        if cursor.take(8).ok() != Some(&MAGIC[..]) {
            return Err(ReadError::NotARecording);
        }
        let format = cursor.u16()?;
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&format) {
            return Err(ReadError::Format(format));
        }
        cursor.format = format;
        let api = cursor.u8()?;
        let clock = match cursor.u8()? {
            0 => ClockKind::Monotonic,
            1 => ClockKind::Tsc,
            _ => return Err(ReadError::Damaged(cursor.at, "unknown clock")),
        };
        let pid = cursor.i32()?;
        let realtime_ns = cursor.u64()?;
        let host = String::from_utf8_lossy(&cursor.bytes()?.unwrap_or_default()).into_owned();
        let header = Header {
            format,
            api,
            clock,
            pid,
            host,
            realtime_ns,
        };
        let mut entries = Vec::new();
        let mut complete = false;
        while cursor.at < data.len() {
            match cursor.entry() {
                Ok(Entry::End) => {
                    complete = true;
                    break;
                }
                Ok(entry) => entries.push(entry),
                // A writer killed mid-entry leaves a partial last entry.
                Err(ReadError::Damaged(_, "cut short")) => break,
                Err(error) => return Err(error),
            }
        }
        Ok(Recording {
            header,
            entries,
            complete,
        })
    }

    /// The calls, in file order (which is each thread's call order).
    pub fn calls(&self) -> impl Iterator<Item = (u32, u64, &Call)> {
        self.entries.iter().filter_map(|entry| match entry {
            Entry::Call { thread, time, call } => Some((*thread, *time, call)),
            _ => None,
        })
    }

    /// The calls that could not be recorded, all threads together.
    pub fn drops(&self) -> u64 {
        self.entries
            .iter()
            .map(|entry| match entry {
                Entry::Drops { count, .. } => *count,
                _ => 0,
            })
            .sum()
    }

    /// The recorded process's CLOCK_REALTIME minus its CLOCK_MONOTONIC: the header's
    /// real time against the first clock reading, taken with it (0 without one).
    pub fn realtime_offset_ns(&self) -> i64 {
        self.entries
            .iter()
            .find_map(|entry| match entry {
                Entry::Clock { ns, .. } => Some(self.header.realtime_ns as i64 - *ns as i64),
                _ => None,
            })
            .unwrap_or(0)
    }

    /// A function from the recording's time stamps to CLOCK_MONOTONIC nanoseconds.
    pub fn to_ns(&self) -> impl Fn(u64) -> u64 {
        let clocks: Vec<(u64, u64)> = self
            .entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Clock { ticks, ns } => Some((*ticks, *ns)),
                _ => None,
            })
            .collect();
        let tsc = self.header.clock == ClockKind::Tsc;
        let first = clocks.first().copied().unwrap_or((0, 0));
        let last = clocks.last().copied().unwrap_or((1, 1));
        let rate = if tsc && last.0 > first.0 {
            (last.1 - first.1) as f64 / (last.0 - first.0) as f64
        } else {
            1.0
        };
        move |ticks| {
            if tsc {
                (first.1 as f64 + (ticks as f64 - first.0 as f64) * rate).max(0.0) as u64
            } else {
                ticks
            }
        }
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
    /// The file's format version.
    format: u16,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.data.len())
            .ok_or(ReadError::Damaged(self.at, "cut short"))?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ReadError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, ReadError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, ReadError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, ReadError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, ReadError> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, ReadError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn bytes(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        let len = self.u16()?;
        if len == ABSENT {
            return Ok(None);
        }
        Ok(Some(self.take(len as usize)?.to_vec()))
    }

    /// A *sparse* field (see `encode::sparse`), or in format 1 a *bytes* field.
    fn sparse(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        if self.format < 2 {
            return self.bytes();
        }
        let len = self.u16()?;
        if len == ABSENT {
            return Ok(None);
        }
        let len = len as usize;
        let mask = self.take(len.div_ceil(64))?;
        let mut value = vec![0u8; len];
        for (i, word) in value.chunks_mut(8).enumerate() {
            if mask[i / 8] & (1 << (i % 8)) != 0 {
                word.copy_from_slice(self.take(word.len())?);
            }
        }
        Ok(Some(value))
    }

    fn entry(&mut self) -> Result<Entry, ReadError> {
        let tag = self.u8()?;
        let call = |this: &mut Self, call: fn(&mut Self) -> Result<Call, ReadError>| {
            let thread = this.u32()?;
            let time = this.u64()?;
            Ok(Entry::Call {
                thread,
                time,
                call: call(this)?,
            })
        };
        match tag {
            tag::INIT => call(self, |c| {
                Ok(Call::Init {
                    context: c.u64()?,
                    mask: c.i32()?,
                    comm_id: c.u64()?,
                    n_nodes: c.i32()?,
                    n_ranks: c.i32()?,
                    rank: c.i32()?,
                    name: c.bytes()?,
                })
            }),
            tag::START => call(self, |c| {
                let context = c.u64()?;
                let handle = c.u64()?;
                let descr = c.sparse()?.unwrap_or_default();
                let n = c.u8()?;
                let mut strings = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    strings.push((c.u16()?, c.bytes()?));
                }
                Ok(Call::Start {
                    context,
                    handle,
                    descr,
                    strings,
                })
            }),
            tag::STOP => call(self, |c| Ok(Call::Stop { handle: c.u64()? })),
            tag::STATE => call(self, |c| {
                Ok(Call::State {
                    handle: c.u64()?,
                    state: c.i32()?,
                    args: c.sparse()?,
                })
            }),
            tag::FINALIZE => call(self, |c| Ok(Call::Finalize { context: c.u64()? })),
            tag::CLOCK => Ok(Entry::Clock {
                ticks: self.u64()?,
                ns: self.u64()?,
            }),
            tag::DROPS => Ok(Entry::Drops {
                thread: self.u32()?,
                count: self.u64()?,
            }),
            tag::END => Ok(Entry::End),
            _ => Err(ReadError::Damaged(self.at - 1, "unknown entry tag")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_reads_back_as_written_and_a_cut_file_keeps_its_whole_entries() {
        let header = Header {
            format: FORMAT_VERSION,
            api: 7,
            clock: ClockKind::Tsc,
            pid: 4242,
            host: "node0".into(),
            realtime_ns: 17,
        };
        let mut out = Vec::new();
        encode::header(&mut out, &header);
        encode::clock(&mut out, 1000, 500);
        encode::init(
            &mut out,
            0,
            1001,
            0xc0,
            0x7f,
            0xabc,
            1,
            2,
            1,
            Some(b"world"),
        );
        // Words of zeros among others, and a short last word.
        let mut descr = [0u8; 131];
        descr[..16].fill(9);
        descr[40] = 1;
        descr[130] = 2;
        let strings = [(32u16, Some(&b"AllReduce"[..])), (40, None)];
        let packed = encode::Sparse::<136>::of(&descr);
        encode::start(&mut out, 1, 1002, 0xc0, 0x11, &packed, strings.into_iter());
        encode::state::<16>(&mut out, 1, 1003, 0x11, 21, None);
        let args = encode::Sparse::<16>::of(&[0, 0, 0, 0, 0, 0, 0, 0, 5]);
        encode::state(&mut out, 1, 1003, 0x11, 22, Some(&args));
        encode::stop(&mut out, 1, 1004, 0x11);
        encode::drops(&mut out, 1, 3);
        encode::finalize(&mut out, 0, 1005, 0xc0);
        encode::clock(&mut out, 3000, 1500);
        let before_end = out.len();
        encode::end(&mut out);

        let read = Recording::parse(&out).unwrap();
        assert_eq!(read.header, header);
        assert!(read.complete);
        assert_eq!(read.calls().count(), 6);
        assert_eq!(read.drops(), 3);
        assert_eq!(
            read.calls().nth(1).unwrap().2,
            &Call::Start {
                context: 0xc0,
                handle: 0x11,
                descr: descr.to_vec(),
                strings: vec![(32, Some(b"AllReduce".to_vec())), (40, None)],
            }
        );
        assert_eq!(
            read.calls().nth(3).unwrap().2,
            &Call::State {
                handle: 0x11,
                state: 22,
                args: Some(vec![0, 0, 0, 0, 0, 0, 0, 0, 5]),
            }
        );
        // TSC ticks to ns: 2 ticks a nanosecond from the two clock entries.
        assert_eq!(read.to_ns()(2000), 1000);

        let cut = Recording::parse(&out[..before_end - 17 - 3]).unwrap();
        assert!(!cut.complete);
        assert_eq!(cut.calls().count(), 5, "the cut finalize is left out");
        assert!(matches!(
            Recording::parse(b"NOTAREC!"),
            Err(ReadError::NotARecording)
        ));
    }

    #[test]
    fn a_format_1_recording_with_whole_descriptors_still_reads() {
        let mut out = Vec::new();
        let header = Header {
            format: 1,
            api: 4,
            clock: ClockKind::Monotonic,
            pid: 7,
            host: "old".into(),
            realtime_ns: 1,
        };
        encode::header(&mut out, &header);
        // A start and a state as format 1 wrote them: their bytes whole.
        out.push(2);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&9u64.to_le_bytes());
        out.extend_from_slice(&0xc0u64.to_le_bytes());
        out.extend_from_slice(&0x11u64.to_le_bytes());
        out.extend_from_slice(&10u16.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 4, 0]);
        out.push(0);
        out.push(4);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&10u64.to_le_bytes());
        out.extend_from_slice(&0x11u64.to_le_bytes());
        out.extend_from_slice(&13i32.to_le_bytes());
        out.extend_from_slice(&2u16.to_le_bytes());
        out.extend_from_slice(&[0, 6]);
        let read = Recording::parse(&out).unwrap();
        assert_eq!(read.header, header);
        let calls: Vec<&Call> = read.calls().map(|(_, _, call)| call).collect();
        assert_eq!(
            calls,
            [
                &Call::Start {
                    context: 0xc0,
                    handle: 0x11,
                    descr: vec![0, 0, 0, 0, 0, 0, 0, 0, 4, 0],
                    strings: vec![],
                },
                &Call::State {
                    handle: 0x11,
                    state: 13,
                    args: Some(vec![0, 6]),
                }
            ]
        );
        out[8] = 3;
        assert!(matches!(Recording::parse(&out), Err(ReadError::Format(3))));
    }

    #[test]
    fn each_call_entry_is_as_long_as_its_length_says() {
        let length_of = |encode: &dyn Fn(&mut Vec<u8>)| {
            let mut out = Vec::new();
            encode(&mut out);
            out.len()
        };
        let mut bytes = [7u8; 136];
        bytes[8..64].fill(0);
        let descr = encode::Sparse::<136>::of(&bytes);
        let full = encode::Sparse::<136>::of(&[1; 136]);
        let long = [b'x'; 70_000];
        let strings = [
            Some(&b"AllReduce"[..]),
            None,
            Some(&long[..]),
            Some(&b""[..]),
        ];
        let with_offsets = || strings.iter().map(|s| (24u16, *s));
        assert_eq!(
            length_of(&|out| encode::start(out, 3, 9, 1, 2, &descr, with_offsets())),
            encode::start_len(&descr, strings.iter().map(|s| s.map(<[u8]>::len)))
        );
        assert_eq!(
            length_of(&|out| encode::start(out, 3, 9, 1, 2, &descr, std::iter::empty())),
            encode::start_len(&descr, std::iter::empty())
        );
        assert_eq!(
            length_of(&|out| encode::stop(out, 3, 9, 2)),
            encode::stop_len()
        );
        for args in [
            None,
            Some(&[1u8; 8][..]),
            Some(&[1u8; 16][..]),
            Some(&[0u8; 16][..]),
            Some(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 3][..]),
        ] {
            let args = args.map(encode::Sparse::<16>::of);
            assert_eq!(
                length_of(&|out| encode::state(out, 3, 9, 2, 13, args.as_ref())),
                encode::state_len(args.as_ref())
            );
        }
        let largest = [Some(&[b'y'; 63][..]); 5];
        assert_eq!(
            encode::start_len(&full, largest.iter().map(|s| s.map(<[u8]>::len))),
            encode::largest_start_len(136, 5, 63)
        );
        // The 7 words of zeros are left out; both have 3 mask bytes for their 17 words.
        assert_eq!(
            encode::start_len(&descr, std::iter::empty()) + 7 * 8,
            encode::start_len(&full, std::iter::empty())
        );
    }
}
