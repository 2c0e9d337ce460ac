//! The preallocated table of operation slots, addressed by `user_data`.
//!
//! `user_data` = `generation << 32 | index`. A slot's generation changes every time it is freed,
//! so a CQE that arrives for a slot that was reused is recognised and dropped: a late CQE
//! never completes a newer operation.
//! In this driver a slot is only freed after its final CQE, so that never happens by design; the
//! generation is the second line of defence.

use std::task::{Poll, Waker};

use crate::lifecycle::{Completion, Lifecycle};

/// `user_data` values with an index no slot can have, for the driver's own SQEs.
pub(crate) mod tag {
    /// An `ASYNC_CANCEL` SQE.
    pub const CANCEL: u64 = u32::MAX as u64;
    /// The poll on the runtime's wake-up eventfd.
    pub const WAKE: u64 = u32::MAX as u64 - 1;
    /// A wake-up message posted from another thread (`IORING_OP_MSG_RING`, see `msg_ring`).
    pub const MSG_WAKE: u64 = u32::MAX as u64 - 2;
    /// Highest number of slots a table may have.
    pub const MAX_SLOTS: usize = 1 << 24;

    /// Whether `user_data` is one of the driver's own tags rather than a slot's.
    pub fn is_tag(user_data: u64) -> bool {
        (user_data as u32) as usize >= MAX_SLOTS
    }
}

struct Slot {
    generation: u32,
    /// The operation counts against the in-flight cap (see `Lifecycle::counts_against_cap`).
    counted: bool,
    state: Option<Lifecycle>,
}

/// The slot table: a fixed capacity, a free list, no allocation after construction.
pub(crate) struct Slots {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Slots in use whose operation counts against the in-flight cap.
    counted: usize,
}

impl Slots {
    /// A table of `capacity` slots.
    pub(crate) fn new(capacity: usize) -> Slots {
        let capacity = capacity.clamp(1, tag::MAX_SLOTS);
        Slots {
            slots: (0..capacity)
                .map(|_| Slot {
                    generation: 0,
                    counted: false,
                    state: None,
                })
                .collect(),
            free: (0..capacity as u32).rev().collect(),
            counted: 0,
        }
    }

