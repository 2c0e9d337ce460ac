//! A fault plan: `HOOP_FAULTS=seed=N,rate=P[,kinds=A+B][,first=A+B]` parsed and printed.

use std::fmt;

use super::{Kind, ALL_BITS, KINDS};

/// A parsed `HOOP_FAULTS` value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// The seed every driver's random stream derives from.
    pub seed: u64,
    /// Probability of a fault per event, in [0, 1].
    pub rate: f64,
    pub(super) kinds: u32,
    /// Kinds injected, whatever the draw, at the first event of the kind of each thread's first
    /// driver of each engine (io_uring, epoll; `first=A+B`): a test that cannot survive the
    /// fault fails at every seed, not on the days whose seed happens to hit it. A driver the
    /// thread builds later (a test's retry on a new runtime) and a rerun's thread (named
    /// `TEST#N`, as the retry helpers name them) draw as usual, so a retry can succeed.
    pub(super) first: u32,
}

impl Plan {
    /// Parses `seed=N,rate=P[,kinds=A+B+...][,first=A+B+...]`.
    pub fn parse(spec: &str) -> Result<Plan, String> {
        let mut seed = None;
        let mut rate = None;
        let mut kinds = ALL_BITS;
        let mut first = 0;
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("HOOP_FAULTS: `{part}` is not key=value"))?;
            match key.trim() {
                "seed" => {
                    seed = Some(value.trim().parse::<u64>().map_err(|e| {
                        format!("HOOP_FAULTS: seed `{value}` is not an unsigned integer: {e}")
                    })?)
                }
                "rate" => {
                    let r = value
                        .trim()
                        .parse::<f64>()
                        .map_err(|e| format!("HOOP_FAULTS: rate `{value}` is not a number: {e}"))?;
                    if !(0.0..=1.0).contains(&r) {
                        return Err(format!("HOOP_FAULTS: rate {r} is outside [0, 1]"));
                    }
                    rate = Some(r);
                }
                "kinds" => kinds = kind_bits(value)?,
                "first" => first = kind_bits(value)?,
                other => {
                    return Err(format!(
                        "HOOP_FAULTS: unknown key `{other}` (expected \
                         seed=N,rate=P[,kinds=LIST][,first=LIST])"
                    ))
                }
            }
        }
        Ok(Plan {
            seed: seed.ok_or("HOOP_FAULTS: seed=N missing")?,
            rate: rate.ok_or("HOOP_FAULTS: rate=P missing")?,
            kinds,
            // A kind first injected is a kind injected.
            first: first & kinds,
        })
    }

    /// Whether the plan injects `kind`.
    pub fn has(&self, kind: Kind) -> bool {
        self.kinds & kind.bit() != 0
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seed={},rate={}", self.seed, self.rate)?;
        if self.kinds != ALL_BITS {
            let names: Vec<&str> = Kind::ALL
                .iter()
                .filter(|k| self.has(**k))
                .map(|k| k.name())
                .collect();
            write!(f, ",kinds={}", names.join("+"))?;
        }
        if self.first != 0 {
            let names: Vec<&str> = Kind::ALL
                .iter()
                .filter(|k| self.first & k.bit() != 0)
                .map(|k| k.name())
                .collect();
            write!(f, ",first={}", names.join("+"))?;
        }
        Ok(())
    }
}

/// The kinds of a `+`- or `:`-separated list, as bits.
fn kind_bits(list: &str) -> Result<u32, String> {
    let mut bits = 0;
    for name in list.split(['+', ':', ' ']).filter(|n| !n.is_empty()) {
        let kind = Kind::from_name(name).ok_or_else(|| {
            format!(
                "HOOP_FAULTS: unknown fault kind `{name}` (kinds: {})",
                KINDS.join(", ")
            )
        })?;
        bits |= kind.bit();
    }
    Ok(bits)
}
