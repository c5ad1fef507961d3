//! Reading the C strings NCCL passes (operation, type, algorithm and communicator names)
//! without reading past readable memory.
//!
//! NCCL passes string literals, but nothing it passes is trusted: a string without its NUL
//! that ends where mapped memory ends would make `strlen` fault and take the application
//! with it. A string is read up to a bound, and each 4 KiB granule it touches must be known
//! readable first: a granule is checked once (by asking the kernel to copy the string's
//! first byte in it into a pipe, which fails with `EFAULT` instead of faulting) and
//! remembered in a small table, so the callback path pays a table lookup per string.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The unit whose readability is checked (the smallest page size of the machines NCCL
/// runs on; larger pages are made of such granules).
const GRANULE: usize = 4096;

/// The longest operation, type, algorithm or protocol name read (NCCL's are under 32).
pub const MAX_NAME: usize = 64;
/// The longest communicator name read.
pub const MAX_COMM_NAME: usize = 1024;

/// Granules known readable: granule number + 1 (0 is empty), direct-mapped.
static READABLE: [AtomicUsize; 1024] = [const { AtomicUsize::new(0) }; 1024];

/// The pipe the probe copies into: (read end, write end), or `None` if it cannot be made
/// (then strings are trusted, as before this check existed).
static PROBE: OnceLock<Option<(OwnedFd, OwnedFd)>> = OnceLock::new();

fn probe_pipe() -> Option<&'static (OwnedFd, OwnedFd)> {
    PROBE
        .get_or_init(|| {
            let mut fds = [0; 2];
            // SAFETY: `fds` has room for the two descriptors pipe2 writes.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
                return None;
            }
            // SAFETY: both descriptors were just opened and are owned here alone.
            Some(unsafe {
                (
                    <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[0]),
                    <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[1]),
                )
            })
        })
        .as_ref()
}

/// Whether the granule holding `address` can be read.
#[inline]
fn readable(address: usize) -> bool {
    let granule = address / GRANULE;
    READABLE[granule % READABLE.len()].load(Ordering::Relaxed) == granule + 1 || probe(address)
}

/// Asks the kernel whether the byte at `address` (the next one a string read touches) can
/// be read, and remembers its granule when it can.
#[cold]
#[inline(never)]
fn probe(address: usize) -> bool {
    let granule = address / GRANULE;
    let slot = &READABLE[granule % READABLE.len()];
    let Some((read_end, write_end)) = probe_pipe() else {
        return true;
    };
    // SAFETY: `write` reads the one byte at `address` in the kernel, which reports an
    // unreadable address as EFAULT instead of faulting.
    let written = unsafe { libc::write(write_end.as_raw_fd(), address as *const libc::c_void, 1) };
    if written == 1 {
        let mut byte = 0u8;
        // SAFETY: reads the probe's byte back into a local (the pipe is non-blocking).
        unsafe { libc::read(read_end.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) };
        slot.store(granule + 1, Ordering::Relaxed);
        return true;
    }
    // EFAULT: not readable. Anything else (a full pipe): do not refuse a string for it.
    std::io::Error::last_os_error().raw_os_error() != Some(libc::EFAULT)
}

/// Forgets which memory was readable (a library may be unloaded after the last finalize,
/// and other mappings take its place).
pub fn forget_readable_memory() {
    for slot in &READABLE {
        slot.store(0, Ordering::Relaxed);
    }
}

/// The bytes of the NUL-terminated string at `ptr`, without the NUL, or `None` when `ptr`
/// is NULL, reaches unreadable memory, or has no NUL within `max` bytes.
///
/// # Safety
/// The memory, once found readable, must stay so while the returned slice is used (true
/// of the string literals and names NCCL passes, for the duration of the call).
#[inline]
pub unsafe fn bounded<'a>(ptr: *const libc::c_char, max: usize) -> Option<&'a [u8]> {
    if ptr.is_null() {
        return None;
    }
    let start = ptr as usize;
    let mut len = 0;
    while len < max {
        let address = start.checked_add(len)?;
        if !readable(address) {
            return None;
        }
        // The rest of this granule, within the bound: readable as a whole.
        let in_granule = (GRANULE - address % GRANULE).min(max - len);
        // SAFETY: `in_granule` bytes from `address` lie in the granule found readable.
        let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, in_granule) };
        if let Some(nul) = bytes.iter().position(|&b| b == 0) {
            // SAFETY: `len + nul` readable bytes from `start`, checked granule by granule.
            return Some(unsafe { std::slice::from_raw_parts(start as *const u8, len + nul) });
        }
        len += in_granule;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pages: the first readable, the second not.
    fn guarded_pages() -> (*mut u8, usize) {
        // SAFETY: an anonymous private mapping of two pages, then the second made
        // unreadable; unmapped at the end of the test.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
            let base = libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            assert_eq!(
                libc::mprotect(base.cast::<u8>().add(page).cast(), page, libc::PROT_NONE),
                0
            );
            (base.cast(), page)
        }
    }

    #[test]
    fn a_string_that_runs_into_unreadable_memory_is_refused_not_read_past() {
        let (base, page) = guarded_pages();
        // SAFETY: writes inside the first (readable) page, then reads through `bounded`.
        unsafe {
            let end = base.add(page);
            // "AllReduce" without a NUL, ending at the last byte of the readable page.
            let text = b"AllReduce";
            let unterminated = end.sub(text.len());
            std::ptr::copy_nonoverlapping(text.as_ptr(), unterminated, text.len());
            assert_eq!(bounded(unterminated.cast(), 64), None);
            // The same with its NUL as the page's last byte: read whole.
            let terminated = end.sub(text.len() + 1);
            std::ptr::copy_nonoverlapping(text.as_ptr(), terminated, text.len());
            *end.sub(1) = 0;
            assert_eq!(bounded(terminated.cast(), 64), Some(&text[..]));
            // A pointer into the unreadable page, and a string longer than the bound.
            assert_eq!(bounded(end.cast(), 64), None);
            std::ptr::write_bytes(base, b'x', 100);
            assert_eq!(bounded(base.cast(), 64), None);
            assert_eq!(bounded(std::ptr::null(), 64), None);
            assert_eq!(bounded(c"Send".as_ptr(), 64), Some(&b"Send"[..]));
            libc::munmap(base.cast(), 2 * page);
        }
        forget_readable_memory();
    }
}