    /// Number of slots in use.
    #[inline]
    pub(crate) fn in_use(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Number of slots.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Number of slots in use whose operation counts against the in-flight cap.
    #[inline]
    pub(crate) fn counted_in_use(&self) -> usize {
        self.counted
    }

    /// Frees slot `index` (its state already taken): a new generation, back on the free list.
    #[inline(always)]
    fn release(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        slot.generation = slot.generation.wrapping_add(1);
        if slot.counted {
            slot.counted = false;
            self.counted -= 1;
        }
        self.free.push(index as u32);
    }

    /// Takes a free slot in state `state`; returns its `user_data`.
    #[inline(always)]
    pub(crate) fn insert(&mut self, state: Lifecycle) -> Option<u64> {
        let index = self.free.pop()?;
        let counted = state.counts_against_cap();
        self.counted += usize::from(counted);
        let slot = &mut self.slots[index as usize];
        slot.counted = counted;
        // A free slot holds no state: `replace` rather than assign, so this path carries no
        // drop glue for the (absent) old state.
        if let Some(old) = slot.state.replace(state) {
            debug_assert!(false, "a free slot held a state");
            drop(old);
        }
        Some((u64::from(slot.generation) << 32) | u64::from(index))
    }

    /// The live slot `user_data` names, or `None` if it is free or of another generation.
    #[inline]
    pub(crate) fn get_mut(&mut self, user_data: u64) -> Option<&mut Lifecycle> {
        let index = (user_data & 0xffff_ffff) as usize;
        let generation = (user_data >> 32) as u32;
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.state.as_mut()
    }

    /// Polls the live slot `user_data` (`None` if it is free or of another generation); a
    /// slot whose operation completed is freed in the same lookup.
    #[inline(always)]
    pub(crate) fn poll(&mut self, user_data: u64, waker: &Waker) -> Option<Poll<Completion>> {
        let index = (user_data & 0xffff_ffff) as usize;
        let generation = (user_data >> 32) as u32;
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        // The common case first: the result is there. Taking the state out by value and
        // matching `Completed` (which owns nothing) frees the slot with no drop glue.
        let state = slot.state.take();
        match state {
            Some(Lifecycle::Completed(c)) => {
                // `Completed` owns nothing: forgetting it skips a call to the drop glue.
                std::mem::forget(state);
                self.release(index);
                Some(Poll::Ready(c))
            }
            Some(mut state) => {
                let polled = state.poll(waker);
                if polled.is_ready() {
                    // `poll` is only ready on `Completed`, handled above.
                    self.release(index);
                } else {
                    slot.state = Some(state);
                }
                Some(polled)
            }
            None => None,
        }
    }

    /// Frees the slot `user_data` names (no-op if it is stale).
    #[inline]
    pub(crate) fn remove(&mut self, user_data: u64) -> Option<Lifecycle> {
        let index = (user_data & 0xffff_ffff) as usize;
        let generation = (user_data >> 32) as u32;
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let state = slot.state.take()?;
        self.release(index);
        Some(state)
    }

    /// The `user_data` of every live slot.
    pub(crate) fn live(&self) -> impl Iterator<Item = (u64, &Lifecycle)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.state
                .as_ref()
                .map(|st| ((u64::from(s.generation) << 32) | i as u64, st))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_user_data_is_rejected() {
        let mut s = Slots::new(2);
        let a = s.insert(Lifecycle::Submitted).unwrap();
        assert!(s.get_mut(a).is_some());
        assert!(s.remove(a).is_some());
        let b = s.insert(Lifecycle::Submitted).unwrap();
        // Same index (the free list is LIFO), new generation.
        assert_eq!(a & 0xffff_ffff, b & 0xffff_ffff);
        assert_ne!(a, b);
        assert!(
            s.get_mut(a).is_none(),
            "a late CQE must not reach the new op"
        );
        assert!(s.remove(a).is_none());
        assert!(s.get_mut(b).is_some());
    }

    #[test]
    fn capacity_is_fixed() {
        let mut s = Slots::new(3);
        let ids: Vec<_> = (0..3)
            .map(|_| s.insert(Lifecycle::Submitted).unwrap())
            .collect();
        assert!(s.insert(Lifecycle::Submitted).is_none());
        assert_eq!(s.in_use(), 3);
        s.remove(ids[1]);
        assert_eq!(s.in_use(), 2);
        assert!(s.insert(Lifecycle::Submitted).is_some());
        assert_eq!(s.live().count(), 3);
    }

    #[test]
    fn uncapped_streams_are_not_counted() {
        use crate::lifecycle::Stream;
        let mut s = Slots::new(4);
        let a = s.insert(Lifecycle::Submitted).unwrap();
        let b = s
            .insert(Lifecycle::Streaming(Stream::new(None).uncapped(true)))
            .unwrap();
        let c = s.insert(Lifecycle::Streaming(Stream::new(None))).unwrap();
        assert_eq!((s.in_use(), s.counted_in_use()), (3, 2));
        s.remove(b);
        assert_eq!((s.in_use(), s.counted_in_use()), (2, 2));
        s.remove(a);
        s.remove(c);
        assert_eq!((s.in_use(), s.counted_in_use()), (0, 0));
        // A reused slot takes the new operation's kind, not the old one's.
        let d = s
            .insert(Lifecycle::Streaming(Stream::new(None).uncapped(true)))
            .unwrap();
        assert_eq!(s.counted_in_use(), 0);
        s.remove(d);
        let _ = s.insert(Lifecycle::Submitted).unwrap();
        assert_eq!(s.counted_in_use(), 1);
    }

    #[test]
    fn tags_are_not_slot_indexes() {
        let mut s = Slots::new(4);
        assert!(s.get_mut(tag::CANCEL).is_none());
        assert!(s.get_mut(tag::WAKE).is_none());
        let _ = s.insert(Lifecycle::Submitted);
        assert!(s.remove(tag::CANCEL).is_none());
    }
}
