//! Reading `.cubex` files: the tar archive, `anchor.xml`, and each metric's index and data
//! files, rebuilt into a [`Cube`] through [`CubeBuilder`].
//!
//! Definitions are made in document order (metrics and call-tree nodes depth-first, the
//! system tree as written), so a file written by this crate reads back with the handles
//! and file ids of the cube that wrote it. Unknown elements and attributes are ignored,
//! which is what lets files of Score-P and CubeLib through.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use roxmltree::{Document, Node, NodeId};

use crate::error::{CubeError, ReadError};
use crate::format;
use crate::model::{
    CnodeId, CubeBuilder, DataType, LocationGroupType, LocationId, LocationType, MetricDef,
    MetricId, MetricKind, Parameter, RegionDef, RegionId, SystemTreeNodeId,
};
use crate::values::bits_are_zero;
use crate::Cube;

/// The attribute CubeLib writes itself; the writer adds it again, so it is not kept.
const SYNTAX_VERSION_KEY: &str = "Cube anchor.xml syntax version";

/// Marker of CubeLib's zlib-compressed data files.
const COMPRESSED_DATA_MARKER: &[u8] = b"ZCUBEX.DATA";
/// The data type of signed 64-bit integers, which this crate does not write.
const INT64: &str = "INT64";

pub(crate) fn read_file(path: &Path) -> Result<Cube, CubeError> {
    let fail = |problem| CubeError::Read {
        path: Some(path.to_path_buf()),
        problem,
    };
    let file = File::open(path).map_err(|e| fail(ReadError::Io(e)))?;
    read_archive(BufReader::with_capacity(1 << 20, file)).map_err(fail)
}

pub(crate) fn read_stream<R: Read>(input: R) -> Result<Cube, CubeError> {
    read_archive(input).map_err(|problem| CubeError::Read {
        path: None,
        problem,
    })
}

/// The archive members the reader needs: `anchor.xml` and the metrics' files.
#[derive(Default)]
struct Members {
    anchor: Option<Vec<u8>>,
    metric_files: HashMap<String, Vec<u8>>,
}

fn is_metric_file(name: &str) -> bool {
    let stem = name
        .strip_suffix(".index")
        .or_else(|| name.strip_suffix(".data"));
    stem.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
}

fn members<R: Read>(input: R) -> Result<Members, ReadError> {
    let mut archive = tar::Archive::new(input);
    // CubeW writes an extra block of zeros after a member whose size is a multiple of 512,
    // which would otherwise end the archive early.
    archive.set_ignore_zeros(true);
    let mut found = Members::default();
    for entry in archive.entries().map_err(ReadError::Archive)? {
        let mut entry = entry.map_err(ReadError::Archive)?;
        let name = entry.path().map_err(ReadError::Archive)?;
        let name = name.to_string_lossy();
        let name = name.trim_start_matches("./").to_string();
        if name != "anchor.xml" && !is_metric_file(&name) {
            continue;
        }
        // Read as the bytes come rather than allocating the size the header claims: a
        // damaged header must not cause a huge allocation.
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(ReadError::Archive)?;
        if bytes.len() as u64 != entry.size() {
            return Err(ReadError::Archive(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "{name} is cut short: {} of {} bytes",
                    bytes.len(),
                    entry.size()
                ),
            )));
        }
        if name == "anchor.xml" {
            found.anchor = Some(bytes);
        } else {
            found.metric_files.insert(name, bytes);
        }
    }
    Ok(found)
}

fn read_archive<R: Read>(input: R) -> Result<Cube, ReadError> {
    let mut members = members(input)?;
    let anchor = members.anchor.take().ok_or(ReadError::NoAnchor)?;
    let text = std::str::from_utf8(&anchor)
        .map_err(|e| ReadError::Xml(format!("the text is not UTF-8: {e}")))?;
    let anchor = parse_anchor_text(text)?;
    let mut cube = anchor
        .builder
        .build()
        .map_err(|e| ReadError::Invalid(Box::new(e)))?;
    cube.skipped_metrics = anchor.skipped_metrics;
    read_values(
        &mut cube,
        &anchor.metric_files,
        &anchor.columns,
        &mut members,
    )?;
    Ok(cube)
}

