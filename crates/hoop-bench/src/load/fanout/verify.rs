//! The fan-out messages (one line of LEN bytes that names its sender and sequence number), and
//! the in-order verifier every receiving connection runs.

use std::rc::Rc;

/// Header bytes: sender, sequence number, check.
pub(crate) const HEADER: usize = 24;
/// Shortest message: the header, a few filler bytes and the newline.
pub(crate) const MIN_LEN: usize = 32;
/// Longest message (`-l`); the server takes lines up to 1 MiB.
pub(crate) const MAX_LEN: usize = 64 * 1024;
/// The sender field of a probe (the messages that check every connection is subscribed).
pub(crate) const PROBE_SENDER: u32 = 0xff_ffff;
/// Probes with sequence numbers from here on are rejoin probes: a connection that reconnected
/// after a reset sends one with its own number and knows it is subscribed again when that one
/// comes back. Several connections may rejoin at once, so these are not ordered.
pub(crate) const REJOIN_PROBES: u64 = 1 << 39;
/// Largest sequence number the 10-digit field holds.
const MAX_SEQ: u64 = (1 << 40) - 1;

const SENDER: std::ops::Range<usize> = 0..6;
const SEQ: std::ops::Range<usize> = 6..16;
const CHECK: std::ops::Range<usize> = 16..24;

