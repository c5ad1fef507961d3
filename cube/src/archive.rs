//! The `.cubex` archive: a tar file holding `anchor.xml` and, per metric, its index and
//! data files, written atomically.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::CubeError;
use crate::format;
use crate::model::MetricId;
use crate::xml::anchor_xml;
use crate::Cube;

/// The largest member a ustar header can describe (11 octal digits). CubeLib reads larger
/// members only through PAX headers, which this writer does not produce.
const MAX_MEMBER_SIZE: u64 = 0o77_777_777_777;

const BLOCK: usize = 512;

fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    name: &str,
    bytes: &[u8],
    mtime: u64,
) -> Result<(), CubeError> {
    // CubeLib's tar reader skips one block too many after a member whose size is a multiple
    // of 512 (and CubeW pads such members with an extra block to match), while standard tar
    // readers would take that extra block for the end of the archive. So no member may have
    // such a size: anchor.xml is padded with a line break, and index and data files never
    // have one (see format.rs).
    debug_assert!(bytes.is_empty() || bytes.len() % BLOCK != 0, "{name}");
    let mut header = tar::Header::new_ustar();
    header.set_path(name).map_err(CubeError::Write)?;
    header.set_size(bytes.len() as u64);
    header.set_mode(0o644);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(mtime);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    tar.append(&header, bytes).map_err(CubeError::Write)
}

fn check_size(what: &str, size: u64) -> Result<(), CubeError> {
    if size > MAX_MEMBER_SIZE {
        return Err(CubeError::TooLarge(format!("{what} ({size} bytes)")));
    }
    Ok(())
}

/// The size of a metric's data file of `rows` rows, if the format can hold it.
pub(crate) fn check_data_size(
    metric: &str,
    rows: usize,
    locations: usize,
) -> Result<u64, CubeError> {
    let data_len = format::data_file_len(rows, locations);
    check_size(&format!("the data of metric `{metric}`"), data_len)?;
    Ok(data_len)
}

/// The index and data files of one metric.
pub(crate) fn metric_files(cube: &Cube, metric: MetricId) -> Result<(Vec<u8>, Vec<u8>), CubeError> {
    let dims = cube.dimensions();
    let def = dims.metric(metric).def();
    let kind = def.kind();
    let mut rows: Vec<(u32, Option<&[u64]>)> = cube
        .rows(metric)
        .filter(|(_, row)| {
            !row.iter()
                .all(|&bits| crate::values::bits_are_zero(def.data_type(), bits))
        })
        .map(|(cnode, row)| (dims.row_id(kind, cnode), Some(row)))
        .collect();
    rows.sort_unstable_by_key(|&(row_id, _)| row_id);
    if rows.is_empty() {
        // pycubexr cannot read an index without rows, so a metric without values gets one
        // row of zeros, for the call-tree node numbered 0.
        rows.push((0, None));
    }
    let locations = dims.location_order.len();
    let data_len = check_data_size(def.unique_name(), rows.len(), locations)?;

    let ids: Vec<u32> = rows.iter().map(|&(id, _)| id).collect();
    check_size("an index", format::index_file_len(ids.len()))?;
    let index = format::index_file(&ids);
    let mut data = Vec::with_capacity(data_len as usize);
    data.extend_from_slice(format::DATA_MARKER);
    for (_, row) in &rows {
        format::push_row(
            &mut data,
            dims.location_order
                .iter()
                .map(|l| row.map_or(0, |r| r[l.index()])),
        );
    }
    Ok((index, data))
}

/// Writes the whole archive to `out` and returns it.
pub(crate) fn write_archive<W: Write>(cube: &Cube, out: W) -> Result<W, CubeError> {
    let mtime = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let dims = cube.dimensions();
    let mut tar = tar::Builder::new(out);

    let mut anchor = anchor_xml(dims).into_bytes();
    if anchor.len() % BLOCK == 0 {
        anchor.push(b'\n');
    }
    check_size("anchor.xml", anchor.len() as u64)?;
    append(&mut tar, "anchor.xml", &anchor, mtime)?;
    drop(anchor);

    for (file_id, &metric) in dims.metric_order.iter().enumerate() {
        let (index, data) = metric_files(cube, metric)?;
        append(&mut tar, &format!("{file_id}.index"), &index, mtime)?;
        append(&mut tar, &format!("{file_id}.data"), &data, mtime)?;
    }
    tar.into_inner().map_err(CubeError::Write)
}

