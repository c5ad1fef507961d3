//! Build script of `otf2-sys`: finds the installed OTF2, generates the bindings with
//! bindgen, compiles the C shim, and links OTF2 statically. See README.md.
//!
//! Environment variables read:
//! - `OTF2_CONFIG`: path of the `otf2-config` to ask (default: `otf2-config` on `PATH`).
//!   Without a working `otf2-config`, `pkg-config otf2` is asked instead.
//! - `OTF2_SYS_LINK`: `static` (default) or `dynamic`. Static linking is what keeps our
//!   OTF2 apart from Score-P's; `dynamic` is an escape hatch for an OTF2 installed without
//!   its `.a`, and loses that isolation.

use std::collections::BTreeSet;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The hand-made constants of `src/consts.rs` that a unit test compares with the C headers,
/// and whether their Rust type must also match the C expression's type (size and
/// signedness). The `*_DEFAULT` chunk sizes are plain `int` expressions in C but `u64`
/// here, the type `OTF2_Archive_Open` takes, so only their values are compared.
const HAND_MADE: &[(&str, bool)] = &[
    ("OTF2_UNDEFINED_UINT8", true),
    ("OTF2_UNDEFINED_INT8", true),
    ("OTF2_UNDEFINED_UINT16", true),
    ("OTF2_UNDEFINED_INT16", true),
    ("OTF2_UNDEFINED_UINT32", true),
    ("OTF2_UNDEFINED_INT32", true),
    ("OTF2_UNDEFINED_UINT64", true),
    ("OTF2_UNDEFINED_INT64", true),
    ("OTF2_UNDEFINED_TYPE", true),
    ("OTF2_UNDEFINED_TIMESTAMP", true),
    ("OTF2_UNDEFINED_IO_PARADIGM", true),
    ("OTF2_UNDEFINED_STRING", true),
    ("OTF2_UNDEFINED_ATTRIBUTE", true),
    ("OTF2_UNDEFINED_SYSTEM_TREE_NODE", true),
    ("OTF2_UNDEFINED_LOCATION_GROUP", true),
    ("OTF2_UNDEFINED_LOCATION", true),
    ("OTF2_UNDEFINED_REGION", true),
    ("OTF2_UNDEFINED_CALLSITE", true),
    ("OTF2_UNDEFINED_CALLPATH", true),
    ("OTF2_UNDEFINED_GROUP", true),
    ("OTF2_UNDEFINED_METRIC_MEMBER", true),
    ("OTF2_UNDEFINED_METRIC", true),
    ("OTF2_UNDEFINED_COMM", true),
    ("OTF2_UNDEFINED_PARAMETER", true),
    ("OTF2_UNDEFINED_RMA_WIN", true),
    ("OTF2_UNDEFINED_CART_DIMENSION", true),
    ("OTF2_UNDEFINED_CART_TOPOLOGY", true),
    ("OTF2_UNDEFINED_SOURCE_CODE_LOCATION", true),
    ("OTF2_UNDEFINED_CALLING_CONTEXT", true),
    ("OTF2_UNDEFINED_INTERRUPT_GENERATOR", true),
    ("OTF2_UNDEFINED_IO_FILE", true),
    ("OTF2_UNDEFINED_IO_HANDLE", true),
    ("OTF2_UNDEFINED_MARKER", true),
    ("OTF2_CHUNK_SIZE_MIN", true),
    ("OTF2_CHUNK_SIZE_MAX", true),
    ("OTF2_CHUNK_SIZE_EVENTS_DEFAULT", false),
    ("OTF2_CHUNK_SIZE_DEFINITIONS_DEFAULT", false),
];