/// The check of message (`sender`, `seq`): 32 bits of splitmix64's finalizer.
fn check_of(sender: u32, seq: u64) -> u32 {
    let mut z = (u64::from(sender) << 40 | (seq & MAX_SEQ)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

/// The shape of every message of one run: its length, how many senders there are, and the
/// filler alphabet repeated (shared by all connections, so checking a filler is one
/// comparison).
///
/// A message is one line of exactly LEN bytes (LEN >= [`MIN_LEN`]), all printable but the last:
///
/// | bytes | what |
/// |---|---|
/// | 0..6 | sender: the sending connection's index, 6 lowercase hex digits (`ffffff`: a probe) |
/// | 6..16 | sequence number of the message in its sender's stream, 10 hex digits, from 0 |
/// | 16..24 | check: 8 hex digits of a hash of (sender, sequence number) |
/// | 24..LEN-1 | filler `a..z`, the alphabet rotated by the check |
/// | LEN-1 | `\n` |
///
/// So the server needs nothing but "forward every line to every connection", and a receiver can
/// tell from any LEN bytes who sent them and which message of that sender they are; a wrong
/// byte anywhere is caught (in the header by the check, in the filler by the comparison). Per
/// sender, a receiver expects 0, 1, 2, ... in order: a sequence number above the expected one
/// means deliveries went missing, one below it a duplicate or a reordering; both are errors.
/// Send times are not in the message: the client, which sent it, keeps them.
#[derive(Debug)]
pub(crate) struct Format {
    len: usize,
    senders: usize,
    /// `a..z` repeated, 26 bytes longer than one message's filler.
    alphabet: Box<[u8]>,
}

impl Format {
    /// Messages of `len` bytes (`MIN_LEN..=MAX_LEN`) from `senders` connections (fewer than
    /// [`PROBE_SENDER`]).
    pub(crate) fn new(len: usize, senders: usize) -> Rc<Format> {
        assert!(
            (MIN_LEN..=MAX_LEN).contains(&len),
            "message length {len} out of range"
        );
        assert!(senders < PROBE_SENDER as usize, "{senders} senders");
        let alphabet = (0..len + 26).map(|i| b'a' + (i % 26) as u8).collect();
        Rc::new(Format {
            len,
            senders,
            alphabet,
        })
    }

    /// Bytes per message.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The filler of a message whose check is `check`: bytes `HEADER..len-1`.
    fn filler(&self, check: u32) -> &[u8] {
        let k = (check % 26) as usize;
        &self.alphabet[k..k + self.len - 1 - HEADER]
    }

    /// Appends message (`sender`, `seq`) to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>, sender: u32, seq: u64) {
        let check = check_of(sender, seq);
        put_hex(out, u64::from(sender), SENDER.len());
        put_hex(out, seq & MAX_SEQ, SEQ.len());
        out.extend_from_slice(&hex8(check));
        out.extend_from_slice(self.filler(check));
        out.push(b'\n');
    }
}

fn put_hex(out: &mut Vec<u8>, v: u64, digits: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in (0..digits).rev() {
        out.push(HEX[((v >> (4 * i)) & 0xf) as usize]);
    }
}

/// Each byte's value as a lowercase hex digit; 0x80 for every other byte.
const HEX_VALUE: [u8; 256] = {
    let mut t = [0x80u8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// Each byte as two lowercase hex digits.
const HEX_PAIR: [[u8; 2]; 256] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [HEX[i >> 4], HEX[i & 0xf]];
        i += 1;
    }
    t
};

/// `v` as 8 lowercase hex digits.
fn hex8(v: u32) -> [u8; 8] {
    let b = v.to_be_bytes();
    let (p0, p1, p2, p3) = (
        HEX_PAIR[b[0] as usize],
        HEX_PAIR[b[1] as usize],
        HEX_PAIR[b[2] as usize],
        HEX_PAIR[b[3] as usize],
    );
    [p0[0], p0[1], p1[0], p1[1], p2[0], p2[1], p3[0], p3[1]]
}

/// Lowercase hex digits (at most 16) to a number; `None` on any other byte.
fn hex(bytes: &[u8]) -> Option<u64> {
    let mut acc = 0u64;
    let mut bad = 0u8;
    for &b in bytes {
        let d = HEX_VALUE[b as usize];
        bad |= d;
        acc = (acc << 4) | u64::from(d & 0xf);
    }
    (bad & 0x80 == 0).then_some(acc)
}

/// What one received message turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A probe (not a delivery): proves the connection is subscribed.
    Probe,
    /// A rejoin probe (not a delivery) with its number, [`REJOIN_PROBES`] or above.
    Rejoin {
        /// Its number.
        seq: u64,
    },
    /// The next message of `sender`, every byte right: a verified delivery.
    Delivered {
        /// Sending connection.
        sender: u32,
        /// Its sequence number.
        seq: u64,
    },
    /// Every byte right, but `missing` earlier messages of `sender` never came: `missing`
    /// errors, and this message is not counted as a delivery either. The verifier expects
    /// `seq + 1` next.
    Gap {
        /// Sending connection.
        sender: u32,
        /// The sequence number that came.
        seq: u64,
        /// How many were skipped.
        missing: u64,
    },
    /// A message of `sender` at or below one already seen (a duplicate or a reordering): one
    /// error.
    OutOfOrder {
        /// Sending connection.
        sender: u32,
        /// The sequence number that came.
        seq: u64,
        /// The one expected.
        expected: u64,
    },
    /// Wrong bytes: one error. `framing_lost`: the message does not end in a newline (or has
    /// one inside), so the byte stream lost its message boundaries and cannot be read on.
    Corrupt {
        /// What is wrong.
        what: String,
        /// Whether the stream can be read on.
        framing_lost: bool,
    },
}

/// A receiving connection's checker: per sender, the next sequence number it must see.
#[derive(Debug)]
pub(crate) struct Verifier {
    fmt: Rc<Format>,
    next: Vec<u64>,
    last_probe: Option<u64>,
}

impl Verifier {
    /// A verifier for messages of `fmt`, expecting sequence number 0 from every sender.
    pub(crate) fn new(fmt: Rc<Format>) -> Verifier {
        let next = vec![0; fmt.senders];
        Verifier {
            fmt,
            next,
            last_probe: None,
        }
    }

    /// The sequence number of `sender` this verifier expects next.
    pub(crate) fn expected(&self, sender: usize) -> u64 {
        self.next.get(sender).copied().unwrap_or(0)
    }

