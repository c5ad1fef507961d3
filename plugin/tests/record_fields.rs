//! Record mode copies a descriptor's and a state's fields, not the bytes a C caller left
//! between and after them: those are 0 in the recording.

mod support;

use nccl_profiler_abi::{event_type as t, state, v7, StateArgsV4};
use nccl_scorep_common::recording::{Call, Entry, Recording};
use std::ffi::c_void;
use std::mem::{offset_of, size_of};
use support::*;

type D7 = v7::ncclProfilerEventDescr_v7_t;

/// What a C caller's stack held before it filled in a struct.
const LEFT_OVER: u8 = 0xAB;

/// Bytes as aligned as any descriptor, all [`LEFT_OVER`].
#[repr(C, align(8))]
struct StackBytes<const N: usize>([u8; N]);

impl<const N: usize> StackBytes<N> {
    fn new() -> Self {
        StackBytes([LEFT_OVER; N])
    }
}

/// The one recording in the plugin's output directory.
fn recording_of(plugin: &Plugin) -> Recording {
    let mut found = Vec::new();
    let mut dirs = vec![plugin.out_dir()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.to_string_lossy().contains(".ncclrec") {
                found.push(path);
            }
        }
    }
    assert_eq!(found.len(), 1, "{found:?}");
    Recording::read_file(&found[0]).unwrap()
}

#[test]
fn a_recording_holds_the_fields_and_zeros_where_the_caller_left_its_bytes() {
    let plugin = Plugin::load(&[("NCCL_SCOREP_MODE", "jsonl,record")]);
    let (ctx, _) = plugin.init_v7(0x5eed, Some(c"fields"), 3, 4);

    // A CollApi descriptor filled in field by field over left-over bytes, as C does:
    // its padding and the union past the member keep what was there.
    let mut descr = StackBytes::<{ size_of::<D7>() }>::new();
    let d = descr.0.as_mut_ptr().cast::<D7>();
    let mut handle = std::ptr::null_mut::<c_void>();
    // SAFETY: the bytes are as large and as aligned as a descriptor; each write sets one
    // field and no other byte; the strings are static.
    unsafe {
        (*d).type_ = t::COLL_API;
        (*d).parentObj = std::ptr::null_mut();
        (*d).rank = 3;
        (*d).u.collApi.func = c"AllReduce".as_ptr();
        (*d).u.collApi.count = 0x0102_0304;
        (*d).u.collApi.datatype = c"ncclFloat32".as_ptr();
        (*d).u.collApi.root = 7;
        (*d).u.collApi.stream = std::ptr::null_mut();
        (*d).u.collApi.graphCaptured = nccl_profiler_abi::CBool(1);
        (*d).u.collApi.userTag = 0x0506_0708;
        assert_eq!((plugin.v7().startEvent)(ctx.0, &mut handle, d), 0);
    }
    plugin.stop7(Handle(handle));

    // State arguments: `appendedProxyOps` is 4 of the union's 8 bytes; state 19 comes
    // with none set.
    let mut appended = StackBytes::<{ size_of::<StateArgsV4>() }>::new();
    let mut unset = StackBytes::<{ size_of::<StateArgsV4>() }>::new();
    let ctrl = plugin.start7(
        ctx,
        &mut plain7(t::PROXY_CTRL, Handle(std::ptr::null_mut())),
    );
    // SAFETY: as above, for the state-argument union.
    unsafe {
        let args = appended.0.as_mut_ptr().cast::<StateArgsV4>();
        (*args).appendedProxyOps = 5;
        (plugin.v7().recordEventState)(ctrl.0, state::PROXY_CTRL_APPEND, args);
        let args = unset.0.as_mut_ptr().cast::<StateArgsV4>();
        (plugin.v7().recordEventState)(ctrl.0, state::PROXY_OP_IN_PROGRESS_V4, args);
    }
    plugin.stop7(ctrl);
    plugin.finalize7(ctx);

    let recording = recording_of(&plugin);
    let calls: Vec<&Call> = recording
        .entries
        .iter()
        .filter_map(|entry| match entry {
            Entry::Call { call, .. } => Some(call),
            _ => None,
        })
        .collect();
    let Some(Call::Start { descr: bytes, .. }) = calls.iter().copied().find(
        |call| matches!(call, Call::Start { descr, .. } if descr[..8] == t::COLL_API.to_le_bytes()),
    ) else {
        panic!("no CollApi start in {calls:?}");
    };
    assert_eq!(bytes.len(), size_of::<D7>());
    let u = offset_of!(D7, u);
    let field = |offset: usize, len: usize| &bytes[u + offset..u + offset + len];
    // The fields, as written.
    assert_eq!(bytes[16..20], 3i32.to_le_bytes());
    assert_eq!(field(8, 8), 0x0102_0304usize.to_le_bytes());
    assert_eq!(field(24, 4), 7i32.to_le_bytes());
    assert_eq!(field(40, 1), [1]);
    assert_eq!(field(48, 8), 0x0506_0708u64.to_le_bytes());
    // Zeros where the caller left its bytes: after `rank`, after `root`, after
    // `graphCaptured`, and the union past the 56-byte member.
    let left_over: Vec<usize> = (20..24)
        .chain(u + 28..u + 32)
        .chain(u + 41..u + 48)
        .chain(u + 56..size_of::<D7>())
        .collect();
    for &at in &left_over {
        assert_eq!(bytes[at], 0, "byte {at} of {bytes:?}");
    }

    let args: Vec<(i32, &Vec<u8>)> = calls
        .iter()
        .filter_map(|call| match call {
            Call::State {
                state,
                args: Some(args),
                ..
            } => Some((*state, args)),
            _ => None,
        })
        .collect();
    assert_eq!(
        args,
        [
            (state::PROXY_CTRL_APPEND, &vec![5, 0, 0, 0, 0, 0, 0, 0]),
            (state::PROXY_OP_IN_PROGRESS_V4, &vec![0; 8]),
        ]
    );
}