/// What was learned about the installed OTF2.
struct Otf2 {
    /// Where the answer came from, for messages.
    source: &'static str,
    version: String,
    include_dirs: Vec<PathBuf>,
    /// `-D`/`-U` flags from the preprocessor flags, passed on to clang and cc.
    defines: Vec<String>,
    lib_dirs: Vec<PathBuf>,
    /// Library names from `-l` flags, in order (`otf2` or `open-trace-format2`).
    libs: Vec<String>,
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=csrc/error_shim.c");
    println!("cargo:rerun-if-env-changed=OTF2_CONFIG");
    println!("cargo:rerun-if-env-changed=OTF2_SYS_LINK");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let otf2 = find_otf2();
    check_version(&otf2);

    generate_bindings(&otf2, &out_dir);
    // The shim refers to OTF2 symbols, so it must come before OTF2 on the link line: cc
    // prints its `rustc-link-lib` now, and rustc keeps the order.
    compile_c(&otf2, &out_dir);
    link_otf2(&otf2);
}

fn find_otf2() -> Otf2 {
    let config = env::var("OTF2_CONFIG").unwrap_or_else(|_| "otf2-config".to_owned());
    if let (Some(cpp), Some(ld), Some(libs), Some(version)) = (
        run(&config, &["--cppflags"]),
        run(&config, &["--ldflags"]),
        run(&config, &["--libs"]),
        run(&config, &["--version"]),
    ) {
        // "otf2-config: version 3.0.2"
        let version = version.rsplit(' ').next().unwrap_or("").trim().to_owned();
        return parse_flags("otf2-config", version, &format!("{cpp} {ld} {libs}"));
    }
    if let (Some(flags), Some(version)) = (
        run("pkg-config", &["--cflags", "--libs", "otf2"]),
        run("pkg-config", &["--modversion", "otf2"]),
    ) {
        return parse_flags("pkg-config otf2", version.trim().to_owned(), &flags);
    }
    panic!(
        "otf2-sys: OTF2 not found: `{config} --cppflags/--ldflags/--libs` (set OTF2_CONFIG to \
         choose another otf2-config) and `pkg-config otf2` both failed. On Debian or Ubuntu \
         install it with `bash scripts/install-deps.sh libotf2-trace-dev libclang-dev` \
         (or `apt-get install libotf2-trace-dev libclang-dev`)."
    );
}

/// Runs a command and returns its stdout if it succeeded.
fn run(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8(output.stdout).ok()
}

fn parse_flags(source: &'static str, version: String, flags: &str) -> Otf2 {
    let mut otf2 = Otf2 {
        source,
        version,
        include_dirs: Vec::new(),
        defines: Vec::new(),
        lib_dirs: Vec::new(),
        libs: Vec::new(),
    };
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-I") {
            otf2.include_dirs.push(PathBuf::from(dir));
        } else if flag.starts_with("-D") || flag.starts_with("-U") {
            otf2.defines.push(flag.to_owned());
        } else if let Some(dir) = flag.strip_prefix("-L") {
            otf2.lib_dirs.push(PathBuf::from(dir));
        } else if let Some(lib) = flag.strip_prefix("-l") {
            otf2.libs.push(lib.to_owned());
        }
    }
    if otf2.libs.is_empty() {
        panic!("otf2-sys: {source} names no library to link (no -l flag in `{flags}`)");
    }
    otf2
}

fn check_version(otf2: &Otf2) {
    let major = otf2.version.split('.').next().unwrap_or("");
    if major != "3" {
        panic!(
            "otf2-sys: {} reports OTF2 version {:?}; these bindings need OTF2 3.x \
             (the 3.0 API changed WriteLocationGroup, WriteComm and WriteClockProperties)",
            otf2.source, otf2.version
        );
    }
    println!("cargo:version={}", otf2.version);
}