    /// Checks one message of exactly `fmt.len()` bytes.
    ///
    /// The common case costs a table lookup per byte of sender and sequence number, a hash,
    /// and two comparisons (the check's digits, the filler): a message whose header and filler pass holds no newline but its last byte, so
    /// the bytes are scanned for newlines only once something is already wrong.
    pub(crate) fn check(&mut self, msg: &[u8]) -> Verdict {
        let len = self.fmt.len;
        if msg.len() != len {
            return corrupt(msg, len, format!("{} bytes, not {len}", msg.len()));
        }
        if msg[len - 1] != b'\n' {
            return corrupt(msg, len, "no newline at the message's end".into());
        }
        let (Some(sender), Some(seq)) = (hex(&msg[SENDER]), hex(&msg[SEQ])) else {
            return corrupt(msg, len, "header is not lowercase hex".into());
        };
        let sender = sender as u32;
        let check = check_of(sender, seq);
        if msg[CHECK] != hex8(check) {
            return corrupt(
                msg,
                len,
                format!("message {sender}/{seq}: its header does not match its check"),
            );
        }
        let want = self.fmt.filler(check);
        if msg[HEADER..len - 1] != *want {
            let at = msg[HEADER..len - 1]
                .iter()
                .zip(want)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return corrupt(
                msg,
                len,
                format!(
                    "message {sender}/{seq}: wrong byte at {} of {len}",
                    HEADER + at
                ),
            );
        }
        if sender == PROBE_SENDER {
            if seq >= REJOIN_PROBES {
                return Verdict::Rejoin { seq };
            }
            if let Some(last) = self.last_probe.filter(|&p| seq <= p) {
                return Verdict::OutOfOrder {
                    sender,
                    seq,
                    expected: last + 1,
                };
            }
            self.last_probe = Some(seq);
            return Verdict::Probe;
        }
        let senders = self.fmt.senders;
        let Some(next) = self.next.get_mut(sender as usize) else {
            return corrupt(
                msg,
                len,
                format!("sender {sender} does not exist ({senders} connections)"),
            );
        };
        let expected = *next;
        if seq < expected {
            return Verdict::OutOfOrder {
                sender,
                seq,
                expected,
            };
        }
        *next = seq + 1;
        if seq > expected {
            return Verdict::Gap {
                sender,
                seq,
                missing: seq - expected,
            };
        }
        Verdict::Delivered { sender, seq }
    }
}

