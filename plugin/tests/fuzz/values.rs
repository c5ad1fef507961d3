//! What the sequence fuzzer hands the plugin: descriptors of every API version filled with
//! random bytes or zeros, whose members the plugin dereferences point at strings NCCL
//! could pass (or at strings that end exactly where mapped memory ends), state arguments,
//! and integers from ordinary to extreme.

use nccl_profiler_abi::{
    self as abi, v1, v2, v3, v4, v5, v6, v7, NetPluginDescr, StateArgsV1, StateArgsV4,
};
use nccl_profiler_scorep::event::Kind;
use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;
use std::ffi::{c_char, c_void, CStr};

pub type FuzzRng = ChaCha8Rng;

const PAGE: usize = 4096;

/// An integer NCCL could pass, or an extreme one.
pub fn edge_i32(rng: &mut FuzzRng) -> i32 {
    match rng.random_range(0..10) {
        0 => 0,
        1 => -1,
        2 => i32::MIN,
        3 => i32::MAX,
        4 => 2_000_000_000,
        5..=7 => rng.random_range(0..64),
        _ => rng.random(),
    }
}

/// A rank or rank count: mostly a few small ones (each new one makes trace locations,
/// which cost time to write), now and then an extreme one.
pub fn rank(rng: &mut FuzzRng) -> i32 {
    if rng.random_bool(0.9) {
        rng.random_range(0..4)
    } else {
        edge_i32(rng)
    }
}

/// A communicator id: mostly one of a few, now and then an extreme one.
pub fn comm_id(rng: &mut FuzzRng) -> u64 {
    if rng.random_bool(0.9) {
        rng.random_range(1..8)
    } else {
        edge_u64(rng)
    }
}

pub fn edge_u64(rng: &mut FuzzRng) -> u64 {
    match rng.random_range(0..8) {
        0 => 0,
        1 => u64::MAX,
        2 => 1 << 63,
        3..=5 => rng.random_range(0..1 << 20),
        _ => rng.random(),
    }
}

/// Strings the plugin may be handed, as addresses (shared by all threads of a case):
/// NULL, NCCL's names, unknown and non-UTF-8 bytes, a string longer than any name, and
/// names whose NUL is the last byte of a mapped page followed by a `PROT_NONE` page.
pub struct Strings {
    valid: Vec<usize>,
    /// Strings without a NUL that end at a page followed by `PROT_NONE`: reading one to
    /// its end crashes. Only handed out when the case asks for them.
    unterminated: Vec<usize>,
}

const NAMES: [&CStr; 24] = [
    c"AllReduce",
    c"AllGather",
    c"ReduceScatter",
    c"Broadcast",
    c"Reduce",
    c"Send",
    c"Recv",
    c"SendRecv",
    c"AlltoAll",
    c"PutSignal",
    c"ncclFloat32",
    c"ncclInt8",
    c"ncclBfloat16",
    c"ncclFloat8e5m2",
    c"Unknown",
    c"RING",
    c"TREE",
    c"NVLS",
    c"SIMPLE",
    c"LL",
    c"LL128",
    c"",
    c"Frobnicate",
    c"\xff\xfe\x80 not UTF-8",
];

impl Strings {
    pub fn new() -> Strings {
        let mut valid: Vec<usize> = NAMES.iter().map(|s| s.as_ptr() as usize).collect();
        let long = Box::leak(format!("{}\0", "AllReduce".repeat(2000)).into_boxed_str());
        valid.push(long.as_ptr() as usize);
        for text in [
            &b"AllReduce\0"[..],
            b"ncclFloat32\0",
            b"SIMPLE\0",
            b"Unknown\0",
            b"\0",
            &[b'A'; PAGE - 1][..],
        ] {
            // The whole-page string gets its NUL as the page's last byte.
            let mut bytes = text.to_vec();
            if bytes.last() != Some(&0) {
                bytes.push(0);
            }
            valid.push(at_page_end(&bytes));
        }
        let unterminated = vec![
            at_page_end(b"AllReduce"),
            at_page_end(b"ncclInt8"),
            at_page_end(&[b'A'; PAGE]),
        ];
        Strings {
            valid,
            unterminated,
        }
    }

    /// One string: NULL now and then, an unterminated one only if `unterminated`.
    pub fn pick(&self, rng: &mut FuzzRng, unterminated: bool) -> *const c_char {
        let roll = rng.random_range(0..100);
        let address = if roll < 8 {
            0
        } else if unterminated && roll < 12 {
            self.unterminated[rng.random_range(0..self.unterminated.len())]
        } else {
            self.valid[rng.random_range(0..self.valid.len())]
        };
        address as *const c_char
    }