fn generate_bindings(otf2: &Otf2, out_dir: &Path) {
    let mut clang_args: Vec<String> = otf2
        .include_dirs
        .iter()
        .map(|dir| format!("-I{}", dir.display()))
        .collect();
    clang_args.extend(otf2.defines.iter().cloned());
    let bindings = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_args(&clang_args)
        .allowlist_item("OTF2_.*")
        .allowlist_item("otf2_.*")
        // The error callback takes a va_list, which stable Rust cannot consume and whose
        // type differs per architecture: it is reached only through the C shim.
        .blocklist_type("OTF2_ErrorCallback")
        .blocklist_function("OTF2_Error_RegisterCallback")
        // Translated as `u32`; src/consts.rs has them as the `u64` OTF2_Archive_Open takes.
        .blocklist_item("OTF2_CHUNK_SIZE_(EVENTS|DEFINITIONS)_DEFAULT")
        // OTF2's "enums" are mostly `typedef uint8_t OTF2_X` plus a separate `enum
        // OTF2_X_enum`; plain constants keep unknown values read from files sound.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(true)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .parse_callbacks(Box::new(CommentsAsText))
        .generate()
        .unwrap_or_else(|err| {
            panic!(
                "otf2-sys: bindgen failed on <otf2/otf2.h> ({err}). It needs libclang: on \
                 Debian or Ubuntu `bash scripts/install-deps.sh libclang-dev`."
            )
        });
    bindings
        .write_to_file(out_dir.join("bindings.rs"))
        .expect("otf2-sys: cannot write bindings.rs");
}

/// Keeps OTF2's Doxygen comments in the generated docs, but as plain text: read as
/// Markdown, an indented line would become a doc test that cannot compile.
#[derive(Debug)]
struct CommentsAsText;

impl bindgen::callbacks::ParseCallbacks for CommentsAsText {
    fn process_comment(&self, comment: &str) -> Option<String> {
        Some(format!("```text\n{}\n```", comment.replace("```", "'''")))
    }
}

fn compile_c(otf2: &Otf2, out_dir: &Path) {
    // Each checked constant becomes three C variables (bits, size, signedness) computed
    // by the C compiler from the real macro, read by the unit test in src/consts.rs.
    let mut c = String::from(
        "/* Generated by otf2-sys/build.rs: the OTF2 macros bindgen cannot translate, as the\n \
         * C compiler sees them. Read only by otf2-sys's unit tests. */\n\
         #include <otf2/otf2.h>\n#include <stdint.h>\n\n\
         /* `(T)-1 < 0` is the signedness test; for unsigned T it is meant to be false. */\n\
         #pragma GCC diagnostic ignored \"-Wtype-limits\"\n\n",
    );
    let mut rs = String::from(
        "// Generated by otf2-sys/build.rs; included by the unit test in src/consts.rs.\n\
         unsafe extern \"C\" {\n",
    );
    let mut table = String::new();
    for (name, typed) in HAND_MADE {
        writeln!(
            c,
            "const uint64_t otf2_sys_hv_bits_{name} = (uint64_t)({name});\n\
             const uint64_t otf2_sys_hv_size_{name} = sizeof({name});\n\
             const int otf2_sys_hv_signed_{name} = ((__typeof__({name}))-1) < 0;"
        )
        .unwrap();
        writeln!(
            rs,
            "    static otf2_sys_hv_bits_{name}: u64;\n    \
             static otf2_sys_hv_size_{name}: u64;\n    \
             static otf2_sys_hv_signed_{name}: core::ffi::c_int;"
        )
        .unwrap();
        writeln!(
            table,
            "        HeaderValue {{\n            name: \"{name}\",\n            typed: {typed},\n            \
             rust_bits: crate::{name} as u64,\n            \
             rust_size: core::mem::size_of_val(&crate::{name}),\n            \
             rust_signed: signed_of(crate::{name}),\n            \
             c_bits: unsafe {{ otf2_sys_hv_bits_{name} }},\n            \
             c_size: unsafe {{ otf2_sys_hv_size_{name} }} as usize,\n            \
             c_signed: unsafe {{ otf2_sys_hv_signed_{name} }} != 0,\n        }},"
        )
        .unwrap();
    }
    writeln!(
        rs,
        "}}\n\npub(super) fn header_values() -> Vec<HeaderValue> {{\n    vec![\n{table}    ]\n}}"
    )
    .unwrap();
    let c_path = out_dir.join("header_values.c");
    fs::write(&c_path, c).expect("otf2-sys: cannot write header_values.c");
    fs::write(out_dir.join("header_values.rs"), rs)
        .expect("otf2-sys: cannot write header_values.rs");

    let mut build = cc::Build::new();
    build
        .file("csrc/error_shim.c")
        .file(&c_path)
        .includes(&otf2.include_dirs)
        .warnings(true)
        .extra_warnings(true);
    for define in &otf2.defines {
        build.flag(define);
    }
    build.compile("otf2_sys_c");
}