/// Up to this nesting depth `anchor.xml` is parsed on the caller's stack.
const IN_PLACE_DEPTH: usize = 64;
/// Deeper nesting than this (a call tree about as deep) is refused.
const MAX_DEPTH: usize = 10_000;
/// Stack for each level of nesting: roxmltree takes about 0.7 KiB a level in an optimized
/// build and 6 KiB in a debug build.
const STACK_PER_LEVEL: usize = 12 << 10;

/// Parses `anchor.xml`. roxmltree parses nested elements recursively, so a deep call tree
/// is parsed on a thread with a stack large enough for its depth (reserved, not used,
/// unless the depth needs it).
fn parse_anchor_text(text: &str) -> Result<Anchor, ReadError> {
    let depth = nesting_depth(text);
    if depth > MAX_DEPTH {
        return Err(ReadError::Anchor(format!(
            "elements are nested {depth} levels deep; more than {MAX_DEPTH} are not read"
        )));
    }
    let parse = || {
        let doc = Document::parse(text).map_err(|e| ReadError::Xml(e.to_string()))?;
        parse_anchor(&doc)
    };
    if depth <= IN_PLACE_DEPTH {
        return parse();
    }
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("anchor.xml".into())
            .stack_size((1 << 20) + depth * STACK_PER_LEVEL)
            .spawn_scoped(scope, parse)
            .map_err(ReadError::Io)?
            .join()
            .unwrap_or_else(|_| Err(ReadError::Xml("the XML parser failed".into())))
    })
}

/// The deepest nesting of elements in an XML text, counted without parsing it (exact for
/// well-formed XML; the parser refuses the rest).
fn nesting_depth(text: &str) -> usize {
    let bytes = text.as_bytes();
    let find = |from: usize, what: &[u8]| {
        bytes[from.min(bytes.len())..]
            .windows(what.len())
            .position(|w| w == what)
            .map_or(bytes.len(), |p| from + p + what.len())
    };
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0usize);
    while let Some(offset) = bytes[i..].iter().position(|&b| b == b'<') {
        let start = i + offset;
        let rest = &bytes[start..];
        i = if rest.starts_with(b"<!--") {
            find(start + 4, b"-->")
        } else if rest.starts_with(b"<![CDATA[") {
            find(start + 9, b"]]>")
        } else if rest.starts_with(b"<?") || rest.starts_with(b"<!") {
            find(start + 2, b">")
        } else if rest.starts_with(b"</") {
            depth = depth.saturating_sub(1);
            find(start + 2, b">")
        } else {
            // A start tag: its end is the first `>` outside quoted attribute values.
            let mut quote = None;
            let mut end = bytes.len();
            for (j, &b) in rest.iter().enumerate().skip(1) {
                match (quote, b) {
                    (None, b'"' | b'\'') => quote = Some(b),
                    (Some(q), _) if b == q => quote = None,
                    (None, b'>') => {
                        end = start + j + 1;
                        break;
                    }
                    _ => {}
                }
            }
            if bytes[..end].ends_with(b"/>") {
                // An empty element: no nesting.
            } else {
                depth += 1;
                deepest = deepest.max(depth);
            }
            end
        };
    }
    deepest
}

/// A kept metric's index and data files.
struct MetricFiles {
    metric: MetricId,
    /// The number that names the files (`<file id>.index`, `<file id>.data`).
    file_id: u32,
    /// The file holds signed 64-bit integers (`INT64`, as CubeLib's `cube_diff` writes
    /// counts), read into the metric as doubles.
    signed: bool,
}

