//! Byte layouts of a metric's index and data files.
//!
//! Index file (`<metric file id>.index`), every number little-endian:
//!
//! | bytes | content |
//! | --- | --- |
//! | 11 | the marker `CUBEX.INDEX` |
//! | 4 | `1` as a 32-bit integer: readers take the byte order of this file and of the data file from it |
//! | 2 | format version `0` |
//! | 1 | index format: `1` sparse (`3` would be dense, which has no list below) |
//! | 4 | number of rows `n` |
//! | 4 × n | the rows' call-tree numbers, ascending |
//!
//! Data file (`<metric file id>.data`): the marker `CUBEX.DATA` (10 bytes), then for each
//! row of the index, in the index's order, one value per location in location-id order
//! (8 bytes each: IEEE 754 double or unsigned 64-bit integer).
//!
//! A row's call-tree number is the position of the call-tree node in Cube's enumeration
//! of the call tree for the metric's kind (see `Dimensions::row_id`). The index is sparse
//! because pycubexr reads only sparse indexes, and because it lets rows without values stay
//! out of the file.

/// The marker at the start of an index file.
pub const INDEX_MARKER: &[u8] = b"CUBEX.INDEX";
/// The marker at the start of a data file.
pub const DATA_MARKER: &[u8] = b"CUBEX.DATA";
/// Index format number of a sparse index.
pub const INDEX_FORMAT_SPARSE: u8 = 1;
/// Version number of the index header.
pub const INDEX_VERSION: u16 = 0;

/// Bytes of an index file listing `rows` (ascending call-tree numbers).
pub fn index_file(rows: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(INDEX_MARKER.len() + 7 + 4 + 4 * rows.len());
    out.extend_from_slice(INDEX_MARKER);
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&INDEX_VERSION.to_le_bytes());
    out.push(INDEX_FORMAT_SPARSE);
    out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    for &r in rows {
        out.extend_from_slice(&r.to_le_bytes());
    }
    out
}

/// Size in bytes of an index file of `rows` rows.
pub fn index_file_len(rows: usize) -> u64 {
    (INDEX_MARKER.len() + 7 + 4) as u64 + 4 * rows as u64
}

/// Size in bytes of a data file of `rows` rows of `locations` values.
pub fn data_file_len(rows: usize, locations: usize) -> u64 {
    DATA_MARKER.len() as u64 + 8 * rows as u64 * locations as u64
}

/// Appends the bytes of one data row: each value as 8 little-endian bytes (`values` hold the
/// bit patterns, see `Value::to_bits`).
pub fn push_row(out: &mut Vec<u8>, values: impl Iterator<Item = u64>) {
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_file_bytes() {
        let bytes = index_file(&[0, 2, 258]);
        let mut want = b"CUBEX.INDEX".to_vec();
        want.extend_from_slice(&[1, 0, 0, 0]); // byte-order marker
        want.extend_from_slice(&[0, 0]); // version
        want.push(1); // sparse
        want.extend_from_slice(&[3, 0, 0, 0]); // three rows
        want.extend_from_slice(&[0, 0, 0, 0, 2, 0, 0, 0, 2, 1, 0, 0]);
        assert_eq!(bytes, want);
        assert_eq!(bytes.len() as u64, index_file_len(3));
    }

    #[test]
    fn data_row_bytes() {
        let mut out = DATA_MARKER.to_vec();
        push_row(&mut out, [1.5f64.to_bits(), 7u64].into_iter());
        let mut want = b"CUBEX.DATA".to_vec();
        want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0xf8, 0x3f]); // 1.5
        want.extend_from_slice(&[7, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(out, want);
        assert_eq!(out.len() as u64, data_file_len(1, 2));
    }

    /// CubeLib's tar reader expects one more padding block after a member whose size is a
    /// multiple of 512, which other tar readers take for the end of the archive. Index and
    /// data files never have such a size, whatever their number of rows and locations.
    #[test]
    fn index_and_data_sizes_are_never_multiples_of_512() {
        for rows in 0..2048 {
            assert_ne!(index_file_len(rows) % 512, 0, "index of {rows} rows");
            for locations in 1..64 {
                assert_ne!(data_file_len(rows, locations) % 512, 0);
            }
        }
        // The argument in general: 22 + 4n and 10 + 8k are both ≡ 2 (mod 4).
        assert_eq!(index_file_len(0) % 4, 2);
        assert_eq!(data_file_len(0, 1) % 4, 2);
    }
}
