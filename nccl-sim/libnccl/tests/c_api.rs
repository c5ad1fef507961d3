//! The CPU-only libnccl's C API called directly, all ranks in this process: one thread
//! makes every rank with `ncclCommInitAll` and drives them in groups, the results are
//! NCCL's, and wrong arguments get NCCL's error codes with a message.

use nccl::{
    ncclAllGather, ncclAllReduce, ncclAlltoAll, ncclBcast, ncclBroadcast, ncclCommCount,
    ncclCommDestroy, ncclCommInitAll, ncclCommSplit, ncclCommUserRank, ncclGetErrorString,
    ncclGetLastError, ncclGetUniqueId, ncclGroupEnd, ncclGroupStart, ncclRecv, ncclReduce,
    ncclReduceScatter, ncclSend, result, Communicator, UniqueId,
};
use std::ffi::{c_int, c_void, CStr};
use std::ptr::{null, null_mut};

const FLOAT32: c_int = 7;
const INT32: c_int = 2;
const SUM: c_int = 0;
const MAX: c_int = 2;
const N: usize = 3;

fn no_plugin() {
    // No profiler plugin: only the data movement is under test here.
    std::env::set_var("NCCL_PROFILER_PLUGIN", "none");
    std::env::set_var("NCCL_SIM_SHM_DIR", std::env::temp_dir());
}

fn ok(code: c_int) {
    assert_eq!(code, result::SUCCESS, "{}", last_error());
}

fn last_error() -> String {
    // SAFETY: ncclGetLastError gives a NUL-terminated string of this thread.
    unsafe { CStr::from_ptr(ncclGetLastError(null_mut())) }
        .to_string_lossy()
        .into_owned()
}

fn comms() -> Vec<*mut Communicator> {
    let mut comms = vec![null_mut(); N];
    // SAFETY: room for N communicators.
    ok(unsafe { ncclCommInitAll(comms.as_mut_ptr(), N as c_int, null()) });
    comms
}

fn send_ptr<T>(v: &[T]) -> *const c_void {
    v.as_ptr().cast()
}

fn recv_ptr<T>(v: &mut [T]) -> *mut c_void {
    v.as_mut_ptr().cast()
}

#[test]
fn one_thread_drives_every_rank_in_groups_and_gets_nccls_results() {
    no_plugin();
    let comms = comms();
    for (rank, &comm) in comms.iter().enumerate() {
        let (mut count, mut me) = (0, -1);
        // SAFETY: live communicators and one int each.
        unsafe {
            ok(ncclCommCount(comm, &mut count));
            ok(ncclCommUserRank(comm, &mut me));
        }
        assert_eq!((count, me), (N as c_int, rank as c_int));
    }
    let inputs: Vec<Vec<f32>> = (0..N)
        .map(|r| vec![r as f32 + 1.0, 10.0 * r as f32])
        .collect();
    let mut sums = vec![vec![0f32; 2]; N];
    let mut maxima = vec![vec![0i32; 1]; N];
    let mut gathered = vec![vec![0i32; N]; N];
    let mut scattered = vec![vec![0i32; 1]; N];
    let mut exchanged = vec![vec![0i32; N]; N];
    let mut broadcast = vec![vec![0f32; 2]; N];
    let mut reduced = vec![vec![-1f32; 2]; N];
    let mut received = vec![vec![0i32; 2]; N];
    // In place from rank 0: everybody's buffer becomes rank 0's.
    let mut in_place: Vec<Vec<i32>> = (0..N).map(|r| vec![r as i32 + 7; 3]).collect();
    let ranks: Vec<Vec<i32>> = (0..N).map(|r| vec![r as i32; N]).collect();
    let to_all: Vec<Vec<i32>> = (0..N)
        .map(|r| (0..N).map(|p| (10 * r + p) as i32).collect())
        .collect();
    let ring: Vec<Vec<i32>> = (0..N).map(|r| vec![r as i32, -(r as i32)]).collect();
    // SAFETY: every buffer is as large as the counts say, and outlives the group.
    unsafe {
        ok(ncclGroupStart());
        for (r, &comm) in comms.iter().enumerate() {
            let s = null_mut();
            ok(ncclAllReduce(
                send_ptr(&inputs[r]),
                recv_ptr(&mut sums[r]),
                2,
                FLOAT32,
                SUM,
                comm,
                s,
            ));
            ok(ncclAllReduce(
                send_ptr(&ranks[r]),
                recv_ptr(&mut maxima[r]),
                1,
                INT32,
                MAX,
                comm,
                s,
            ));
            ok(ncclAllGather(
                send_ptr(&ranks[r]),
                recv_ptr(&mut gathered[r]),
                1,
                INT32,
                comm,
                s,
            ));
            ok(ncclReduceScatter(
                send_ptr(&to_all[r]),
                recv_ptr(&mut scattered[r]),
                1,
                INT32,
                SUM,
                comm,
                s,
            ));
            ok(ncclAlltoAll(
                send_ptr(&to_all[r]),
                recv_ptr(&mut exchanged[r]),
                1,
                INT32,
                comm,
                s,
            ));
            ok(ncclBroadcast(
                send_ptr(&inputs[r]),
                recv_ptr(&mut broadcast[r]),
                2,
                FLOAT32,
                2,
                comm,
                s,
            ));
            ok(ncclBcast(recv_ptr(&mut in_place[r]), 3, INT32, 0, comm, s));
            ok(ncclReduce(
                send_ptr(&inputs[r]),
                recv_ptr(&mut reduced[r]),
                2,
                FLOAT32,
                SUM,
                1,
                comm,
                s,
            ));
            ok(ncclSend(
                send_ptr(&ring[r]),
                2,
                INT32,
                ((r + 1) % N) as c_int,
                comm,
                s,
            ));
            ok(ncclRecv(
                recv_ptr(&mut received[r]),
                2,
                INT32,
                ((r + N - 1) % N) as c_int,
                comm,
                s,
            ));
        }
        ok(ncclGroupEnd());
    }
    for r in 0..N {
        assert_eq!(sums[r], [6.0, 30.0]);
        assert_eq!(maxima[r], [2]);
        assert_eq!(gathered[r], [0, 1, 2]);
        // Rank r gets the sum of everybody's element r: Σ 10 p + r.
        assert_eq!(scattered[r], [30 + 3 * r as i32]);
        assert_eq!(
            exchanged[r],
            (0..N).map(|p| (10 * p + r) as i32).collect::<Vec<_>>()
        );
        assert_eq!(broadcast[r], inputs[2]);
        assert_eq!(in_place[r], [7, 7, 7]);
        let previous = ((r + N - 1) % N) as i32;
        assert_eq!(received[r], [previous, -previous]);
    }
    // Only the root's receive buffer is written by a Reduce.
    assert_eq!(
        reduced,
        [vec![-1.0, -1.0], vec![6.0, 30.0], vec![-1.0, -1.0]]
    );
    for comm in comms {
        ok(ncclCommDestroy(comm));
    }
}

