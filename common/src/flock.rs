//! An exclusive `flock` on an open file, held until dropped (and released by the kernel
//! when the process dies): how the processes of a job take turns at the merge ledger, and
//! how the ranks of `nccl-scorep exec` agree on one experiment directory.

use std::fs::File;
use std::os::fd::AsRawFd;

/// An exclusive lock on a file, released on drop.
pub struct Flock<'a>(&'a File);

impl<'a> Flock<'a> {
    /// Waits for the exclusive lock on `file` (a directory opened for reading will do).
    pub fn exclusive(file: &'a File) -> std::io::Result<Flock<'a>> {
        loop {
            // SAFETY: the descriptor is open for the life of `file`, which outlives the lock.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(Flock(file));
            }
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        // SAFETY: as above; unlocking a held lock has no other precondition.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}
