//! What every connected stream (TCP, Unix) and its halves share: the owned-buffer methods, the
//! state of the poll-based traits, and splitting into a read half and a write half.

mod halves;
mod methods;
mod slots;

pub(crate) use halves::split_halves;
pub(crate) use methods::{read_methods, write_methods};
pub(crate) use slots::PollSlots;