/// What `anchor.xml` defines, ready to be built.
struct Anchor {
    builder: CubeBuilder,
    /// Each kept metric and its files.
    metric_files: Vec<MetricFiles>,
    /// The location of each column of the data files (document order).
    columns: Vec<LocationId>,
    skipped_metrics: Vec<String>,
}

fn anchor_error(node: Node<'_, '_>, message: impl std::fmt::Display) -> ReadError {
    let pos = node.document().text_pos_at(node.range().start);
    ReadError::Anchor(format!(
        "<{}> at line {}: {message}",
        node.tag_name().name(),
        pos.row
    ))
}

fn invalid(e: CubeError) -> ReadError {
    ReadError::Invalid(Box::new(e))
}

/// The child elements named `tag`, in document order.
fn elements<'a, 'input>(
    node: Node<'a, 'input>,
    tag: &'static str,
) -> impl DoubleEndedIterator<Item = Node<'a, 'input>> {
    node.children()
        .filter(move |n| n.is_element() && n.tag_name().name() == tag)
}

/// The text of the first child element named `tag` (empty if it has none).
fn child_text<'a>(node: Node<'a, '_>, tag: &'static str) -> Option<&'a str> {
    elements(node, tag).next().map(|n| n.text().unwrap_or(""))
}

fn required_text<'a>(node: Node<'a, '_>, tag: &'static str) -> Result<&'a str, ReadError> {
    child_text(node, tag).ok_or_else(|| anchor_error(node, format!("no <{tag}>")))
}

fn required_attr<'a>(node: Node<'a, '_>, name: &'static str) -> Result<&'a str, ReadError> {
    node.attribute(name)
        .ok_or_else(|| anchor_error(node, format!("no `{name}` attribute")))
}

fn number<T: std::str::FromStr>(
    node: Node<'_, '_>,
    what: &str,
    text: &str,
) -> Result<T, ReadError> {
    text.trim()
        .parse()
        .map_err(|_| anchor_error(node, format!("{what} `{text}` is not a valid number")))
}

fn parse_anchor(doc: &Document<'_>) -> Result<Anchor, ReadError> {
    let root = doc.root_element();
    if root.tag_name().name() != "cube" {
        return Err(anchor_error(root, "the root element is not <cube>"));
    }
    let version = required_attr(root, "version")?;
    if !version.starts_with("4.") {
        return Err(anchor_error(
            root,
            format!("version `{version}` is not CUBE4"),
        ));
    }

    let mut b = CubeBuilder::new();
    for attr in elements(root, "attr") {
        let key = required_attr(attr, "key")?;
        let value = required_attr(attr, "value")?;
        if key != SYNTAX_VERSION_KEY {
            b.attribute(key, value);
        }
    }
    for murl in elements(root, "doc")
        .flat_map(|d| elements(d, "mirrors"))
        .flat_map(|m| elements(m, "murl"))
    {
        b.mirror(murl.text().unwrap_or(""));
    }

    let mut metric_files = Vec::new();
    let mut skipped_metrics = Vec::new();
    for metrics in elements(root, "metrics") {
        parse_metrics(&mut b, metrics, &mut metric_files, &mut skipped_metrics)?;
    }
    for program in elements(root, "program") {
        let regions = parse_regions(&mut b, program)?;
        parse_cnodes(&mut b, program, &regions)?;
    }
    let mut columns = Vec::new();
    for system in elements(root, "system") {
        columns.extend(parse_system(&mut b, system)?);
    }
    Ok(Anchor {
        builder: b,
        metric_files,
        columns,
        skipped_metrics,
    })
}