fn link_otf2(otf2: &Otf2) {
    let mode = env::var("OTF2_SYS_LINK").unwrap_or_else(|_| "static".to_owned());
    let dynamic = match mode.as_str() {
        "static" => false,
        "dynamic" => true,
        other => panic!("otf2-sys: OTF2_SYS_LINK must be `static` or `dynamic`, not {other:?}"),
    };
    let mut search: BTreeSet<PathBuf> = BTreeSet::new();
    for dir in &otf2.lib_dirs {
        search.insert(dir.clone());
    }
    for lib in &otf2.libs {
        if dynamic {
            println!("cargo:rustc-link-lib=dylib={lib}");
            continue;
        }
        let archive = find_static(lib, &otf2.lib_dirs).unwrap_or_else(|| {
            panic!(
                "otf2-sys: lib{lib}.a not found (searched {:?} from {} and the C compiler's \
                 library path). otf2-sys links OTF2 statically so that a process that also \
                 carries Score-P's OTF2 cannot mix the two; Debian's libotf2-trace-dev ships \
                 the archive. Set OTF2_SYS_LINK=dynamic to link the shared library instead \
                 (without that isolation).",
                otf2.lib_dirs, otf2.source
            )
        });
        let dir = archive
            .parent()
            .expect("an archive path has a parent")
            .to_path_buf();
        search.insert(dir);
        println!("cargo:static_lib={}", archive.display());
        // `-bundle`: the final link gets `-l{lib}` from this directory rather than a copy
        // of the archive inside our rlib, so the archive keeps its name (`lib{lib}.a`) for
        // linker options such as `--exclude-libs`.
        println!("cargo:rustc-link-lib=static:-bundle={lib}");
    }
    for dir in &search {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    // libotf2.a needs nothing beyond libc (checked with `nm -u` on OTF2 3.0.2: no libm,
    // libpthread, libdl or libz symbols), which every Rust program links anyway.
    let includes: Vec<String> = otf2
        .include_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    println!("cargo:include={}", includes.join(":"));
    println!("cargo:lib={}", otf2.libs.join(":"));
    println!("cargo:link={}", if dynamic { "dynamic" } else { "static" });
}

/// Finds `lib<name>.a`: first in the `-L` directories, then where the C compiler would.
fn find_static(name: &str, lib_dirs: &[PathBuf]) -> Option<PathBuf> {
    let file = format!("lib{name}.a");
    for dir in lib_dirs {
        let candidate = dir.join(&file);
        if candidate.is_file() {
            return Some(candidate);
        }
    }
    let compiler = cc::Build::new().cargo_metadata(false).get_compiler();
    let output = Command::new(compiler.path())
        .arg(format!("-print-file-name={file}"))
        .output()
        .ok()?;
    let printed = String::from_utf8(output.stdout).ok()?;
    let candidate = PathBuf::from(printed.trim());
    // The compiler echoes the bare name when it does not find the file.
    if !(candidate.is_absolute() && candidate.is_file()) {
        return None;
    }
    // Tidy `/usr/lib/gcc/x86_64-linux-gnu/12/../../../x86_64-linux-gnu`, keeping the
    // file name itself (often a symlink such as libotf2.a) as it is.
    let dir = candidate.parent()?.canonicalize().ok()?;
    Some(dir.join(file))
}
