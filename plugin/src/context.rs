//! Communicator contexts: the value `init` writes into `*context` is a tagged id
//! (slot + generation) into this table, never a pointer.
//!
//! A context stays usable after its own `finalize` until the last context of the process
//! is finalized: children made by `ncclCommSplit` share their parent's proxy thread,
//! which keeps sending ProxyCtrl events with the finalized parent's context.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

const MAGIC: u64 = 0xC7;
/// A context value: magic (8 bits) | salt (24) | generation (16) | slot (16). The salt is
/// wide so that two processes of one node, whose contexts reach each other through PXN,
/// practically never share it (with 8 bits, one pair in 256 did).
const SALT_BITS: u32 = 24;
const SALT_MASK: u32 = (1 << SALT_BITS) - 1;
const GEN_MASK: u32 = (1 << 16) - 1;
const SLOT_BITS: u32 = 16;
/// How many communicator ranks one process can profile at once.
pub const MAX_CONTEXTS: usize = 4096;

const FREE: u32 = 0;
const ACTIVE: u32 = 1;
const DISABLED: u32 = 2;
const FINALIZED: u32 = 3;

/// What `init` told us about a communicator rank.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextInfo {
    /// `commHash` (v4) / `commId` (v5+); 0 for v1–v3, whose `init` has no comm info.
    pub comm_hash: u64,
    pub comm_name: Option<String>,
    pub n_nodes: i32,
    pub n_ranks: i32,
    pub rank: i32,
    /// The profiler API version NCCL used for this `init`.
    pub version: u8,
}

/// The state of a context as the hot path sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextState {
    Active,
    /// Profiling was refused for this context (plugin off, table full).
    Disabled,
    /// Finalized, but kept until the last finalize of the process.
    Finalized,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextError {
    Null,
    /// Not a context this process issued (another process's under PXN, or garbage).
    Foreign,
    /// A context of an earlier init/finalize cycle, or finalized twice.
    Stale,
}

/// Result of a `finalize`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finalized {
    pub info: ContextInfo,
    /// This was the last live context of the process.
    pub last: bool,
}

pub struct Contexts {
    salt: u32,
    /// Per slot: generation << 2 | state.
    states: Box<[AtomicU32]>,
    infos: Mutex<Vec<Option<ContextInfo>>>,
    live: AtomicUsize,
}

impl Contexts {
    /// A table whose values carry the low 24 bits of `salt`.
    pub fn new(salt: u32) -> Contexts {
        Contexts {
            salt: salt & SALT_MASK,
            states: (0..MAX_CONTEXTS).map(|_| AtomicU32::new(FREE)).collect(),
            infos: Mutex::new(vec![None; MAX_CONTEXTS]),
            live: AtomicUsize::new(0),
        }
    }

    /// Registers a communicator rank; `None` when the table is full.
    pub fn register(&self, info: ContextInfo, enabled: bool) -> Option<u64> {
        let mut infos = self.infos.lock().unwrap_or_else(|e| e.into_inner());
        let slot = (0..MAX_CONTEXTS)
            .find(|&slot| self.states[slot].load(Ordering::Acquire) & 3 == FREE)?;
        let generation = ((self.states[slot].load(Ordering::Acquire) >> 2) + 1) & GEN_MASK;
        infos[slot] = Some(info);
        let state = if enabled { ACTIVE } else { DISABLED };
        self.states[slot].store(generation << 2 | state, Ordering::Release);
        self.live.fetch_add(1, Ordering::AcqRel);
        Some(self.encode(generation, slot))
    }

    /// The hot-path check of a context value: one decode and one atomic load.
    #[inline]
    pub fn state(&self, value: u64) -> Result<ContextState, ContextError> {
        let (generation, slot) = self.decode(value)?;
        let word = self.states[slot].load(Ordering::Acquire);
        if word >> 2 != generation {
            return Err(ContextError::Stale);
        }
        Ok(match word & 3 {
            ACTIVE => ContextState::Active,
            DISABLED => ContextState::Disabled,
            FINALIZED => ContextState::Finalized,
            _ => return Err(ContextError::Stale),
        })
    }