/// A metric's kind and data type (and whether its file holds INT64 values, kept as
/// doubles), or why it is not read.
fn metric_shape(node: Node<'_, '_>) -> Result<(MetricKind, DataType, bool), String> {
    if elements(node, "cubepl").next().is_some() {
        return Err("derived (CubePL)".into());
    }
    let kind = match node.attribute("type") {
        None => MetricKind::Exclusive,
        Some(name) => MetricKind::from_cube_name(name).ok_or(format!("of type {name}"))?,
    };
    match child_text(node, "dtype") {
        Some(INT64) => Ok((kind, DataType::Double, true)),
        Some(name) => match DataType::from_cube_name(name) {
            Some(data_type) => Ok((kind, data_type, false)),
            None => Err(format!("of data type {name}")),
        },
        None => Err("without <dtype>".into()),
    }
}

fn parse_metrics(
    b: &mut CubeBuilder,
    metrics: Node<'_, '_>,
    files: &mut Vec<MetricFiles>,
    skipped: &mut Vec<String>,
) -> Result<(), ReadError> {
    let mut file_ids = HashSet::new();
    // Depth-first without recursion, so that handles follow the file's order.
    let mut stack: Vec<(Node<'_, '_>, Option<MetricId>)> = elements(metrics, "metric")
        .rev()
        .map(|m| (m, None))
        .collect();
    while let Some((node, parent)) = stack.pop() {
        let unique_name = required_text(node, "uniq_name")?;
        let Ok((kind, data_type, signed)) = metric_shape(node) else {
            // The metric and everything below it.
            skipped.extend(
                node.descendants()
                    .filter(|n| n.is_element() && n.tag_name().name() == "metric")
                    .filter_map(|n| child_text(n, "uniq_name"))
                    .map(str::to_string),
            );
            continue;
        };
        let file_id: u32 = number(node, "metric id", required_attr(node, "id")?)?;
        if !file_ids.insert(file_id) {
            return Err(anchor_error(
                node,
                format!("metric id {file_id} is used twice"),
            ));
        }
        let def = MetricDef::new(
            unique_name,
            child_text(node, "disp_name").unwrap_or(unique_name),
            child_text(node, "uom").unwrap_or(""),
            data_type,
            kind,
        )
        .with_url(child_text(node, "url").unwrap_or(""))
        .with_description(child_text(node, "descr").unwrap_or(""));
        let id = b.metric(parent, def).map_err(invalid)?;
        files.push(MetricFiles {
            metric: id,
            file_id,
            signed,
        });
        stack.extend(elements(node, "metric").rev().map(|m| (m, Some(id))));
    }
    Ok(())
}

/// A source line: `-1` (or any negative number) means none.
fn line(node: Node<'_, '_>, attr: &'static str) -> Result<Option<u32>, ReadError> {
    let Some(text) = node.attribute(attr) else {
        return Ok(None);
    };
    let n: i64 = number(node, attr, text)?;
    if n < 0 {
        return Ok(None);
    }
    u32::try_from(n)
        .map(Some)
        .map_err(|_| anchor_error(node, format!("{attr} line {n} is too large")))
}

/// Defines the regions and returns them by their `id` attribute.
fn parse_regions(
    b: &mut CubeBuilder,
    program: Node<'_, '_>,
) -> Result<HashMap<u64, RegionId>, ReadError> {
    let mut regions = HashMap::new();
    for node in elements(program, "region") {
        let file_id: u64 = number(node, "region id", required_attr(node, "id")?)?;
        let name = required_text(node, "name")?;
        let mut def = RegionDef::new(name)
            .with_module(node.attribute("mod").unwrap_or(""))
            .with_url(child_text(node, "url").unwrap_or(""))
            .with_description(child_text(node, "descr").unwrap_or(""));
        if let Some(mangled) = child_text(node, "mangled_name").filter(|&m| m != name) {
            def = def.with_mangled_name(mangled);
        }
        if let Some(paradigm) = child_text(node, "paradigm") {
            def = def.with_paradigm(paradigm);
        }
        if let Some(role) = child_text(node, "role") {
            def = def.with_role(role);
        }
        // The model keeps both lines or neither.
        if let (Some(begin), Some(end)) = (line(node, "begin")?, line(node, "end")?) {
            def = def.with_lines(begin, end);
        }
        let id = b.region(def).map_err(invalid)?;
        if regions.insert(file_id, id).is_some() {
            return Err(anchor_error(
                node,
                format!("region id {file_id} is used twice"),
            ));
        }
    }
    Ok(regions)
}

