//! `anchor.xml`: the cube's attributes and its three dimensions.
//!
//! CubeLib reads this file with a scanner and grammar of its own, not a general XML
//! parser, so the writer keeps to what that grammar accepts:
//!
//! * the declaration exactly `<?xml version="1.0" encoding="UTF-8"?>` and the root exactly
//!   `<cube version="4.4">` (or `"4.7"` when there are accelerator locations);
//! * then `<attr>` elements, `<doc>` (only with mirrors), `<metrics>`, `<program>` (all
//!   `<region>` elements before the `<cnode>` tree) and `<system>`, in that order;
//! * `id` attributes on metrics, regions and cnodes, `Id` on system-tree nodes, location
//!   groups and locations (pycubexr reads these exact spellings);
//! * in a `<systemtreenode>`: `<name>`, `<class>`, its `<locationgroup>` elements, then its
//!   child nodes; in a `<locationgroup>` and a `<location>`: `<name>`, `<rank>`, `<type>`;
//! * a cnode's `<parameter>` elements right after its opening tag, before its child
//!   cnodes, as CubeLib itself writes them;
//! * text escaped with the five entities CubeLib decodes (`&amp; &lt; &gt; &apos; &quot;`);
//!   CubeLib turns line breaks into spaces, so they are written as spaces, and the control
//!   characters XML 1.0 forbids are left out.

use std::fmt::Write as _;

use crate::model::{Dimensions, MetricId, Parameter};

/// Appends `text` escaped for XML content or a double-quoted attribute value.
pub(crate) fn escape_into(out: &mut String, text: &str) {
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\r' | '\t' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
}

fn escaped(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    escape_into(&mut s, text);
    s
}

struct Writer {
    out: String,
}

impl Writer {
    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
    }

    /// `<tag>text</tag>` on a line of its own.
    fn element(&mut self, depth: usize, tag: &str, text: &str) {
        self.indent(depth);
        let _ = write!(self.out, "<{tag}>");
        escape_into(&mut self.out, text);
        let _ = writeln!(self.out, "</{tag}>");
    }

    fn line(&mut self, depth: usize, text: &str) {
        self.indent(depth);
        self.out.push_str(text);
        self.out.push('\n');
    }
}