    /// An unterminated string for the one test that shows what happens with it.
    pub fn unterminated(&self) -> *const c_char {
        self.unterminated[0] as *const c_char
    }
}

/// Copies `bytes` so that its last byte is the last byte of a readable page whose next
/// page is `PROT_NONE`; returns the copy's address (mapped for the rest of the process).
fn at_page_end(bytes: &[u8]) -> usize {
    assert!(bytes.len() <= PAGE);
    // SAFETY: a fresh anonymous mapping of two pages; the second is made inaccessible and
    // only the first is written, within its bounds. Never unmapped.
    unsafe {
        let base = libc::mmap(
            std::ptr::null_mut(),
            2 * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(base, libc::MAP_FAILED, "mmap");
        let guard = base.cast::<u8>().add(PAGE);
        assert_eq!(
            libc::mprotect(guard.cast(), PAGE, libc::PROT_NONE),
            0,
            "mprotect"
        );
        let start = guard.sub(bytes.len());
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), start, bytes.len());
        start as usize
    }
}

/// Where pointer members the plugin dereferences get their values from.
pub struct Pointers<'a> {
    pub rng: &'a mut FuzzRng,
    pub strings: &'a Strings,
    pub unterminated: bool,
    /// A buffer of random bytes large enough for any net-plugin payload.
    pub net_payload: *mut c_void,
}

impl Pointers<'_> {
    pub fn string(&mut self) -> *const c_char {
        self.strings.pick(self.rng, self.unterminated)
    }

    /// A net-plugin member: an id saying IB or socket (version 1, whose payload is
    /// read), another version or garbage, and the payload buffer or NULL.
    pub fn net(&mut self) -> NetPluginDescr {
        let id = match self.rng.random_range(0..5) {
            0 => abi::net::TYPE_IB | 1,
            1 => abi::net::TYPE_SOCK | 1,
            2 => abi::net::TYPE_IB | 2,
            3 => self.rng.random(),
            _ => abi::net::TYPE_SOCK | 1,
        };
        let data = if self.rng.random_range(0..8) == 0 {
            std::ptr::null_mut()
        } else {
            self.net_payload
        };
        NetPluginDescr { id, data }
    }
}

/// A descriptor of one API version, as the fuzzer fills it in.
pub trait FuzzDescr: Copy {
    const VERSION: u8;
    /// The type as this version's field holds it (v1–v4: one byte).
    fn stored_type(bits: u64) -> u64;
    fn header(&mut self, type_bits: u64, parent: u64, rank: i32);
    /// Points the members the plugin dereferences for `kind` at readable memory (or
    /// NULL); everything else keeps its random bytes.
    fn patch(&mut self, kind: Kind, p: &mut Pointers);
}

/// Points every string member of the type the descriptor names at readable memory (or
/// NULL): record mode copies each of them (`fields::string_offsets`), more than the plugin
/// itself reads (v1–v3's `name`, v7's `kernelVariant`, …).
pub fn patch_recorded_strings<D: FuzzDescr>(d: &mut D, bits: u64, p: &mut Pointers) {
    let offsets = nccl_profiler_abi::fields::string_offsets(D::VERSION, D::stored_type(bits));
    for &offset in offsets {
        let pointer = p.string();
        // SAFETY: `offset` is that of a pointer member inside `D` (the fields table's own
        // test checks it); written unaligned, over bytes of a plain C struct.
        unsafe {
            std::ptr::from_mut(d)
                .cast::<u8>()
                .add(offset)
                .cast::<*const c_char>()
                .write_unaligned(pointer)
        };
    }
}

/// A descriptor of `D`: random bytes with probability `garbage`, else zeros as NCCL's own
/// initialisers leave it.
pub fn body<D: FuzzDescr>(rng: &mut FuzzRng, garbage: f64) -> D {
    let mut d = std::mem::MaybeUninit::<D>::zeroed();
    if rng.random_bool(garbage) {
        // SAFETY: the slice covers exactly the descriptor's bytes, which are initialised
        // (zeroed above).
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(d.as_mut_ptr().cast::<u8>(), size_of::<D>()) };
        rng.fill_bytes(bytes);
    }
    // SAFETY: every descriptor holds only integers, raw pointers, one-byte C bools and
    // unions of them: any byte pattern is a valid value.
    unsafe { d.assume_init() }
}

