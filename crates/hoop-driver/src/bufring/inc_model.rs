use super::book::{on_cqe, Tracked, F_BUFFER, F_BUF_MORE, F_REC};
use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Action {
    /// The kernel receives `n` bytes (as a bundle if `bundle`): one CQE, or ENOBUFS.
    Recv(u32, bool),
    /// A task receives pending CQE `i % len`.
    Take(usize),
    /// The user drops view `i % len`.
    DropView(usize),
}

/// The simulated kernel's side of the ring.
struct Kernel {
    head: u16,
    /// Next byte value written.
    seq: u8,
}

struct View {
    buf: RingBuf,
    want: Vec<u8>,
}

fn entry(ring: &BufRing, pos: u16) -> *mut BufRingEntry {
    let (mem, _) = ring.inner.kernel.as_ref().expect("kernel mode");
    let mask = ring.inner.entries - 1;
    // SAFETY: masked position inside the ring memory.
    unsafe { mem.ptr.as_ptr().add(usize::from(pos & mask)) }
}

fn tail(ring: &BufRing) -> u16 {
    ring.inner
        .kernel
        .as_ref()
        .expect("kernel mode")
        .0
        .tail
        .get()
}

/// Receives `n` bytes as the kernel would: the CQE (res, flags), or None for ENOBUFS.
fn kernel_recv(
    ring: &BufRing,
    k: &mut Kernel,
    n: u32,
    bundle: bool,
    inc: bool,
) -> Option<(i32, u32, Vec<u8>)> {
    if k.head == tail(ring) {
        return None;
    }
    let first = entry(ring, k.head);
    // SAFETY: the entry lies in the ring memory; nothing else touches it now.
    let bid = unsafe { (*first).bid() };
    let mut left = n;
    let mut wrote = Vec::new();
    let mut more = false;
    while left > 0 && k.head != tail(ring) {
        let e = entry(ring, k.head);
        // SAFETY: as above; the address is inside the ring's buffer memory, in the
        // part of the buffer the kernel owns (provided, not yet consumed).
        unsafe {
            let (addr, len) = ((*e).addr(), (*e).len());
            let this = left.min(len);
            for i in 0..this {
                *((addr as *mut u8).add(i as usize)) = k.seq;
                wrote.push(k.seq);
                k.seq = k.seq.wrapping_add(1);
            }
            left -= this;
            if inc && this < len {
                (*e).set_addr(addr + u64::from(this));
                (*e).set_len(len - this);
                more = true;
                break;
            }
            k.head = k.head.wrapping_add(1);
        }
        if !bundle {
            break;
        }
    }
    let mut flags = F_BUFFER | (u32::from(bid) << 16);
    if more {
        flags |= F_BUF_MORE;
    }
    Some((wrote.len() as i32, flags, wrote))
}