    /// Marks a context finalized (it stays readable until [`Contexts::clear`]).
    pub fn finalize(&self, value: u64) -> Result<Finalized, ContextError> {
        let (generation, slot) = self.decode(value)?;
        let infos = self.infos.lock().unwrap_or_else(|e| e.into_inner());
        let word = self.states[slot].load(Ordering::Acquire);
        if word >> 2 != generation || !matches!(word & 3, ACTIVE | DISABLED) {
            return Err(ContextError::Stale);
        }
        self.states[slot].store(generation << 2 | FINALIZED, Ordering::Release);
        let last = self.live.fetch_sub(1, Ordering::AcqRel) == 1;
        Ok(Finalized {
            info: infos[slot].clone().unwrap_or_default(),
            last,
        })
    }

    /// What `init` said about a context (also after its finalize).
    pub fn info(&self, value: u64) -> Option<ContextInfo> {
        let (generation, slot) = self.decode(value).ok()?;
        let infos = self.infos.lock().unwrap_or_else(|e| e.into_inner());
        let word = self.states[slot].load(Ordering::Acquire);
        (word >> 2 == generation && word & 3 != FREE)
            .then(|| infos[slot].clone())
            .flatten()
    }

    /// Frees every finalized context: after the last finalize, all ids become stale.
    pub fn clear(&self) {
        let mut infos = self.infos.lock().unwrap_or_else(|e| e.into_inner());
        for (slot, info) in infos.iter_mut().enumerate() {
            let word = self.states[slot].load(Ordering::Acquire);
            if word & 3 == FINALIZED {
                self.states[slot].store(word & !3, Ordering::Release);
                *info = None;
            }
        }
    }

    /// The table slot of a context value this process issued (any state, any cycle).
    pub fn slot_of(&self, value: u64) -> Option<usize> {
        self.decode(value).ok().map(|(_, slot)| slot)
    }

    /// Live (not yet finalized) contexts.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    fn encode(&self, generation: u32, slot: usize) -> u64 {
        MAGIC << 56
            | u64::from(self.salt) << (SLOT_BITS + 16)
            | u64::from(generation & GEN_MASK) << SLOT_BITS
            | slot as u64
    }

    fn decode(&self, value: u64) -> Result<(u32, usize), ContextError> {
        if value == 0 {
            return Err(ContextError::Null);
        }
        let slot = (value & ((1 << SLOT_BITS) - 1)) as usize;
        if value >> 56 != MAGIC
            || (value >> (SLOT_BITS + 16)) & u64::from(SALT_MASK) != u64::from(self.salt)
            || slot >= MAX_CONTEXTS
        {
            return Err(ContextError::Foreign);
        }
        Ok((((value >> SLOT_BITS) as u32) & GEN_MASK, slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(hash: u64, rank: i32) -> ContextInfo {
        ContextInfo {
            comm_hash: hash,
            rank,
            n_ranks: 4,
            ..ContextInfo::default()
        }
    }

    #[test]
    fn contexts_live_until_the_last_finalize() {
        let contexts = Contexts::new(7);
        let parent = contexts.register(info(1, 0), true).unwrap();
        let child = contexts.register(info(2, 0), true).unwrap();
        assert_ne!(parent, child);
        let done = contexts.finalize(parent).unwrap();
        assert!(!done.last);
        assert_eq!(done.info.comm_hash, 1);
        // The parent's proxy thread still uses its context.
        assert_eq!(contexts.state(parent), Ok(ContextState::Finalized));
        assert_eq!(contexts.finalize(parent), Err(ContextError::Stale));
        assert!(contexts.finalize(child).unwrap().last);
        contexts.clear();
        assert_eq!(contexts.state(parent), Err(ContextError::Stale));
        // A new cycle never reuses an old id.
        let again = contexts.register(info(1, 0), true).unwrap();
        assert_ne!(again, parent);
        assert_eq!(contexts.state(again), Ok(ContextState::Active));
    }

    #[test]
    fn foreign_and_null_contexts_are_recognized() {
        let contexts = Contexts::new(7);
        let other_process = Contexts::new(8);
        let theirs = other_process.register(info(1, 1), true).unwrap();
        assert_eq!(contexts.state(theirs), Err(ContextError::Foreign));
        assert_eq!(contexts.state(0), Err(ContextError::Null));
        assert_eq!(contexts.state(0x7f00_dead_beef), Err(ContextError::Foreign));
        let disabled = contexts.register(info(3, 0), false).unwrap();
        assert_eq!(contexts.state(disabled), Ok(ContextState::Disabled));
    }
}