macro_rules! header {
    ($type_:ty) => {
        fn stored_type(bits: u64) -> u64 {
            u64::from(bits as $type_)
        }
        fn header(&mut self, type_bits: u64, parent: u64, rank: i32) {
            self.type_ = type_bits as $type_;
            self.parentObj = parent as usize as *mut c_void;
            self.rank = rank;
        }
    };
}

/// Coll and P2p of v2 and later: the same string members.
macro_rules! patch_tasks {
    ($d:ident, $kind:ident, $p:ident) => {
        match $kind {
            Kind::Coll => {
                $d.u.coll.func = $p.string();
                $d.u.coll.datatype = $p.string();
                $d.u.coll.algo = $p.string();
                $d.u.coll.proto = $p.string();
            }
            Kind::P2p => {
                $d.u.p2p.func = $p.string();
                $d.u.p2p.datatype = $p.string();
            }
            _ => {}
        }
    };
}

/// The API events of v5 and later, and the net-plugin member (v3 and later).
macro_rules! patch_api_and_net {
    ($d:ident, $kind:ident, $p:ident) => {
        match $kind {
            Kind::CollApi => {
                $d.u.collApi.func = $p.string();
                $d.u.collApi.datatype = $p.string();
            }
            Kind::P2pApi => {
                $d.u.p2pApi.func = $p.string();
                $d.u.p2pApi.datatype = $p.string();
            }
            Kind::NetPlugin => $d.u.netPlugin = $p.net(),
            _ => {}
        }
    };
}

impl FuzzDescr for v1::ncclProfilerEventDescr_v1_t {
    const VERSION: u8 = 1;
    header!(u8);
    // v1 passes enum numbers, not strings: nothing is dereferenced.
    fn patch(&mut self, _: Kind, _: &mut Pointers) {}
}

impl FuzzDescr for v2::ncclProfilerEventDescr_v2_t {
    const VERSION: u8 = 2;
    header!(u8);
    fn patch(&mut self, kind: Kind, p: &mut Pointers) {
        patch_tasks!(self, kind, p);
    }
}

impl FuzzDescr for v3::ncclProfilerEventDescr_v3_t {
    const VERSION: u8 = 3;
    header!(u8);
    fn patch(&mut self, kind: Kind, p: &mut Pointers) {
        patch_tasks!(self, kind, p);
        if kind == Kind::NetPlugin {
            self.u.netPlugin = p.net();
        }
    }
}

impl FuzzDescr for v4::ncclProfilerEventDescr_v4_t {
    const VERSION: u8 = 4;
    header!(u8);
    fn patch(&mut self, kind: Kind, p: &mut Pointers) {
        patch_tasks!(self, kind, p);
        if kind == Kind::NetPlugin {
            self.u.netPlugin = p.net();
        }
    }
}

impl FuzzDescr for v5::ncclProfilerEventDescr_v5_t {
    const VERSION: u8 = 5;
    header!(u64);
    fn patch(&mut self, kind: Kind, p: &mut Pointers) {
        patch_tasks!(self, kind, p);
        patch_api_and_net!(self, kind, p);
    }
}

impl FuzzDescr for v6::ncclProfilerEventDescr_v6_t {
    const VERSION: u8 = 6;
    header!(u64);
    fn patch(&mut self, kind: Kind, p: &mut Pointers) {
        patch_tasks!(self, kind, p);
        patch_api_and_net!(self, kind, p);
        if kind == Kind::CeColl {
            self.u.ceColl.func = p.string();
            self.u.ceColl.datatype = p.string();
        }
    }
}

impl FuzzDescr for v7::ncclProfilerEventDescr_v7_t {
    const VERSION: u8 = 7;
    header!(u64);
    fn patch(&mut self, kind: Kind, p: &mut Pointers) {
        patch_tasks!(self, kind, p);
        patch_api_and_net!(self, kind, p);
        if kind == Kind::CeColl {
            self.u.ceColl.func = p.string();
            self.u.ceColl.datatype = p.string();
        }
    }
}

/// State arguments of one API version, with random contents.
pub trait FuzzArgs: Copy {
    fn random(rng: &mut FuzzRng) -> Self;
}

impl FuzzArgs for StateArgsV1 {
    fn random(rng: &mut FuzzRng) -> Self {
        StateArgsV1 {
            proxyOp: abi::StateArgsV1ProxyOp {
                transSize: edge_u64(rng) as usize,
                steps: edge_i32(rng),
            },
        }
    }
}

impl FuzzArgs for StateArgsV4 {
    fn random(rng: &mut FuzzRng) -> Self {
        StateArgsV4 {
            transSize: edge_u64(rng) as usize,
        }
    }
}