fn run(entries: u16, buf_len: usize, inc: bool, actions: Vec<Action>) -> Result<(), String> {
    let ring = BufRing::new_simulated(entries, buf_len, inc).expect("ring");
    let tracked = [Tracked {
        bgid: 0,
        base: 0,
        entries,
        book: ring.inner.book.clone(),
    }];
    let mut k = Kernel { head: 0, seq: 0 };
    let mut pending: Vec<(i32, u32, Vec<u8>)> = Vec::new();
    let mut views: Vec<View> = Vec::new();
    for a in actions {
        match a {
            Action::Recv(n, bundle) => {
                if let Some((res, flags, wrote)) = kernel_recv(&ring, &mut k, n, bundle, inc) {
                    // As the driver does at reaping.
                    let flags = on_cqe(&tracked, res, flags);
                    check!(flags & F_REC != 0, "a CQE with bytes is settled");
                    pending.push((res, flags, wrote));
                }
            }
            Action::Take(i) if !pending.is_empty() => {
                let (res, flags, wrote) = pending.remove(i % pending.len());
                let mut got = VecDeque::new();
                let ok = if flags & F_REC != 0 {
                    ring.take_record((flags >> 16) as u16, &mut got)
                } else {
                    ring.take_kernel((flags >> 16) as u16, res as usize, &mut got)
                };
                check!(ok, "a CQE could not be located");
                let mut at = 0;
                for buf in got {
                    let want = wrote[at..at + buf.len()].to_vec();
                    at += buf.len();
                    check_eq!(&buf[..], &want[..], "a view's bytes when received");
                    views.push(View { buf, want });
                }
                check_eq!(at, wrote.len(), "the views cover the CQE");
            }
            Action::DropView(i) if !views.is_empty() => {
                let v = views.swap_remove(i % views.len());
                check_eq!(&v.buf[..], &v.want[..], "a view's bytes when dropped");
            }
            _ => {}
        }
        // The kernel's ring holds each buffer once, none with a view alive (the partly
        // consumed head aside), and `available()` says how many are out.
        let t = tail(&ring);
        let mut in_ring = Vec::new();
        let mut pos = k.head;
        while pos != t {
            // SAFETY: inside the ring memory.
            in_ring.push(unsafe { (*entry(&ring, pos)).bid() });
            pos = pos.wrapping_add(1);
        }
        let mut sorted = in_ring.clone();
        sorted.sort_unstable();
        sorted.dedup();
        check_eq!(sorted.len(), in_ring.len(), "a buffer in the ring twice");
        for v in &views {
            let partial_head = inc && in_ring.first() == Some(&v.buf.bid());
            check!(
                partial_head || !in_ring.contains(&v.buf.bid()),
                "buffer {} provided while a view of it lives",
                v.buf.bid()
            );
        }
        // SAFETY: the head entry (if any) is inside the ring memory.
        let head_partial =
            inc && k.head != t && unsafe { (*entry(&ring, k.head)).len() } < buf_len as u32;
        // Out from the reaping of its first bytes until it is back in the ring.
        let out = entries as usize - in_ring.len() + usize::from(head_partial);
        check_eq!(ring.available(), entries as usize - out, "available()");
    }
    // Everything received and dropped: every buffer is back.
    for (res, flags, _) in pending.drain(..) {
        let mut got = VecDeque::new();
        if flags & F_REC != 0 {
            ring.take_record((flags >> 16) as u16, &mut got);
        } else {
            ring.take_kernel((flags >> 16) as u16, res as usize, &mut got);
        }
    }
    views.clear();
    let in_ring = tail(&ring).wrapping_sub(k.head);
    check_eq!(in_ring, entries, "every buffer back in the ring");
    Ok(())
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => (1..700u32, any::<bool>()).prop_map(|(n, b)| Action::Recv(n, b)),
        3 => any::<usize>().prop_map(Action::Take),
        3 => any::<usize>().prop_map(Action::DropView),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn incremental_bookkeeping_matches_the_kernel(
        entries in prop_oneof![Just(1u16), Just(2), Just(4), Just(8)],
        buf_len in prop_oneof![Just(64usize), Just(256), Just(1000)],
        actions in proptest::collection::vec(action(), 1..300),
    ) {
        run(entries, buf_len, true, actions).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn bundle_bookkeeping_matches_the_kernel(
        entries in prop_oneof![Just(1u16), Just(2), Just(4), Just(8)],
        buf_len in prop_oneof![Just(64usize), Just(256)],
        actions in proptest::collection::vec(action(), 1..300),
    ) {
        run(entries, buf_len, false, actions).map_err(TestCaseError::fail)?;
    }
}

/// A view keeps its buffer out of the ring; the buffer comes back only when the kernel
/// is done with it and the last view went.
#[test]
fn a_buffer_with_a_view_alive_is_not_given_back() {
    let ring = BufRing::new_simulated(2, 100, true).unwrap();
    let tracked = [Tracked {
        bgid: 0,
        base: 0,
        entries: 2,
        book: ring.inner.book.clone(),
    }];
    let mut k = Kernel { head: 0, seq: 0 };
    let take = |n: u32, k: &mut Kernel| {
        let (res, flags, wrote) = kernel_recv(&ring, k, n, false, true).unwrap();
        let flags = on_cqe(&tracked, res, flags);
        let mut got = VecDeque::new();
        assert!(ring.take_record((flags >> 16) as u16, &mut got));
        let buf = got.pop_front().unwrap();
        assert_eq!(&buf[..], &wrote[..]);
        (buf, flags & F_BUF_MORE != 0)
    };
    let (a, more) = take(30, &mut k);
    assert!(more, "the kernel keeps the buffer");
    assert_eq!((a.bid(), a.offset(), a.len()), (0, 0, 30));
    assert_eq!(ring.available(), 1, "a partly filled buffer is out");
    let (b, _) = take(50, &mut k);
    assert_eq!((b.bid(), b.offset(), b.len()), (0, 30, 50));
    drop(a);
    let (c, more) = take(20, &mut k);
    assert!(!more, "full: the kernel is done with it");
    assert_eq!((c.bid(), c.offset(), c.len()), (0, 80, 20));
    assert_eq!(tail(&ring), 2, "not provided again while views live");
    drop(c);
    assert_eq!(tail(&ring), 2);
    assert_eq!(ring.available(), 1);
    drop(b);
    assert_eq!(tail(&ring), 3, "provided again once the last view went");
    assert_eq!(ring.available(), 2);
}