#[test]
fn wrong_arguments_get_nccls_error_codes_and_a_message() {
    no_plugin();
    let comms = comms();
    let mut id = UniqueId { internal: [0; 128] };
    // SAFETY: `id` is writable; every pointer below is valid or deliberately NULL.
    unsafe {
        ok(ncclGetUniqueId(&mut id));
        assert_eq!(&id.internal[..7], b"ncclsim");
        let mut data = [0f32; 4];
        let bad_type = ncclAllReduce(
            send_ptr(&data),
            recv_ptr(&mut data),
            4,
            42,
            SUM,
            comms[0],
            null_mut(),
        );
        assert_eq!(bad_type, result::INVALID_ARGUMENT);
        assert!(
            last_error().contains("unknown data type 42"),
            "{}",
            last_error()
        );
        let bad_op = ncclAllReduce(
            send_ptr(&data),
            recv_ptr(&mut data),
            4,
            FLOAT32,
            9,
            comms[0],
            null_mut(),
        );
        assert_eq!(bad_op, result::INVALID_ARGUMENT);
        let dangling = 0x1000 as *mut Communicator;
        let bad_comm = ncclAllReduce(
            send_ptr(&data),
            recv_ptr(&mut data),
            4,
            FLOAT32,
            SUM,
            dangling,
            null_mut(),
        );
        assert_eq!(bad_comm, result::INVALID_ARGUMENT);
        assert!(
            last_error().contains("is not a communicator"),
            "{}",
            last_error()
        );
        let bad_peer = ncclSend(
            send_ptr(&data),
            4,
            FLOAT32,
            N as c_int,
            comms[0],
            null_mut(),
        );
        assert_eq!(bad_peer, result::INVALID_ARGUMENT);
        assert_eq!(ncclGroupEnd(), result::INVALID_USAGE);
        let mut child = null_mut();
        assert_eq!(
            ncclCommSplit(comms[0], -5, 0, &mut child, null_mut()),
            result::INVALID_ARGUMENT
        );
        let text = CStr::from_ptr(ncclGetErrorString(result::INVALID_USAGE));
        assert!(text.to_str().unwrap().starts_with("invalid usage"));
    }
    for &comm in &comms {
        ok(ncclCommDestroy(comm));
    }
    // A destroyed communicator is refused, not followed.
    let mut count = 0;
    // SAFETY: `count` is one int; the communicator is refused before any use.
    let stale = unsafe { ncclCommCount(comms[0], &mut count) };
    assert_eq!(stale, result::INVALID_ARGUMENT);
    assert_eq!(ncclCommDestroy(comms[1]), result::INVALID_ARGUMENT);
}