fn parse_parameter(node: Node<'_, '_>) -> Result<(String, Parameter), ReadError> {
    let key = required_attr(node, "parkey")?;
    let value = required_attr(node, "parvalue")?;
    let value = match required_attr(node, "partype")? {
        "numeric" => Parameter::Numeric(number(node, "numeric parameter", value)?),
        "string" => Parameter::String(value.to_string()),
        other => {
            return Err(anchor_error(
                node,
                format!("parameter type `{other}` is neither numeric nor string"),
            ))
        }
    };
    Ok((key.to_string(), value))
}

fn parse_cnodes(
    b: &mut CubeBuilder,
    program: Node<'_, '_>,
    regions: &HashMap<u64, RegionId>,
) -> Result<(), ReadError> {
    let mut stack: Vec<(Node<'_, '_>, Option<CnodeId>)> = elements(program, "cnode")
        .rev()
        .map(|c| (c, None))
        .collect();
    while let Some((node, parent)) = stack.pop() {
        let callee: u64 = number(node, "calleeId", required_attr(node, "calleeId")?)?;
        let region = *regions
            .get(&callee)
            .ok_or_else(|| anchor_error(node, format!("calleeId {callee} names no region")))?;
        let id = b.cnode(region, parent).map_err(invalid)?;
        for p in elements(node, "parameter") {
            let (key, value) = parse_parameter(p)?;
            b.cnode_parameter(id, key, value).map_err(invalid)?;
        }
        stack.extend(elements(node, "cnode").rev().map(|c| (c, Some(id))));
    }
    Ok(())
}

fn rank(node: Node<'_, '_>) -> Result<u32, ReadError> {
    number(node, "rank", required_text(node, "rank")?)
}