/// The text of `anchor.xml` for these dimensions.
pub(crate) fn anchor_xml(dims: &Dimensions) -> String {
    let mut w = Writer {
        out: String::with_capacity(
            4096 + 256 * (dims.metrics.len() + dims.regions.len() + dims.locations.len())
                + 64 * dims.cnodes.len(),
        ),
    };
    let version = dims.anchor_version();
    w.line(0, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    w.line(0, &format!(r#"<cube version="{version}">"#));
    w.line(
        1,
        &format!(r#"<attr key="Cube anchor.xml syntax version" value="{version}"/>"#),
    );
    for (key, value) in &dims.attrs {
        w.line(
            1,
            &format!(
                r#"<attr key="{}" value="{}"/>"#,
                escaped(key),
                escaped(value)
            ),
        );
    }
    if !dims.mirrors.is_empty() {
        w.line(1, "<doc>");
        w.line(2, "<mirrors>");
        for m in &dims.mirrors {
            w.element(3, "murl", m);
        }
        w.line(2, "</mirrors>");
        w.line(1, "</doc>");
    }

    w.line(1, "<metrics>");
    for root in dims
        .metric_ids()
        .filter(|&m| dims.metric(m).parent().is_none())
    {
        write_metric(&mut w, dims, root, 2);
    }
    w.line(1, "</metrics>");

    w.line(1, "<program>");
    for (id, r) in dims.regions.iter().enumerate() {
        let (begin, end) = r.lines();
        let line = |l: Option<u32>| l.map_or(-1, i64::from);
        w.line(
            2,
            &format!(
                r#"<region id="{id}" mod="{}" begin="{}" end="{}">"#,
                escaped(r.module()),
                line(begin),
                line(end)
            ),
        );
        w.element(3, "name", r.name());
        w.element(3, "mangled_name", r.mangled_name());
        w.element(3, "paradigm", r.paradigm());
        w.element(3, "role", r.role());
        w.element(3, "url", r.url());
        w.element(3, "descr", r.description());
        w.line(2, "</region>");
    }
    write_cnodes(&mut w, dims);
    w.line(1, "</program>");

    w.line(1, "<system>");
    write_system_tree(&mut w, dims);
    w.line(1, "</system>");
    w.line(0, "</cube>");
    w.out
}

fn write_metric(w: &mut Writer, dims: &Dimensions, id: MetricId, depth: usize) {
    let m = dims.metric(id);
    let def = m.def();
    w.line(
        depth,
        &format!(
            r#"<metric id="{}" type="{}">"#,
            dims.metric_file_id[id.index()],
            def.kind().cube_name()
        ),
    );
    w.element(depth + 1, "disp_name", def.display_name());
    w.element(depth + 1, "uniq_name", def.unique_name());
    w.element(depth + 1, "dtype", def.data_type().cube_name());
    w.element(depth + 1, "uom", def.unit());
    w.element(depth + 1, "url", def.url());
    w.element(depth + 1, "descr", def.description());
    for &child in m.children() {
        write_metric(w, dims, child, depth + 1);
    }
    w.line(depth, "</metric>");
}

/// The call tree, depth-first without recursion (call trees can be deep).
fn write_cnodes(w: &mut Writer, dims: &Dimensions) {
    enum Step {
        Open(u32, usize),
        Close(usize),
    }
    let roots: Vec<u32> = dims
        .cnode_ids()
        .filter(|&c| dims.cnode(c).parent().is_none())
        .map(|c| c.0)
        .collect();
    let mut stack: Vec<Step> = roots.iter().rev().map(|&r| Step::Open(r, 2)).collect();
    while let Some(step) = stack.pop() {
        match step {
            Step::Open(c, depth) => {
                let node = &dims.cnodes[c as usize];
                w.line(
                    depth,
                    &format!(
                        r#"<cnode id="{}" calleeId="{}">"#,
                        dims.cnode_file_id[c as usize],
                        node.region().index()
                    ),
                );
                for (key, value) in node.parameters() {
                    let (kind, value) = match value {
                        Parameter::Numeric(n) => ("numeric", n.to_string()),
                        Parameter::String(s) => ("string", escaped(s)),
                    };
                    w.line(
                        depth + 1,
                        &format!(
                            r#"<parameter partype="{kind}" parkey="{}" parvalue="{value}"/>"#,
                            escaped(key)
                        ),
                    );
                }
                stack.push(Step::Close(depth));
                for child in node.children().iter().rev() {
                    stack.push(Step::Open(child.0, depth + 1));
                }
            }
            Step::Close(depth) => w.line(depth, "</cnode>"),
        }
    }
}

/// The system tree in document order (see `Dimensions::location_order`).
fn write_system_tree(w: &mut Writer, dims: &Dimensions) {
    enum Step {
        Open(u32, usize),
        Close(usize),
    }
    let roots: Vec<u32> = dims
        .system_tree_node_ids()
        .filter(|&s| dims.system_tree_node(s).parent().is_none())
        .map(|s| s.0)
        .collect();
    let mut stack: Vec<Step> = roots.iter().rev().map(|&r| Step::Open(r, 2)).collect();
    while let Some(step) = stack.pop() {
        match step {
            Step::Open(s, depth) => {
                let node = &dims.stns[s as usize];
                w.line(
                    depth,
                    &format!(r#"<systemtreenode Id="{}">"#, dims.stn_file_id[s as usize]),
                );
                w.element(depth + 1, "name", node.name());
                w.element(depth + 1, "class", node.class());
                for &g in node.location_groups() {
                    let group = dims.location_group(g);
                    w.line(
                        depth + 1,
                        &format!(r#"<locationgroup Id="{}">"#, dims.group_file_id[g.index()]),
                    );
                    w.element(depth + 2, "name", group.name());
                    w.element(depth + 2, "rank", &group.rank().to_string());
                    w.element(depth + 2, "type", group.group_type().cube_name());
                    for &l in group.locations() {
                        let loc = dims.location(l);
                        w.line(
                            depth + 2,
                            &format!(r#"<location Id="{}">"#, dims.location_file_id[l.index()]),
                        );
                        w.element(depth + 3, "name", loc.name());
                        w.element(depth + 3, "rank", &loc.rank().to_string());
                        w.element(depth + 3, "type", loc.location_type().cube_name());
                        w.line(depth + 2, "</location>");
                    }
                    w.line(depth + 1, "</locationgroup>");
                }
                stack.push(Step::Close(depth));
                for child in node.children().iter().rev() {
                    stack.push(Step::Open(child.0, depth + 1));
                }
            }
            Step::Close(depth) => w.line(depth, "</systemtreenode>"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    #[test]
    fn escaping_uses_the_five_entities_and_drops_what_cube_cannot_keep() {
        let mut s = String::new();
        escape_into(&mut s, "a&b<c>d\"e'f\ng\th\u{1}i\u{FFFF}é");
        assert_eq!(s, "a&amp;b&lt;c&gt;d&quot;e&apos;f g hié");
    }

    fn tiny() -> crate::Cube {
        let mut b = CubeBuilder::new();
        b.attribute("creator", "a&b");
        let t = b
            .metric(
                None,
                MetricDef::new(
                    "time",
                    "Time",
                    units::SECONDS,
                    DataType::Double,
                    MetricKind::Exclusive,
                )
                .with_description("Total <time>"),
            )
            .unwrap();
        b.metric(
            Some(t),
            MetricDef::new(
                "wait",
                "Wait",
                units::SECONDS,
                DataType::Double,
                MetricKind::Exclusive,
            ),
        )
        .unwrap();
        let main = b
            .region(
                RegionDef::new("main")
                    .with_paradigm("user")
                    .with_role("function")
                    .with_lines(3, 9),
            )
            .unwrap();
        let f = b.region(RegionDef::new("f")).unwrap();
        let root = b.cnode(main, None).unwrap();
        let child = b.cnode(f, Some(root)).unwrap();
        b.cnode_parameter(root, "size", Parameter::Numeric(-4))
            .unwrap();
        b.cnode_parameter(child, "comm", Parameter::String("world\"1".into()))
            .unwrap();
        let m = b
            .system_tree_node(None, "cluster", classes::MACHINE)
            .unwrap();
        let n = b.system_tree_node(Some(m), "host", classes::NODE).unwrap();
        let g = b
            .location_group(n, "rank 0", 0, LocationGroupType::Process)
            .unwrap();
        b.location(g, "thread 0", 0, LocationType::CpuThread)
            .unwrap();
        b.build().unwrap()
    }

    #[test]
    fn anchor_of_a_tiny_cube() {
        let cube = tiny();
        let xml = anchor_xml(cube.dimensions());
        let want = r#"<?xml version="1.0" encoding="UTF-8"?>
<cube version="4.4">
  <attr key="Cube anchor.xml syntax version" value="4.4"/>
  <attr key="creator" value="a&amp;b"/>
  <metrics>
    <metric id="0" type="EXCLUSIVE">
      <disp_name>Time</disp_name>
      <uniq_name>time</uniq_name>
      <dtype>DOUBLE</dtype>
      <uom>sec</uom>
      <url></url>
      <descr>Total &lt;time&gt;</descr>
      <metric id="1" type="EXCLUSIVE">
        <disp_name>Wait</disp_name>
        <uniq_name>wait</uniq_name>
        <dtype>DOUBLE</dtype>
        <uom>sec</uom>
        <url></url>
        <descr></descr>
      </metric>
    </metric>
  </metrics>
  <program>
    <region id="0" mod="" begin="3" end="9">
      <name>main</name>
      <mangled_name>main</mangled_name>
      <paradigm>user</paradigm>
      <role>function</role>
      <url></url>
      <descr></descr>
    </region>
    <region id="1" mod="" begin="-1" end="-1">
      <name>f</name>
      <mangled_name>f</mangled_name>
      <paradigm>unknown</paradigm>
      <role>unknown</role>
      <url></url>
      <descr></descr>
    </region>
    <cnode id="0" calleeId="0">
      <parameter partype="numeric" parkey="size" parvalue="-4"/>
      <cnode id="1" calleeId="1">
        <parameter partype="string" parkey="comm" parvalue="world&quot;1"/>
      </cnode>
    </cnode>
  </program>
  <system>
    <systemtreenode Id="0">
      <name>cluster</name>
      <class>machine</class>
      <systemtreenode Id="1">
        <name>host</name>
        <class>node</class>
        <locationgroup Id="0">
          <name>rank 0</name>
          <rank>0</rank>
          <type>process</type>
          <location Id="0">
            <name>thread 0</name>
            <rank>0</rank>
            <type>thread</type>
          </location>
        </locationgroup>
      </systemtreenode>
    </systemtreenode>
  </system>
</cube>
"#;
        assert_eq!(xml, want);
    }

    /// Definitions out of order get the file's ids from depth-first order, and location
    /// groups are written before child system-tree nodes.
    #[test]
    fn ids_follow_document_order_not_definition_order() {
        let mut b = CubeBuilder::new();
        let v = b
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
        let t = b
            .metric(
                None,
                MetricDef::new(
                    "time",
                    "Time",
                    units::SECONDS,
                    DataType::Double,
                    MetricKind::Inclusive,
                ),
            )
            .unwrap();
        // A child of the first root, defined last.
        b.metric(
            Some(v),
            MetricDef::new(
                "v2",
                "V2",
                units::OCCURRENCES,
                DataType::Uint64,
                MetricKind::Exclusive,
            ),
        )
        .unwrap();
        let r = b.region(RegionDef::new("r")).unwrap();
        let root = b.cnode(r, None).unwrap();
        let a = b.cnode(r, Some(root)).unwrap();
        let c = b.cnode(r, Some(root)).unwrap();
        let a1 = b.cnode(r, Some(a)).unwrap();
        let top = b.system_tree_node(None, "m", classes::MACHINE).unwrap();
        let node = b.system_tree_node(Some(top), "n", classes::NODE).unwrap();
        let g_node = b
            .location_group(node, "p1", 1, LocationGroupType::Process)
            .unwrap();
        let l_node = b.location(g_node, "t", 0, LocationType::CpuThread).unwrap();
        // Defined after the node's group, but directly below the machine: comes first.
        let g_top = b
            .location_group(top, "p0", 0, LocationGroupType::Process)
            .unwrap();
        let l_top = b
            .location(g_top, "gpu", 0, LocationType::AcceleratorStream)
            .unwrap();
        let cube = b.build().unwrap();
        let d = cube.dimensions();

        assert_eq!(d.metric_file_id, vec![0, 2, 1]);
        assert_eq!([root, a, c, a1].map(|x| d.cnode_file_id(x)), [0, 1, 3, 2]);
        assert_eq!(d.location_file_id(l_top), 0);
        assert_eq!(d.location_file_id(l_node), 1);
        assert_eq!(d.anchor_version(), "4.7");
        let xml = anchor_xml(d);
        let pos = |s: &str| xml.find(s).unwrap_or_else(|| panic!("{s} missing"));
        assert!(pos("<name>p0</name>") < pos("<name>n</name>"));
        assert!(pos("<uniq_name>v2</uniq_name>") < pos("<uniq_name>time</uniq_name>"));
        assert!(xml.contains(r#"<metric id="2" type="INCLUSIVE">"#));
        assert!(xml.contains("<type>accelerator stream</type>"));
        assert!(
            xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<cube version=\"4.7\">\n")
        );
        let _ = t;
    }
}
