//! The streaming writer of Chrome's trace-event JSON ("JSON Object Format"): one event per
//! line, written as it comes, with timestamps in microseconds that keep nanoseconds as
//! three decimals. Nothing of the trace is held here but the output buffer.

use std::io::{self, Write};

/// A writer that counts the bytes that went through it.
pub struct Counting<W> {
    inner: W,
    pub bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A string as a JSON string literal, quotes included.
pub fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// The trace-event document being written: `{"displayTimeUnit":"ns","traceEvents":[`,
/// then the events, then `],"otherData":{…}}` by [`TraceJson::finish`].
pub struct TraceJson<W: Write> {
    out: Counting<io::BufWriter<W>>,
    first: bool,
    /// "B" and "E" events written.
    pub slice_events: u64,
    /// "s" and "f" events written.
    pub flow_events: u64,
    /// "M" events written.
    pub metadata_events: u64,
}

/// Where an event goes: Chrome's process and thread ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Track {
    pub pid: u32,
    pub tid: u32,
}

impl<W: Write> TraceJson<W> {
    pub fn start(out: W) -> io::Result<TraceJson<W>> {
        let mut out = Counting {
            inner: io::BufWriter::with_capacity(1 << 20, out),
            bytes: 0,
        };
        out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
        Ok(TraceJson {
            out,
            first: true,
            slice_events: 0,
            flow_events: 0,
            metadata_events: 0,
        })
    }

    fn separator(&mut self) -> io::Result<()> {
        let separator: &[u8] = if self.first { b"\n" } else { b",\n" };
        self.first = false;
        self.out.write_all(separator)
    }

    /// A metadata event naming a process (`tid` 0) or a thread.
    pub fn name(&mut self, what: &str, track: Track, name: &str) -> io::Result<()> {
        self.separator()?;
        self.metadata_events += 1;
        write!(
            self.out,
            "{{\"ph\":\"M\",\"name\":\"{what}\",\"ts\":0,\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}}",
            track.pid,
            track.tid,
            quoted(name)
        )
    }

    /// A metadata event placing a process (`tid` 0) or a thread among its peers.
    pub fn sort_index(&mut self, what: &str, track: Track, index: u32) -> io::Result<()> {
        self.separator()?;
        self.metadata_events += 1;
        write!(
            self.out,
            "{{\"ph\":\"M\",\"name\":\"{what}\",\"ts\":0,\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{index}}}}}",
            track.pid, track.tid
        )
    }

    /// A "B" event; `name` and `cat` are JSON literals, `args` the members of the args
    /// object (`"key":value,…`).
    pub fn begin(
        &mut self,
        name: &str,
        cat: &str,
        ts_ns: i64,
        track: Track,
        args: &str,
    ) -> io::Result<()> {
        self.separator()?;
        self.slice_events += 1;
        write!(
            self.out,
            "{{\"ph\":\"B\",\"name\":{name},\"cat\":{cat},\"ts\":"
        )?;
        write_us(&mut self.out, ts_ns)?;
        write!(
            self.out,
            ",\"pid\":{},\"tid\":{},\"args\":{{",
            track.pid, track.tid
        )?;
        self.out.write_all(args.as_bytes())?;
        self.out.write_all(b"}}")
    }

    /// An "E" event; `name` is a JSON literal.
    pub fn end(&mut self, name: &str, ts_ns: i64, track: Track) -> io::Result<()> {
        self.separator()?;
        self.slice_events += 1;
        write!(self.out, "{{\"ph\":\"E\",\"name\":{name},\"ts\":")?;
        write_us(&mut self.out, ts_ns)?;
        write!(self.out, ",\"pid\":{},\"tid\":{}}}", track.pid, track.tid)
    }

    /// A flow's start ("s") or end ("f", bound to the enclosing slice); `name` and `cat`
    /// are JSON literals.
    pub fn flow(
        &mut self,
        start: bool,
        name: &str,
        cat: &str,
        id: u64,
        ts_ns: i64,
        track: Track,
    ) -> io::Result<()> {
        self.separator()?;
        self.flow_events += 1;
        let (ph, bind) = if start {
            ("s", "")
        } else {
            ("f", ",\"bp\":\"e\"")
        };
        write!(
            self.out,
            "{{\"ph\":\"{ph}\",\"name\":{name},\"cat\":{cat},\"id\":{id}{bind},\"ts\":"
        )?;
        write_us(&mut self.out, ts_ns)?;
        write!(self.out, ",\"pid\":{},\"tid\":{}}}", track.pid, track.tid)
    }

    /// Closes the event list, adds `otherData` and flushes; returns the bytes written.
    pub fn finish(mut self, other_data: &serde_json::Value) -> io::Result<u64> {
        self.out.write_all(b"\n],\"otherData\":")?;
        serde_json::to_writer(&mut self.out, other_data)?;
        self.out.write_all(b"}\n")?;
        self.out.flush()?;
        Ok(self.out.bytes)
    }
}

/// Nanoseconds as microseconds with three decimals (exact: no floating point).
pub fn write_us(out: &mut dyn Write, ns: i64) -> io::Result<()> {
    let sign = if ns < 0 { "-" } else { "" };
    let abs = ns.unsigned_abs();
    write!(out, "{sign}{}.{:03}", abs / 1000, abs % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(ns: i64) -> String {
        let mut out = Vec::new();
        write_us(&mut out, ns).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn microseconds_keep_every_nanosecond() {
        assert_eq!(us(0), "0.000");
        assert_eq!(us(1), "0.001");
        assert_eq!(us(1_234_567), "1234.567");
        assert_eq!(us(-1_500), "-1.500");
        assert_eq!(us(i64::MAX), "9223372036854775.807");
    }

    #[test]
    fn the_document_is_json_with_every_event() {
        let mut buffer = Vec::new();
        let mut json = TraceJson::start(&mut buffer).unwrap();
        let track = Track { pid: 1, tid: 2 };
        json.name("thread_name", track, "a \"quoted\" name")
            .unwrap();
        json.begin("\"op\"", "\"ops\"", 1_001, track, "\"bytes\":8")
            .unwrap();
        json.flow(true, "\"send\"", "\"p2p\"", 7, 1_002, track)
            .unwrap();
        json.end("\"op\"", 2_000, track).unwrap();
        let bytes = json.finish(&serde_json::json!({"k": 1})).unwrap();
        assert_eq!(bytes, buffer.len() as u64);
        let document: serde_json::Value = serde_json::from_slice(&buffer).unwrap();
        let events = document["traceEvents"].as_array().unwrap();
        assert_eq!(events.len(), 4);
        assert_eq!(events[0]["args"]["name"], "a \"quoted\" name");
        assert_eq!(events[1]["ts"].as_f64(), Some(1.001));
        assert_eq!(events[1]["args"]["bytes"], 8);
        assert_eq!(events[2]["ph"], "s");
        assert_eq!(events[2]["id"], 7);
        assert_eq!(events[3]["ph"], "E");
        assert_eq!(document["displayTimeUnit"], "ns");
        assert_eq!(document["otherData"]["k"], 1);
    }
}
