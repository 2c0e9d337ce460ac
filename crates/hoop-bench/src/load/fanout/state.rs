//! What the fan-out client's tasks share (one thread: cells suffice): each sender's flow
//! control, the connections' state across resets, and the counts.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::Waker;

use hdrhistogram::Histogram;
use hoop::net::TcpStream;
use hoop::time::Instant;

use crate::load::fanout::verify::{Format, Verifier};
use crate::measure::window::Window;

/// One sender's flow control.
pub(super) struct SenderState {
    /// Next sequence number to send.
    pub(super) next: u64,
    /// Every message below this one was delivered to every connection.
    pub(super) done: u64,
    /// Per message in flight (index `seq & mask`): deliveries still to come.
    pub(super) remaining: Box<[u32]>,
    /// Per message in flight: when it was sent, ns since the client's epoch.
    pub(super) sent_at: Box<[u64]>,
    /// The sender task, waiting for room in its window.
    pub(super) waker: Option<Waker>,
}

/// State shared by the tasks (one thread: cells suffice).
pub(super) struct Shared {
    pub(super) fmt: Rc<Format>,
    /// The server, for rejoins.
    pub(super) addr: SocketAddr,
    pub(super) conns: usize,
    pub(super) window: u64,
    /// Slots of each sender's ring (a power of two, at least `window`) minus one.
    pub(super) mask: u64,
    /// What send and receive times count from.
    pub(super) epoch: Instant,
    /// When deliveries and sent messages count.
    pub(super) counting: Window,
    pub(super) senders: RefCell<Vec<SenderState>>,
    /// Per connection: whether it received a probe.
    pub(super) probed: RefCell<Vec<bool>>,
    pub(super) probed_count: Cell<usize>,
    /// Connections whose receiving side still runs.
    pub(super) alive: Cell<usize>,
    /// Per connection: its stream while it is subscribed; `None` while it rejoins after a reset.
    pub(super) streams: RefCell<Vec<Option<Rc<TcpStream>>>>,
    /// Per connection: since when it has been rejoining (`None` while subscribed).
    pub(super) gone_since: RefCell<Vec<Option<Instant>>>,
    /// Subscribed connections: what each new message is owed to.
    pub(super) present: Cell<u32>,
    /// Per sender: the sequence numbers where one of its connections after a reset started
    /// sending. The messages its lost connection sent last may never have reached the server,
    /// so a receiver may see its stream jump to one of these.
    pub(super) resumes: RefCell<Vec<Vec<u64>>>,
    /// The number of the next rejoin probe, counting from `verify::REJOIN_PROBES`.
    pub(super) next_rejoin: Cell<u64>,
    pub(super) reconnects: Cell<u64>,
    pub(super) deliveries: Cell<u64>,
    pub(super) messages: Cell<u64>,
    pub(super) errors: Cell<u64>,
    pub(super) first_error: RefCell<Option<String>>,
    pub(super) hist: RefCell<Histogram<u64>>,
}

impl Shared {
    /// `n` errors, the first described by `what` (counted until the run stops, so that the
    /// messages found stalled at the deadline count too).
    pub(super) fn errors(&self, n: u64, what: impl FnOnce() -> String) {
        if self.counting.stopped() || n == 0 {
            return;
        }
        self.errors.set(self.errors.get() + n);
        let mut first = self.first_error.borrow_mut();
        if first.is_none() {
            *first = Some(what());
        }
    }

    /// A delivery of (`sender`, `seq`) reached one more connection: the message is done when
    /// it reached all of them, and the sender's window moves on as its oldest messages are done
    /// (each connection receives a sender's messages in order, so they finish in order too).
    /// Returns when the message was sent (ns since the epoch).
    pub(super) fn delivered(&self, sender: u32, seq: u64) -> Option<u64> {
        let mut senders = self.senders.borrow_mut();
        let st = senders.get_mut(sender as usize)?;
        if seq < st.done || seq >= st.next {
            return None;
        }
        let mask = self.mask;
        let slot = (seq & mask) as usize;
        let sent = st.sent_at[slot];
        st.remaining[slot] = st.remaining[slot].saturating_sub(1);
        if seq == st.done {
            while st.done < st.next && st.remaining[(st.done & mask) as usize] == 0 {
                st.done += 1;
            }
            if let Some(w) = st.waker.take() {
                w.wake();
            }
        }
        Some(sent)
    }

    /// Now, in ns since the epoch.
    pub(super) fn ns(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// A reset the connection's streak excuses: one more reconnect.
    pub(super) fn reconnect(&self) {
        if !self.counting.stopped() {
            self.reconnects.set(self.reconnects.get() + 1);
        }
    }

    /// Connection `id` lost its stream to a reset (its receiving side saw it). As a sender, the
    /// messages it had in flight may be lost with it: they are owed to nobody any more, and its
    /// next stream starts at its next sequence number. As a receiver (if it was subscribed),
    /// every message in flight it has not received yet (`expected`: per sender, the next one it
    /// waits for; `owed`: per sender, the first one owed to it) is no longer owed to it.
    pub(super) fn left(&self, id: usize, subscribed: bool, expected: &Verifier, owed: &[u64]) {
        let mask = self.mask;
        let mut senders = self.senders.borrow_mut();
        let st = &mut senders[id];
        for q in st.done..st.next {
            st.remaining[(q & mask) as usize] = 0;
        }
        st.done = st.next;
        let resume = st.next;
        if let Some(w) = st.waker.take() {
            w.wake();
        }
        let mut resumes = self.resumes.borrow_mut();
        if resumes[id].last() != Some(&resume) {
            resumes[id].push(resume);
        }
        self.gone_since.borrow_mut()[id].get_or_insert_with(Instant::now);
        if !subscribed {
            return;
        }
        self.streams.borrow_mut()[id] = None;
        self.present.set(self.present.get().saturating_sub(1));
        for (s, st) in senders.iter_mut().enumerate() {
            let from = expected.expected(s).max(owed[s]).max(st.done);
            for q in from..st.next {
                let slot = (q & mask) as usize;
                st.remaining[slot] = st.remaining[slot].saturating_sub(1);
            }
            while st.done < st.next && st.remaining[(st.done & mask) as usize] == 0 {
                st.done += 1;
            }
            if let Some(w) = st.waker.take() {
                w.wake();
            }
        }
    }

    /// Connection `id` is subscribed again on `stream` (its rejoin probe came back): every
    /// message sent from now on is owed to it (`owed` is set to each sender's next number).
    pub(super) fn rejoined(&self, id: usize, stream: &Rc<TcpStream>, owed: &mut [u64]) {
        let mut senders = self.senders.borrow_mut();
        for (o, st) in owed.iter_mut().zip(senders.iter()) {
            *o = st.next;
        }
        self.present.set(self.present.get() + 1);
        self.streams.borrow_mut()[id] = Some(stream.clone());
        self.gone_since.borrow_mut()[id] = None;
        if let Some(w) = senders[id].waker.take() {
            w.wake();
        }
        drop(senders);
        self.probe_seen(id);
    }

    /// Whether a jump of `sender`'s stream to `seq` is where one of its connections after a
    /// reset started sending.
    pub(super) fn resumed_at(&self, sender: u32, seq: u64) -> bool {
        self.resumes
            .borrow()
            .get(sender as usize)
            .is_some_and(|r| r.contains(&seq))
    }

    pub(super) fn probe_seen(&self, conn: usize) {
        let mut p = self.probed.borrow_mut();
        if !p[conn] {
            p[conn] = true;
            self.probed_count.set(self.probed_count.get() + 1);
        }
    }
}