/// Removes the temporary file unless it was renamed into place.
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Writes the archive to a temporary file beside `path`, then renames it to `path`, so
/// that `path` is either the old file or the whole new one.
pub(crate) fn write_file(cube: &Cube, path: &Path) -> Result<(), CubeError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let io_err = |source: io::Error| CubeError::Io {
        path: path.to_path_buf(),
        source,
    };
    let name = path.file_name().ok_or_else(|| {
        io_err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path names no file",
        ))
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp_name = format!(
        ".{}.{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let mut tmp = TempFile {
        path: dir.join(tmp_name),
        keep: false,
    };
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp.path)
        .map_err(io_err)?;
    let writer =
        write_archive(cube, BufWriter::with_capacity(1 << 20, file)).map_err(|e| match e {
            CubeError::Write(source) => io_err(source),
            other => other,
        })?;
    let file = writer.into_inner().map_err(|e| io_err(e.into_error()))?;
    file.sync_all().map_err(io_err)?;
    drop(file);
    fs::rename(&tmp.path, path).map_err(io_err)?;
    tmp.keep = true;
    // Make the rename itself durable where the platform allows it.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use crate::*;

    struct Small {
        cube: Cube,
        time: MetricId,
        bytes: MetricId,
        visits: MetricId,
        cnodes: [CnodeId; 3],
        /// Defined in this order; written as [l_first_group, l_second, l_third].
        locations: [LocationId; 3],
    }

    fn small() -> Small {
        let mut b = CubeBuilder::new();
        let time = b
            .metric(
                None,
                MetricDef::new(
                    "time",
                    "Time",
                    units::SECONDS,
                    DataType::Double,
                    MetricKind::Exclusive,
                ),
            )
            .unwrap();
        let bytes = b
            .metric(
                None,
                MetricDef::new(
                    "bytes",
                    "Bytes",
                    units::BYTES,
                    DataType::Uint64,
                    MetricKind::Inclusive,
                ),
            )
            .unwrap();
        let visits = b
            .metric(
                None,
                MetricDef::new(
                    "visits",
                    "Visits",
                    units::OCCURRENCES,
                    DataType::Uint64,
                    MetricKind::Exclusive,
                ),
            )
            .unwrap();
        let r = b.region(RegionDef::new("r")).unwrap();
        let root = b.cnode(r, None).unwrap();
        let a = b.cnode(r, Some(root)).unwrap();
        let a1 = b.cnode(r, Some(a)).unwrap();
        let c = b.cnode(r, Some(root)).unwrap();
        let _ = c;
        let m = b.system_tree_node(None, "m", classes::MACHINE).unwrap();
        let n = b.system_tree_node(Some(m), "n", classes::NODE).unwrap();
        let g1 = b
            .location_group(n, "p1", 1, LocationGroupType::Process)
            .unwrap();
        let g0 = b
            .location_group(m, "p0", 0, LocationGroupType::Process)
            .unwrap();
        let l_n = b.location(g1, "p1 t0", 0, LocationType::CpuThread).unwrap();
        let l_m0 = b.location(g0, "p0 t0", 0, LocationType::CpuThread).unwrap();
        let l_m1 = b
            .location(g0, "p0 gpu", 1, LocationType::AcceleratorStream)
            .unwrap();
        Small {
            cube: b.build().unwrap(),
            time,
            bytes,
            visits,
            cnodes: [root, a1, c],
            locations: [l_n, l_m0, l_m1],
        }
    }

    fn members(archive: &[u8]) -> Vec<(String, Vec<u8>, tar::Header)> {
        let mut ar = tar::Archive::new(archive);
        ar.entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let name = e.path().unwrap().to_string_lossy().into_owned();
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                (name, data, e.header().clone())
            })
            .collect()
    }

    fn f64s(data: &[u8]) -> Vec<f64> {
        assert_eq!(&data[..10], b"CUBEX.DATA");
        data[10..]
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    fn u64s(data: &[u8]) -> Vec<u64> {
        assert_eq!(&data[..10], b"CUBEX.DATA");
        data[10..]
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    fn index_rows(index: &[u8]) -> Vec<u32> {
        assert_eq!(&index[..18], b"CUBEX.INDEX\x01\x00\x00\x00\x00\x00\x01");
        let n = u32::from_le_bytes(index[18..22].try_into().unwrap()) as usize;
        assert_eq!(index.len(), 22 + 4 * n);
        index[22..]
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn archive_members_headers_and_values() {
        let Small {
            mut cube,
            time,
            bytes,
            visits,
            cnodes: [root, a1, c],
            locations: [l_n, l_m0, l_m1],
        } = small();
        cube.set(time, a1, l_n, 2.5).unwrap();
        cube.set(time, root, l_m1, 1.0).unwrap();
        cube.set(time, c, l_m0, 0.0).unwrap(); // a zero: no row
        cube.set(bytes, c, l_m0, 7u64).unwrap();
        cube.set(bytes, root, l_n, 9u64).unwrap();
        let archive = cube.write_to(Vec::new()).unwrap();
        let m = members(&archive);
        let names: Vec<&str> = m.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "anchor.xml",
                "0.index",
                "0.data",
                "1.index",
                "1.data",
                "2.index",
                "2.data"
            ]
        );
        for (name, data, h) in &m {
            assert_eq!(&h.as_bytes()[257..265], b"ustar\x0000", "{name}");
            assert_eq!(h.mode().unwrap(), 0o644);
            assert_eq!(h.entry_type(), tar::EntryType::Regular);
            assert_eq!(h.size().unwrap(), data.len() as u64);
            assert_ne!(data.len() % 512, 0, "{name}");
            // The size field as CubeLib reads it: octal text.
            let field: &[u8] = &h.as_bytes()[124..135];
            let size = String::from_utf8_lossy(field);
            assert_eq!(u64::from_str_radix(&size, 8).unwrap(), data.len() as u64);
        }
        assert!(m[0]
            .1
            .starts_with(b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"));
        // Columns in document order: p0 t0, p0 gpu (the machine's group), then p1 t0.
        // time (exclusive): rows by depth-first number: root 0, a 1, a1 2, c 3.
        assert_eq!(index_rows(&m[1].1), [0, 2]);
        assert_eq!(f64s(&m[2].1), [0.0, 1.0, 0.0, 0.0, 0.0, 2.5]);
        // bytes (inclusive): rows by wide number: root 0, a 1, c 2, a1 3.
        assert_eq!(index_rows(&m[3].1), [0, 2]);
        assert_eq!(u64s(&m[4].1), [0, 0, 9, 7, 0, 0]);
        // visits: no values, one row of zeros for cnode 0.
        assert_eq!(index_rows(&m[5].1), [0]);
        assert_eq!(u64s(&m[6].1), [0, 0, 0]);
        let _ = visits;
    }

    #[test]
    fn anchor_xml_never_ends_on_a_block_boundary() {
        for pad in 0..600 {
            let mut b = CubeBuilder::new();
            b.attribute("pad", "x".repeat(pad));
            b.metric(
                None,
                MetricDef::new(
                    "t",
                    "T",
                    units::SECONDS,
                    DataType::Double,
                    MetricKind::Exclusive,
                ),
            )
            .unwrap();
            let r = b.region(RegionDef::new("r")).unwrap();
            b.cnode(r, None).unwrap();
            let s = b.system_tree_node(None, "m", classes::MACHINE).unwrap();
            let g = b
                .location_group(s, "p", 0, LocationGroupType::Process)
                .unwrap();
            b.location(g, "t", 0, LocationType::CpuThread).unwrap();
            let cube = b.build().unwrap();
            let xml = cube.anchor_xml();
            let m = members(&cube.write_to(Vec::new()).unwrap());
            if xml.len() % 512 == 0 {
                assert_eq!(m[0].1.len(), xml.len() + 1);
                assert!(m[0].1.ends_with(b"</cube>\n\n"));
                return;
            }
            assert_eq!(m[0].1, xml.as_bytes());
        }
        panic!("no padding length put anchor.xml on a block boundary");
    }

    #[test]
    fn write_replaces_the_file_atomically_and_leaves_nothing_else() {
        let Small {
            mut cube,
            time,
            cnodes: [root, ..],
            locations: [l, ..],
            ..
        } = small();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile.cubex");
        fs::write(&path, b"old").unwrap();
        cube.set(time, root, l, 3.0).unwrap();
        cube.write(&path).unwrap();
        let written = fs::read(&path).unwrap();
        let m = members(&written);
        assert_eq!(m.len(), 7);
        assert_eq!(m[0].1, cube.anchor_xml().as_bytes());
        assert_eq!(f64s(&m[2].1), [0.0, 0.0, 3.0]);
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["profile.cubex"]);
    }

    #[test]
    fn write_into_a_missing_directory_names_the_file() {
        let cube = small().cube;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("profile.cubex");
        let err = cube.write(&path).unwrap_err();
        assert!(
            matches!(&err, CubeError::Io { path: p, .. } if *p == path),
            "{err:?}"
        );
        assert!(err.to_string().contains("missing/profile.cubex"), "{err}");
        let err = cube.write(dir.path().join("..").join("")).unwrap_err();
        assert!(matches!(err, CubeError::Io { .. }));
    }
}