/// A corrupt message, and whether the stream lost its message boundaries: the message is not
/// `len` bytes ending in its only newline.
fn corrupt(msg: &[u8], len: usize, what: String) -> Verdict {
    let framing_lost = msg.len() != len || msg.iter().position(|&b| b == b'\n') != Some(len - 1);
    let what = match msg.iter().position(|&b| b == b'\n') {
        Some(at) if at + 1 < msg.len() => format!("{what} (a newline inside, at byte {at})"),
        _ => what,
    };
    Verdict::Corrupt { what, framing_lost }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(fmt: &Format, sender: u32, seq: u64) -> Vec<u8> {
        let mut v = Vec::new();
        fmt.encode(&mut v, sender, seq);
        v
    }

    #[test]
    fn messages_are_one_line_of_exactly_len_printable_bytes() {
        for len in [MIN_LEN, 64, 1000] {
            let fmt = Format::new(len, 3);
            let m = msg(&fmt, 2, 77);
            assert_eq!(m.len(), len);
            assert_eq!(m[len - 1], b'\n');
            assert!(m[..len - 1].iter().all(|b| b.is_ascii_graphic()), "{m:?}");
            assert_eq!(&m[..16], b"000002000000004d");
        }
    }

    #[test]
    fn in_order_deliveries_from_every_sender_pass() {
        let fmt = Format::new(64, 3);
        let mut v = Verifier::new(fmt.clone());
        for seq in 0..5 {
            for sender in 0..3 {
                assert_eq!(
                    v.check(&msg(&fmt, sender, seq)),
                    Verdict::Delivered { sender, seq }
                );
            }
        }
    }

    #[test]
    fn a_dropped_delivery_is_a_gap() {
        let fmt = Format::new(64, 2);
        let mut v = Verifier::new(fmt.clone());
        assert!(matches!(
            v.check(&msg(&fmt, 1, 0)),
            Verdict::Delivered { .. }
        ));
        // 1/1 and 1/2 never come.
        assert_eq!(
            v.check(&msg(&fmt, 1, 3)),
            Verdict::Gap {
                sender: 1,
                seq: 3,
                missing: 2
            }
        );
        // Expecting 1/4 now; sender 0 is unaffected.
        assert_eq!(
            v.check(&msg(&fmt, 1, 4)),
            Verdict::Delivered { sender: 1, seq: 4 }
        );
        assert_eq!(
            v.check(&msg(&fmt, 0, 0)),
            Verdict::Delivered { sender: 0, seq: 0 }
        );
        // A first message other than 0 is a gap too.
        let mut fresh = Verifier::new(fmt.clone());
        assert!(matches!(
            fresh.check(&msg(&fmt, 0, 1)),
            Verdict::Gap { missing: 1, .. }
        ));
    }

    #[test]
    fn a_reordered_or_repeated_delivery_is_flagged() {
        let fmt = Format::new(64, 1);
        let mut v = Verifier::new(fmt.clone());
        assert!(matches!(
            v.check(&msg(&fmt, 0, 0)),
            Verdict::Delivered { .. }
        ));
        // 2 before 1: a gap, then 1 is out of order.
        assert!(matches!(
            v.check(&msg(&fmt, 0, 2)),
            Verdict::Gap { missing: 1, .. }
        ));
        assert_eq!(
            v.check(&msg(&fmt, 0, 1)),
            Verdict::OutOfOrder {
                sender: 0,
                seq: 1,
                expected: 3
            }
        );
        // A duplicate.
        assert!(matches!(
            v.check(&msg(&fmt, 0, 2)),
            Verdict::OutOfOrder { .. }
        ));
        assert_eq!(
            v.check(&msg(&fmt, 0, 3)),
            Verdict::Delivered { sender: 0, seq: 3 }
        );
    }

    #[test]
    fn any_wrong_byte_is_corrupt() {
        let fmt = Format::new(40, 3);
        // A receiver that has seen 1/0..=1/8 expects 1/9.
        let ready = || {
            let mut v = Verifier::new(fmt.clone());
            for seq in 0..9 {
                assert!(matches!(
                    v.check(&msg(&fmt, 1, seq)),
                    Verdict::Delivered { .. }
                ));
            }
            v
        };
        let good = msg(&fmt, 1, 9);
        assert_eq!(
            ready().check(&good),
            Verdict::Delivered { sender: 1, seq: 9 }
        );
        for at in 0..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[at] ^= 1 << bit;
                match ready().check(&bad) {
                    Verdict::Corrupt { framing_lost, .. } => assert_eq!(
                        framing_lost,
                        at == good.len() - 1 || bad[at] == b'\n',
                        "byte {at} bit {bit}"
                    ),
                    other => panic!("byte {at} bit {bit}: {other:?}"),
                }
            }
        }
        assert!(matches!(
            ready().check(&good[..39]),
            Verdict::Corrupt {
                framing_lost: true,
                ..
            }
        ));
        // A sender that is not one of the run's connections.
        let other = Format::new(40, 5);
        assert!(matches!(
            ready().check(&msg(&other, 4, 0)),
            Verdict::Corrupt { .. }
        ));
    }

    #[test]
    fn probes_are_not_deliveries_and_must_increase() {
        let fmt = Format::new(64, 1);
        let mut v = Verifier::new(fmt.clone());
        assert_eq!(v.check(&msg(&fmt, PROBE_SENDER, 5)), Verdict::Probe);
        assert_eq!(v.check(&msg(&fmt, PROBE_SENDER, 7)), Verdict::Probe);
        assert!(matches!(
            v.check(&msg(&fmt, PROBE_SENDER, 7)),
            Verdict::OutOfOrder { .. }
        ));
        // Rejoin probes, from several connections at once, are not ordered.
        for seq in [REJOIN_PROBES + 3, REJOIN_PROBES + 1] {
            assert_eq!(
                v.check(&msg(&fmt, PROBE_SENDER, seq)),
                Verdict::Rejoin { seq }
            );
        }
        assert!(matches!(
            v.check(&msg(&fmt, 0, 0)),
            Verdict::Delivered { .. }
        ));
    }
}
