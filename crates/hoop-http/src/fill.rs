//! Fills in flight: one read of a file into the cache (or one compression of it) per key and
//! identity at a time on a server thread. A request that finds the fill under way waits for
//! its bytes instead of reading the file again: without this, N requests at once for a file
//! not yet cached read it N times into N buffers (500 HTTP/2 streams asking for one 1 MiB
//! file held 540 MB before the first of them reached the cache).
//!
//! The request that starts a fill leads it ([`Lead`]) and hands its bytes over with
//! [`Lead::finish`]; the others wait ([`Wait`]). A leader dropped before it finishes (its
//! client gone, its deadline past) wakes the waiters with nothing, and the first of them to
//! ask again leads in its place. A file whose identity changed (another inode, size or
//! mtime) is never served another identity's bytes: it gets a fill of its own.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use hoop::sync::CancellationToken;

use super::response::FileMeta;

/// The fills under way on one server thread, by cache key.
#[derive(Debug, Default)]
pub struct Fills {
    map: HashMap<Vec<u8>, Rc<Slot>>,
}

/// One fill: the identity it reads, its outcome once done.
#[derive(Debug)]
struct Slot {
    meta: FileMeta,
    done: CancellationToken,
    /// `Some` once the leader finished: its bytes, or `None` (the fill failed, or found
    /// nothing worth keeping).
    outcome: RefCell<Option<Option<Bytes>>>,
}

/// A request's part in the fill of a key: lead it, or wait for it.
#[derive(Debug)]
pub enum Turn<'a> {
    /// Nobody is filling this key and identity: this request reads, then calls
    /// [`Lead::finish`].
    Lead(Lead<'a>),
    /// Another request is: [`Wait::outcome`].
    Wait(Wait),
}

impl Fills {
    /// This request's turn at filling `key` with the file of identity `meta`.
    pub fn turn<'a>(fills: &'a RefCell<Fills>, key: &[u8], meta: FileMeta) -> Turn<'a> {
        let mut this = fills.borrow_mut();
        if let Some(slot) = this.map.get(key) {
            if slot.meta == meta && !slot.done.is_cancelled() {
                return Turn::Wait(Wait { slot: slot.clone() });
            }
        }
        let slot = Rc::new(Slot {
            meta,
            done: CancellationToken::new(),
            outcome: RefCell::new(None),
        });
        // A fill of another identity stays with its own waiters; new requests join this one.
        this.map.insert(key.to_vec(), slot.clone());
        Turn::Lead(Lead {
            fills,
            key: key.to_vec(),
            slot,
        })
    }
}

/// `key`'s bytes (the file of identity `meta`): made by `fill` when no other request of the
/// thread is making them, else the leader's once it finished; asked again when the leader was
/// dropped first (this request may lead then). `None`: the fill found nothing to keep.
pub async fn once<F, Fut>(
    fills: &RefCell<Fills>,
    key: &[u8],
    meta: FileMeta,
    mut fill: F,
) -> Option<Bytes>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<Bytes>>,
{
    loop {
        match Fills::turn(fills, key, meta) {
            Turn::Wait(wait) => {
                if let Some(outcome) = wait.outcome().await {
                    return outcome;
                }
            }
            Turn::Lead(lead) => {
                let outcome = fill().await;
                lead.finish(outcome.clone());
                return outcome;
            }
        }
    }
}

/// The request filling a key: [`finish`](Lead::finish) hands the bytes to the waiters; a
/// drop before it sends them to fill again.
#[derive(Debug)]
pub struct Lead<'a> {
    fills: &'a RefCell<Fills>,
    key: Vec<u8>,
    slot: Rc<Slot>,
}

impl Lead<'_> {
    /// Gives every waiter `outcome` (the bytes, or `None`: the fill failed or found nothing to
    /// keep, and each waiter does without, as the leader does).
    pub fn finish(self, outcome: Option<Bytes>) {
        *self.slot.outcome.borrow_mut() = Some(outcome);
        // `Drop` ends the fill and wakes the waiters.
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        let mut fills = self.fills.borrow_mut();
        // Only this fill's own entry: a newer identity's may have replaced it.
        if fills
            .map
            .get(&self.key)
            .is_some_and(|s| Rc::ptr_eq(s, &self.slot))
        {
            fills.map.remove(&self.key);
        }
        drop(fills);
        self.slot.done.cancel();
    }
}