/// Defines the system tree and returns the location of each data column.
/// The `<type>` of a location or location group: `default` when it has none, an error
/// when Cube's spelling is not one this crate knows.
fn type_of<T>(
    node: Node<'_, '_>,
    default: T,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, ReadError> {
    match child_text(node, "type") {
        None => Ok(default),
        Some(name) => parse(name).ok_or_else(|| {
            let what = node.tag_name().name();
            let what = if what == "locationgroup" {
                "location group"
            } else {
                what
            };
            anchor_error(node, format!("{what} type `{name}` is not supported"))
        }),
    }
}

fn parse_system(b: &mut CubeBuilder, system: Node<'_, '_>) -> Result<Vec<LocationId>, ReadError> {
    let mut locations: HashMap<NodeId, LocationId> = HashMap::new();
    let mut stack: Vec<(Node<'_, '_>, Option<SystemTreeNodeId>)> =
        elements(system, "systemtreenode")
            .rev()
            .map(|s| (s, None))
            .collect();
    while let Some((node, parent)) = stack.pop() {
        let name = required_text(node, "name")?;
        let class = child_text(node, "class").unwrap_or("");
        let stn = b.system_tree_node(parent, name, class).map_err(invalid)?;
        for group in elements(node, "locationgroup") {
            let group_type = type_of(
                group,
                LocationGroupType::Process,
                LocationGroupType::from_cube_name,
            )?;
            let g = b
                .location_group(stn, required_text(group, "name")?, rank(group)?, group_type)
                .map_err(invalid)?;
            for loc in elements(group, "location") {
                let location_type =
                    type_of(loc, LocationType::CpuThread, LocationType::from_cube_name)?;
                let l = b
                    .location(g, required_text(loc, "name")?, rank(loc)?, location_type)
                    .map_err(invalid)?;
                locations.insert(loc.id(), l);
            }
        }
        stack.extend(
            elements(node, "systemtreenode")
                .rev()
                .map(|s| (s, Some(stn))),
        );
    }
    // Data columns follow the document order of the <location> elements.
    Ok(system
        .descendants()
        .filter_map(|n| locations.get(&n.id()).copied())
        .collect())
}

#[derive(Clone, Copy)]
enum ByteOrder {
    Little,
    Big,
}

impl ByteOrder {
    fn u32(self, bytes: [u8; 4]) -> u32 {
        match self {
            ByteOrder::Little => u32::from_le_bytes(bytes),
            ByteOrder::Big => u32::from_be_bytes(bytes),
        }
    }
    fn u64(self, bytes: [u8; 8]) -> u64 {
        match self {
            ByteOrder::Little => u64::from_le_bytes(bytes),
            ByteOrder::Big => u64::from_be_bytes(bytes),
        }
    }
}

fn values_error(member: &str, message: impl Into<String>) -> ReadError {
    ReadError::Values {
        member: member.to_string(),
        message: message.into(),
    }
}

/// Index format number of a dense index: every row present, no list.
const INDEX_FORMAT_DENSE: u8 = 3;

/// The byte order and the rows (call-tree numbers) an index file lists.
fn parse_index(
    member: &str,
    bytes: &[u8],
    cnodes: usize,
) -> Result<(ByteOrder, Vec<u32>), ReadError> {
    let header = format::INDEX_MARKER.len() + 7;
    if !bytes.starts_with(format::INDEX_MARKER) {
        return Err(values_error(member, "does not start with CUBEX.INDEX"));
    }
    if bytes.len() < header {
        return Err(values_error(member, "the header is cut short"));
    }
    let marker_at = format::INDEX_MARKER.len();
    let marker: [u8; 4] = bytes[marker_at..marker_at + 4]
        .try_into()
        .unwrap_or_default();
    let order = if u32::from_le_bytes(marker) == 1 {
        ByteOrder::Little
    } else if u32::from_be_bytes(marker) == 1 {
        ByteOrder::Big
    } else {
        return Err(values_error(
            member,
            format!("byte-order marker {marker:02x?} is not 1 in either byte order"),
        ));
    };
    let rest = &bytes[header..];
    match bytes[header - 1] {
        // CubeLib writes the sparse index of a metric without values as the bare header.
        format::INDEX_FORMAT_SPARSE if rest.is_empty() => Ok((order, Vec::new())),
        format::INDEX_FORMAT_SPARSE => {
            let Some((count, list)) = rest.split_first_chunk::<4>() else {
                return Err(values_error(member, "the row count is cut short"));
            };
            let count = order.u32(*count) as u64;
            if count * 4 != list.len() as u64 {
                return Err(values_error(
                    member,
                    format!(
                        "lists {count} rows but holds {} bytes of rows ({} needed)",
                        list.len(),
                        count * 4
                    ),
                ));
            }
            let mut seen = vec![false; cnodes];
            let mut rows = Vec::with_capacity(list.len() / 4);
            for chunk in list.chunks_exact(4) {
                let row = order.u32(chunk.try_into().unwrap_or_default());
                match seen.get_mut(row as usize) {
                    Some(s) if !*s => *s = true,
                    Some(_) => {
                        return Err(values_error(member, format!("row {row} is listed twice")))
                    }
                    None => {
                        return Err(values_error(
                            member,
                            format!("row {row} is outside the call tree of {cnodes} nodes"),
                        ))
                    }
                }
                rows.push(row);
            }
            Ok((order, rows))
        }
        INDEX_FORMAT_DENSE => {
            if !rest.is_empty() {
                return Err(values_error(
                    member,
                    "a dense index has bytes after its header",
                ));
            }
            Ok((order, (0..cnodes as u32).collect()))
        }
        other => Err(values_error(
            member,
            format!("index format {other} is not supported (1 sparse and 3 dense are)"),
        )),
    }
}

/// Reads each kept metric's index and data files into the cube's values.
fn read_values(
    cube: &mut Cube,
    metric_files: &[MetricFiles],
    columns: &[LocationId],
    members: &mut Members,
) -> Result<(), ReadError> {
    let dims = std::sync::Arc::clone(&cube.dims);
    let cnodes = dims.cnodes.len();
    // Row number → cnode handle, the inverse of `Dimensions::row_id` for each kind.
    let inverse = |row_of: &[u32]| {
        let mut cnode_of = vec![0u32; row_of.len()];
        for (cnode, &row) in row_of.iter().enumerate() {
            cnode_of[row as usize] = cnode as u32;
        }
        cnode_of
    };
    let exclusive_rows = inverse(&dims.cnode_file_id);
    let inclusive_rows = inverse(&dims.cnode_wide_pos);
    let width = columns.len();

    for &MetricFiles {
        metric,
        file_id,
        signed,
    } in metric_files
    {
        let index_name = format!("{file_id}.index");
        let data_name = format!("{file_id}.data");
        let (index, data) = match (
            members.metric_files.remove(&index_name),
            members.metric_files.remove(&data_name),
        ) {
            (None, None) => continue, // no values: all zero
            (Some(_), None) => {
                return Err(values_error(&data_name, "is missing (the index is there)"))
            }
            (None, Some(_)) => {
                return Err(values_error(
                    &index_name,
                    "is missing (the data file is there)",
                ))
            }
            (Some(index), Some(data)) => (index, data),
        };
        if data.starts_with(COMPRESSED_DATA_MARKER) {
            return Err(ReadError::Compressed { member: data_name });
        }
        if !data.starts_with(format::DATA_MARKER) {
            return Err(values_error(&data_name, "does not start with CUBEX.DATA"));
        }
        let (order, rows) = parse_index(&index_name, &index, cnodes)?;
        let body = &data[format::DATA_MARKER.len()..];
        let needed = rows.len() as u64 * width as u64 * 8;
        if body.len() as u64 != needed {
            return Err(values_error(
                &data_name,
                format!(
                    "holds {} bytes of values, but {} rows of {width} locations take {needed}",
                    body.len(),
                    rows.len()
                ),
            ));
        }
        let def = dims.metric(metric).def();
        let row_to_cnode = match def.kind() {
            MetricKind::Exclusive => &exclusive_rows,
            MetricKind::Inclusive => &inclusive_rows,
        };
        let stored = &mut cube.values[metric.index()].rows;
        for (&row, bytes) in rows.iter().zip(body.chunks_exact(8 * width.max(1))) {
            let mut by_handle = vec![0u64; width];
            let mut any = false;
            for (&location, value) in columns.iter().zip(bytes.chunks_exact(8)) {
                let mut bits = order.u64(value.try_into().unwrap_or_default());
                if signed {
                    bits = (bits as i64 as f64).to_bits();
                }
                any |= !bits_are_zero(def.data_type(), bits);
                by_handle[location.index()] = bits;
            }
            // Rows of zeros stay out, as `Cube::set` keeps them out.
            if any {
                stored.insert(row_to_cnode[row as usize], by_handle.into_boxed_slice());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_depth_counts_open_elements() {
        assert_eq!(nesting_depth(""), 0);
        assert_eq!(nesting_depth("<a/>"), 0);
        assert_eq!(
            nesting_depth("<?xml version=\"1.0\"?><a><b x='>' y=\"/>\"><c/></b><b/></a>"),
            2
        );
        assert_eq!(
            nesting_depth("<a><!-- <b><c> --><![CDATA[<d><e>]]><f>x > y</f></a>"),
            2
        );
        assert_eq!(nesting_depth("<a><b><c"), 3, "cut short: counted as open");
    }
}
