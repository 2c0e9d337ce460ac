//! The state of a stream's poll-based traits, whole or apart for its halves.

use crate::poll_io::{Kind, PollIo};

/// The poll-based traits' state of a stream, made on first use: one [`PollIo`] for both
/// directions, or, after a [`split`](crate::net::TcpStream::split), the write direction's
/// apart (merged back when the stream is used whole again).
#[derive(Debug, Default)]
pub(crate) struct PollSlots {
    io: Option<Box<PollIo>>,
    write: Option<Box<PollIo>>,
}

fn new_state() -> Box<PollIo> {
    Box::new(PollIo::new(Kind::Socket))
}

impl PollSlots {
    /// The state of both directions.
    pub(crate) fn whole(&mut self) -> &mut PollIo {
        let io = self.io.get_or_insert_with(new_state);
        if let Some(w) = self.write.take() {
            io.merge_write(*w);
        }
        io
    }

    /// The read direction's state and the write direction's, apart.
    pub(crate) fn halves(&mut self) -> (&mut PollIo, &mut PollIo) {
        let PollSlots { io, write } = self;
        let io = io.get_or_insert_with(new_state);
        let write = match write {
            Some(w) => w,
            None => write.insert(Box::new(io.split_write())),
        };
        (io, write)
    }

    /// The two directions' states for owned halves (`None`: never used).
    pub(crate) fn into_halves(mut self) -> (Option<Box<PollIo>>, Option<Box<PollIo>>) {
        match self.io.take() {
            Some(mut io) => {
                let write = match self.write.take() {
                    Some(w) => w,
                    None => Box::new(io.split_write()),
                };
                (Some(io), Some(write))
            }
            None => (None, self.write.take()),
        }
    }

    /// The state of both directions, merged (for a drop); `None`: never used.
    pub(crate) fn take_whole(&mut self) -> Option<Box<PollIo>> {
        let mut io = self.io.take();
        if let Some(w) = self.write.take() {
            io.get_or_insert_with(new_state).merge_write(*w);
        }
        io
    }

    /// The state of reunited halves.
    pub(crate) fn from_halves(read: Option<Box<PollIo>>, write: Option<Box<PollIo>>) -> PollSlots {
        PollSlots { io: read, write }
    }
}