/// A request waiting for another's fill.
#[derive(Debug)]
pub struct Wait {
    slot: Rc<Slot>,
}

impl Wait {
    /// The leader's outcome once it finished (`Some(None)`: it found nothing to keep); `None`
    /// when the leader was dropped first, and the caller asks for its turn again.
    pub async fn outcome(self) -> Option<Option<Bytes>> {
        self.slot.done.cancelled().await;
        self.slot.outcome.borrow().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(size: u64) -> FileMeta {
        FileMeta {
            size,
            mtime_secs: 1,
            mtime_nsec: 0,
            ino: 7,
            dev: 1,
            kind: libc::S_IFREG,
        }
    }

    /// One poll of `f`, with a waker that does nothing.
    fn poll_once<F: std::future::Future>(f: F) -> std::task::Poll<F::Output> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        std::pin::pin!(f).as_mut().poll(&mut cx)
    }

    fn now<F: std::future::Future>(f: F) -> F::Output {
        match poll_once(f) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("not ready"),
        }
    }

    #[test]
    fn the_first_leads_and_the_others_get_its_bytes() {
        let fills = RefCell::new(Fills::default());
        let Turn::Lead(lead) = Fills::turn(&fills, b"a", meta(3)) else {
            panic!("the first request leads");
        };
        let waits: Vec<Wait> = (0..3)
            .map(|_| match Fills::turn(&fills, b"a", meta(3)) {
                Turn::Wait(w) => w,
                Turn::Lead(_) => panic!("a second request waits"),
            })
            .collect();
        assert!(
            poll_once(waits[0].slot.done.cancelled()).is_pending(),
            "no outcome yet"
        );
        lead.finish(Some(Bytes::from_static(b"abc")));
        for w in waits {
            assert_eq!(now(w.outcome()), Some(Some(Bytes::from_static(b"abc"))));
        }
        assert!(
            fills.borrow().map.is_empty(),
            "a finished fill is forgotten"
        );
        assert!(matches!(Fills::turn(&fills, b"a", meta(3)), Turn::Lead(_)));
    }

    #[test]
    fn a_failed_fill_tells_its_waiters_so() {
        let fills = RefCell::new(Fills::default());
        let Turn::Lead(lead) = Fills::turn(&fills, b"a", meta(3)) else {
            panic!("leads");
        };
        let Turn::Wait(w) = Fills::turn(&fills, b"a", meta(3)) else {
            panic!("waits");
        };
        lead.finish(None);
        assert_eq!(now(w.outcome()), Some(None));
    }

    #[test]
    fn a_dropped_leader_hands_the_fill_to_a_waiter() {
        let fills = RefCell::new(Fills::default());
        let lead = Fills::turn(&fills, b"a", meta(3));
        let Turn::Wait(w) = Fills::turn(&fills, b"a", meta(3)) else {
            panic!("waits");
        };
        drop(lead);
        assert_eq!(now(w.outcome()), None, "told to ask again");
        assert!(fills.borrow().map.is_empty());
        assert!(matches!(Fills::turn(&fills, b"a", meta(3)), Turn::Lead(_)));
    }

    #[test]
    fn another_identity_or_key_gets_a_fill_of_its_own() {
        let fills = RefCell::new(Fills::default());
        let Turn::Lead(old) = Fills::turn(&fills, b"a", meta(3)) else {
            panic!("leads");
        };
        let Turn::Wait(old_wait) = Fills::turn(&fills, b"a", meta(3)) else {
            panic!("waits");
        };
        let Turn::Lead(new) = Fills::turn(&fills, b"a", meta(4)) else {
            panic!("a resized file is read again");
        };
        assert!(matches!(Fills::turn(&fills, b"b", meta(3)), Turn::Lead(_)));
        let Turn::Wait(new_wait) = Fills::turn(&fills, b"a", meta(4)) else {
            panic!("the newer identity's fill is joined");
        };
        // The old fill ends without removing the newer one.
        old.finish(Some(Bytes::from_static(b"old")));
        assert_eq!(
            now(old_wait.outcome()),
            Some(Some(Bytes::from_static(b"old")))
        );
        assert_eq!(fills.borrow().map.len(), 1);
        new.finish(Some(Bytes::from_static(b"newb")));
        assert_eq!(
            now(new_wait.outcome()),
            Some(Some(Bytes::from_static(b"newb")))
        );
        assert!(fills.borrow().map.is_empty());
    }
}
