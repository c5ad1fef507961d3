//! The NCCL releases nccl-sim can emulate (2.23 … 2.32) and what differs between them, as
//! far as a profiler plugin can see.

use nccl_profiler_abi::loader::ApiVersion;
use std::fmt;
use std::str::FromStr;

/// An NCCL release `2.<minor>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Release {
    minor: u32,
}

pub const OLDEST: Release = Release { minor: 23 };
pub const NEWEST: Release = Release { minor: 32 };

impl Release {
    pub const fn new(minor: u32) -> Release {
        Release { minor }
    }

    pub fn minor(self) -> u32 {
        self.minor
    }

    /// Every release nccl-sim emulates, oldest first.
    pub fn all() -> impl Iterator<Item = Release> {
        (OLDEST.minor..=NEWEST.minor).map(Release::new)
    }

    /// The newest profiler API this release knows: it calls that one directly and shims
    /// every older one.
    pub fn newest_api(self) -> ApiVersion {
        match self.minor {
            ..=23 => 1,
            24 | 25 => 2,
            26 => 3,
            27 => 4,
            28 => 5,
            29 | 30 => 6,
            _ => 7,
        }
    }

    /// 2.26+ also try `libnccl-profiler-<value>.so`; 2.23–2.25 try the value twice.
    pub fn tries_prefixed_name(self) -> bool {
        self.minor >= 26
    }

    /// 2.28+ understand `NCCL_PROFILER_PLUGIN=none` and look in the net plugin library.
    pub fn understands_none(self) -> bool {
        self.minor >= 28
    }

    /// 2.28+ call `finalize` only for a non-NULL context.
    pub fn finalize_needs_context(self) -> bool {
        self.minor >= 28
    }

    /// The API events (GroupApi, CollApi, P2pApi, KernelLaunch) exist from 2.28.
    pub fn has_api_events(self) -> bool {
        self.minor >= 28
    }

    /// KernelCh exists from 2.26, with GPU timestamps from 2.27.
    pub fn has_kernel_ch(self) -> bool {
        self.minor >= 26
    }

    pub fn kernel_ch_has_timestamps(self) -> bool {
        self.minor >= 27
    }

    /// NetPlugin events exist from 2.26.
    pub fn has_net_plugin(self) -> bool {
        self.minor >= 26
    }

    /// CE events from 2.29 (never emitted by core up to 2.31).
    pub fn has_ce_events(self) -> bool {
        self.minor >= 29
    }

    /// KernelPhase and the dedicated profiler thread from 2.31.
    pub fn has_kernel_phase(self) -> bool {
        self.minor >= 31
    }

    pub fn has_profiler_thread(self) -> bool {
        self.minor >= 31
    }

    /// 2.27+ start ProxyOps when appended (with state 19 at first progress); earlier ones
    /// at the first progress call, with the ProxyOp states 0–7.
    pub fn proxy_op_at_append(self) -> bool {
        self.minor >= 27
    }

    /// Up to 2.27, Coll/P2p need a non-NULL Group handle and ProxySteps a non-NULL ProxyOp
    /// handle.
    pub fn children_need_parent_handle(self) -> bool {
        self.minor <= 27
    }

    /// 2.29+ run Broadcast as an AllGatherV task: CollApi only.
    pub fn broadcast_is_allgatherv(self) -> bool {
        self.minor >= 29
    }

    /// 2.31+ clear Group/Coll/P2p handles after stop.
    pub fn clears_task_handles(self) -> bool {
        self.minor >= 31
    }

    /// 2.23–2.25 fill `name` and `commHash` in Coll/P2p (API v1/v2 direct).
    pub fn task_descriptors_carry_comm(self) -> bool {
        self.minor <= 25
    }

    /// What NCCL does when the plugin's `init` returns an error.
    pub fn init_error(self) -> InitErrorHandling {
        match self.minor {
            ..=27 => InitErrorHandling::DisableProcess,
            28 | 29 => InitErrorHandling::KeepContext,
            _ => InitErrorHandling::UnloadAtOnce,
        }
    }
}

/// NCCL's reaction to an `init` error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitErrorHandling {
    /// 2.23–2.27: profiling off for the whole process (and a NULL dereference at unload).
    DisableProcess,
    /// 2.28–2.29: the comm goes on with whatever the plugin wrote into its context.
    KeepContext,
    /// 2.30+: the library reference is dropped at once (and again at finalize).
    UnloadAtOnce,
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "2.{}", self.minor)
    }
}

impl FromStr for Release {
    type Err = String;

    /// `2.28`, `2.28.9` or `28`.
    fn from_str(text: &str) -> Result<Release, String> {
        let mut parts = text.trim().split('.');
        let first: u32 = parts
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("{text:?} is not an NCCL release (e.g. 2.28)"))?;
        let minor = if first == 2 {
            parts
                .next()
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("{text:?} is not an NCCL release (e.g. 2.28)"))?
        } else {
            first
        };
        let release = Release::new(minor);
        if release < OLDEST || release > NEWEST {
            return Err(format!(
                "NCCL {release} has no profiler plugin interface nccl-sim knows ({OLDEST} … {NEWEST})"
            ));
        }
        Ok(release)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_and_know_their_api() {
        assert_eq!("2.28".parse::<Release>().unwrap().newest_api(), 5);
        assert_eq!("2.30.7".parse::<Release>().unwrap().newest_api(), 6);
        assert_eq!("31".parse::<Release>().unwrap().newest_api(), 7);
        assert_eq!(NEWEST.newest_api(), 7);
        assert_eq!(OLDEST.newest_api(), 1);
        assert!("2.22".parse::<Release>().is_err());
        assert!("3.0".parse::<Release>().is_err());
        assert!("x".parse::<Release>().is_err());
        assert_eq!(Release::all().count(), 10);
        // Agrees with the loader's release families.
        for release in Release::all() {
            let family =
                nccl_profiler_abi::loader::ReleaseFamily::of_release(2, release.minor()).unwrap();
            assert_eq!(family.newest_api, release.newest_api(), "{release}");
        }
    }
}
