//! Helpers shared by the reading and difference tests: taking archives apart and putting
//! them together, and comparing a cube with the cube read back from its file.

#![allow(dead_code)]

use std::io::Read;

use nccl_scorep_cube::*;

/// The members of a tar archive, in order.
pub fn members(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut ar = tar::Archive::new(archive);
    ar.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            (name, data)
        })
        .collect()
}

/// A tar archive of these members.
pub fn archive(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, data) in members {
        let mut header = tar::Header::new_ustar();
        header.set_path(name).unwrap();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        tar.append(&header, &data[..]).unwrap();
    }
    tar.into_inner().unwrap()
}

/// Every value of a cube, by metric unique name, cnode file id and location file id.
pub fn every_value(cube: &Cube) -> Vec<(String, u32, u32, Value)> {
    let d = cube.dimensions();
    let mut out = Vec::new();
    for m in d.metric_ids() {
        for c in d.cnode_ids() {
            for l in d.location_ids() {
                out.push((
                    d.metric(m).def().unique_name().to_string(),
                    d.cnode_file_id(c),
                    d.location_file_id(l),
                    cube.get(m, c, l).unwrap(),
                ));
            }
        }
    }
    out.sort_by(|a, b| (&a.0, a.1, a.2).cmp(&(&b.0, b.1, b.2)));
    out
}

/// Asserts that `read` is `original` read back from its file: the same dimensions (the
/// same anchor.xml, definitions and file ids) and the same value at every point.
pub fn assert_read_back(original: &Cube, read: &Cube) {
    assert_eq!(original.anchor_xml(), read.anchor_xml());
    let (d, r) = (original.dimensions(), read.dimensions());
    assert_eq!(d.attributes(), r.attributes());
    assert_eq!(d.mirrors(), r.mirrors());
    assert_eq!(d.metric_ids().count(), r.metric_ids().count());
    assert_eq!(d.region_ids().count(), r.region_ids().count());
    assert_eq!(d.cnode_ids().count(), r.cnode_ids().count());
    assert_eq!(
        d.system_tree_node_ids().count(),
        r.system_tree_node_ids().count()
    );
    assert_eq!(
        d.location_group_ids().count(),
        r.location_group_ids().count()
    );
    assert_eq!(d.location_ids().count(), r.location_ids().count());
    assert!(read.skipped_metrics().is_empty());

    // The reader defines cnodes and locations in the file's order: its handle index is
    // the original's file id.
    let cnode = |c: CnodeId| CnodeId::from_index(d.cnode_file_id(c) as usize);
    let location = |l: LocationId| LocationId::from_index(d.location_file_id(l) as usize);
    for m in d.metric_ids() {
        let def = d.metric(m).def();
        let rm = r.metric_by_name(def.unique_name()).unwrap();
        assert_eq!(def, r.metric(rm).def());
        assert_eq!(
            d.metric(m)
                .parent()
                .map(|p| d.metric(p).def().unique_name()),
            r.metric(rm)
                .parent()
                .map(|p| r.metric(p).def().unique_name())
        );
    }
    for c in d.cnode_ids() {
        let (a, b) = (d.cnode(c), r.cnode(cnode(c)));
        assert_eq!(d.region(a.region()), r.region(b.region()));
        assert_eq!(a.parameters(), b.parameters());
        assert_eq!(a.parent().map(cnode), b.parent());
    }
    for l in d.location_ids() {
        let (a, b) = (d.location(l), r.location(location(l)));
        assert_eq!(
            (a.name(), a.rank(), a.location_type()),
            (b.name(), b.rank(), b.location_type())
        );
        let (ga, gb) = (d.location_group(a.group()), r.location_group(b.group()));
        assert_eq!(
            (ga.name(), ga.rank(), ga.group_type()),
            (gb.name(), gb.rank(), gb.group_type())
        );
        assert_eq!(
            d.system_tree_node(ga.parent()).name(),
            r.system_tree_node(gb.parent()).name()
        );
    }
    assert_eq!(every_value(original), every_value(read));
}
