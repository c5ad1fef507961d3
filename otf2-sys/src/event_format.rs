//! The layout of an OTF2 3.x event file, as OTF2 writes it (`OTF2_Buffer.h` and the event
//! writer): what the plugin's own event-file encoder writes and what the merge reads when
//! it ends a killed process's event files. OTF2 exports none of these values.
//!
//! - The file is a sequence of chunks of the archive's event chunk size. A chunk starts
//!   with a header: [`CHUNK_HEADER`], the writer's byte order ([`LITTLE_ENDIAN`] or
//!   [`BIG_ENDIAN`]), the number of its first event (8 bytes at [`FIRST_EVENT_AT`]) and of
//!   its last one (8 bytes at [`LAST_EVENT_AT`]); [`HEADER_BYTES`] in all. Events are
//!   numbered from 1 in a file.
//! - Records follow; the chunk is padded with [`END_OF_CHUNK`] bytes to its end.
//! - A [`TIMESTAMP`] record (8 bytes) precedes an event whose time is newer than the
//!   previous record's, and begins every chunk.
//! - An [`ATTRIBUTE_LIST`] (length, count, then per attribute its id, type and value)
//!   precedes the event it belongs to.
//! - Event records (kinds from [`FIRST_EVENT_KIND`]) carry a length and their fields, but
//!   Enter and Leave: their one field, a compressed integer, is a byte count followed by
//!   that many bytes, which reads like a length and data. MpiCollectiveBegin has length 0.
//! - A length is one byte, or [`LONG_LENGTH`] and 8 bytes for 255 bytes and more. OTF2
//!   writes an attribute list of 17 attributes or more with the long form whatever its
//!   length: it sizes the field by the most the list could take (15 bytes an attribute).
//!   Compressed integers: 0 and the all-ones value as one byte (0, 0xff), others as a byte
//!   count and that many little-endian bytes.
//! - A finished file ends with [`END_OF_FILE`] and [`END_OF_BUFFER`] after its last record.

pub const END_OF_CHUNK: u8 = 0;
pub const END_OF_BUFFER: u8 = 1;
pub const END_OF_FILE: u8 = 2;
pub const CHUNK_HEADER: u8 = 3;
pub const TIMESTAMP: u8 = 5;
pub const ATTRIBUTE_LIST: u8 = 6;
/// Record kinds from this one up are events (OTF2 keeps 0–9 for its own records).
pub const FIRST_EVENT_KIND: u8 = 10;
pub const ENTER: u8 = 12;
pub const LEAVE: u8 = 13;
pub const MPI_SEND: u8 = 14;
pub const MPI_RECV: u8 = 18;
pub const MPI_COLLECTIVE_BEGIN: u8 = 22;
pub const MPI_COLLECTIVE_END: u8 = 23;

pub const LITTLE_ENDIAN: u8 = 0x42;
pub const BIG_ENDIAN: u8 = 0x23;
pub const HEADER_BYTES: usize = 18;
pub const FIRST_EVENT_AT: usize = 2;
pub const LAST_EVENT_AT: usize = 10;
/// A length byte of this value says that the length follows in 8 bytes.
pub const LONG_LENGTH: u8 = u8::MAX;

/// The byte order mark of this machine.
#[cfg(target_endian = "little")]
pub const HOST_BYTE_ORDER: u8 = LITTLE_ENDIAN;
#[cfg(target_endian = "big")]
pub const HOST_BYTE_ORDER: u8 = BIG_ENDIAN;

/// A chunk header in this machine's byte order, numbering the chunk's first event
/// `first_event` and its last one `last_event`.
pub fn chunk_header(first_event: u64, last_event: u64) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[0] = CHUNK_HEADER;
    header[1] = HOST_BYTE_ORDER;
    header[FIRST_EVENT_AT..LAST_EVENT_AT].copy_from_slice(&first_event.to_ne_bytes());
    header[LAST_EVENT_AT..].copy_from_slice(&last_event.to_ne_bytes());
    header
}

/// The whole event file of a location without events.
pub fn empty_event_file() -> Vec<u8> {
    let mut file = chunk_header(1, 0).to_vec();
    file.extend_from_slice(&[END_OF_FILE, END_OF_BUFFER]);
    file
}
