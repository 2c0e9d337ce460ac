use super::*;
use std::collections::BTreeSet;

#[derive(Debug, Clone)]
pub(crate) enum Action {
    /// A receive takes a free buffer.
    Take,
    /// The receive of taken buffer `i % n` delivered `len` bytes: a `RingBuf` now holds it.
    Fill(usize, usize),
    /// The receive of taken buffer `i % n` carried no data: the id goes straight back.
    GiveBack(usize),
    /// The user drops filled buffer `i % n`.
    DropBuf(usize),
    /// The user drops the ring handle (buffers out keep the ring alive).
    DropRing,
}

/// Decodes fuzz input: the first byte picks the ring size, then 3 bytes per action.
pub(crate) fn decode(data: &[u8]) -> (u16, Vec<Action>) {
    let Some((&first, rest)) = data.split_first() else {
        return (1, Vec::new());
    };
    let entries = [1u16, 2, 8, 32][usize::from(first % 4)];
    let actions = rest
        .chunks_exact(3)
        .map(|b| {
            let i = usize::from(b[1]);
            match b[0] % 12 {
                0..=3 => Action::Take,
                4..=6 => Action::Fill(i, usize::from(b[2]) * 3),
                7 => Action::GiveBack(i),
                8..=10 => Action::DropBuf(i),
                _ => Action::DropRing,
            }
        })
        .collect();
    (entries, actions)
}

pub(crate) fn run(entries: u16, actions: Vec<Action>) -> Result<(), String> {
    let ring = BufRing::new_user(entries, 512).expect("ring");
    let mut handle = Some(ring.clone());
    let watch = ring; // kept to observe `available()` after the user's handle is gone
    let mut taken: Vec<u16> = Vec::new();
    let mut filled: Vec<RingBuf> = Vec::new();
    let mut out: BTreeSet<u16> = BTreeSet::new();
    for a in actions {
        match a {
            Action::Take => match watch.take_user() {
                Some((bid, _)) => {
                    check!(bid < entries);
                    check!(out.insert(bid), "id {} handed out twice", bid);
                    taken.push(bid);
                }
                None => check_eq!(out.len(), entries as usize, "no id while some are in"),
            },
            Action::Fill(i, len) if !taken.is_empty() => {
                let bid = taken.swap_remove(i % taken.len());
                let buf = watch.filled_user(bid, len);
                check_eq!(buf.bytes_init(), len.min(512));
                filled.push(buf);
            }
            Action::GiveBack(i) if !taken.is_empty() => {
                let bid = taken.swap_remove(i % taken.len());
                watch.give_back(bid);
                check!(out.remove(&bid));
            }
            Action::DropBuf(i) if !filled.is_empty() => {
                let buf = filled.swap_remove(i % filled.len());
                let bid = buf.bid();
                drop(buf);
                check!(out.remove(&bid), "id {} returned twice", bid);
            }
            Action::DropRing => drop(handle.take()),
            _ => {}
        }
        check_eq!(watch.available(), entries as usize - out.len());
    }
    for bid in taken.drain(..) {
        watch.give_back(bid);
        check!(out.remove(&bid));
    }
    drop(filled);
    check_eq!(watch.available(), entries as usize, "every id came back");
    let mut free = watch.inner.free.borrow().clone();
    free.sort_unstable();
    check_eq!(
        free,
        (0..entries).collect::<Vec<u16>>(),
        "each id in the free list once"
    );
    Ok(())
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    fn action() -> impl Strategy<Value = Action> {
        prop_oneof![
            4 => Just(Action::Take),
            3 => (any::<usize>(), 0..700usize).prop_map(|(i, l)| Action::Fill(i, l)),
            1 => any::<usize>().prop_map(Action::GiveBack),
            3 => any::<usize>().prop_map(Action::DropBuf),
            1 => Just(Action::DropRing),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn buffer_ids_match_the_model(
            entries in prop_oneof![Just(1u16), Just(2), Just(8), Just(32)],
            actions in proptest::collection::vec(action(), 1..200),
        ) {
            run(entries, actions).map_err(TestCaseError::fail)?;
        }
    }

    #[test]
    fn fuzz_decoding_runs_the_same_model() {
        let bytes: Vec<u8> = (0..3001u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8)
            .collect();
        let (entries, actions) = decode(&bytes);
        run(entries, actions).unwrap();
    }
}

/// Every sequence of book-keeping events up to a bounded depth, each run through `run` (its
/// checks after every step, and every id back at the end). The book is single-threaded
/// (`Rc`/`RefCell`, the driver's thread), so the orderings of its events are all there is to
/// its concurrency: enumerating them checks what loom would, without threads.
#[cfg(test)]
mod exhaustive {
    use super::*;

    /// The events that can happen with `taken` ids out in receives, `filled` buffers with the
    /// user and the ring handle alive or not (an index picks among two).
    fn events(taken: usize, filled: usize, ring: bool) -> Vec<Action> {
        let mut v = vec![Action::Take];
        for i in 0..taken.min(2) {
            v.extend([
                Action::Fill(i, 0),
                Action::Fill(i, 512),
                Action::GiveBack(i),
            ]);
        }
        for i in 0..filled.min(2) {
            v.push(Action::DropBuf(i));
        }
        if ring {
            v.push(Action::DropRing);
        }
        v
    }

    fn visit(entries: u16, depth: usize, prefix: &mut Vec<Action>, runs: &mut u64) {
        if let Err(e) = run(entries, prefix.clone()) {
            panic!("{e}\n  with {entries} entries after the events {prefix:?}");
        }
        *runs += 1;
        if prefix.len() == depth {
            return;
        }
        // The model's own state after the prefix: ids out, buffers filled, the handle.
        let (mut taken, mut filled, mut ring) = (0usize, 0usize, true);
        for a in prefix.iter() {
            match a {
                Action::Take if taken + filled < usize::from(entries) => taken += 1,
                Action::Fill(..) => {
                    taken -= 1;
                    filled += 1;
                }
                Action::GiveBack(_) => taken -= 1,
                Action::DropBuf(_) => filled -= 1,
                Action::DropRing => ring = false,
                Action::Take => {}
            }
        }
        for a in events(taken, filled, ring) {
            prefix.push(a);
            visit(entries, depth, prefix, runs);
            prefix.pop();
        }
    }

    #[test]
    fn every_order_of_the_book_keeping_events() {
        // Miri checks the book's memory, not its orderings: shallower there.
        let depth = if cfg!(miri) { 3 } else { 8 };
        for entries in [1u16, 2, 4] {
            let mut runs = 0;
            visit(entries, depth, &mut Vec::new(), &mut runs);
            println!(
                "model-check: buffer ring, {entries} entries, depth {depth}: {runs} sequences"
            );
        }
    }
}
