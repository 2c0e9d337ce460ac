//! `Accept-Encoding` (RFC 9110, 12.5.3), as far as precompressed files need it: which of `br`,
//! `zstd` and `gzip` the client accepts, in which order, and whether it still accepts the file
//! as it is (`identity`).
//!
//! The value is a comma-separated list of `coding *( OWS ";" OWS name=value )`; names and
//! codings are case-insensitive, spaces and tabs around every part are ignored, empty list
//! elements are skipped, and several `Accept-Encoding` fields count as one list (each field is
//! fed to [`Accepted::add`]). A `q` weight is `0` to `1` with at most three decimals; an element
//! whose weight is malformed is ignored whole (nothing is assumed of it). `x-gzip` is `gzip`
//! (RFC 9110, 8.4.1.3). When a coding is listed twice, the first mention counts. `*` stands
//! for every coding not listed by name. Nothing here allocates or panics, whatever the bytes.

/// A content coding the server has precompressed files for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    /// Brotli: `a.css.br`.
    Br,
    /// gzip: `a.css.gz`.
    Gzip,
    /// Zstandard (RFC 8878): `a.css.zst`.
    Zstd,
}

impl Coding {
    /// The `Content-Encoding` value.
    pub fn name(self) -> &'static str {
        match self {
            Coding::Br => "br",
            Coding::Gzip => "gzip",
            Coding::Zstd => "zstd",
        }
    }

    /// The suffix of the precompressed file's name.
    pub fn suffix(self) -> &'static [u8] {
        match self {
            Coding::Br => b".br",
            Coding::Gzip => b".gz",
            Coding::Zstd => b".zst",
        }
    }
}

/// What the `Accept-Encoding` fields of one request say; the default is no field at all.
/// Weights are in thousandths (`q=0.5` is 500); `None`: not listed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accepted {
    /// Some `Accept-Encoding` field was present (even empty).
    pub present: bool,
    br: Option<u16>,
    gzip: Option<u16>,
    zstd: Option<u16>,
    identity: Option<u16>,
    any: Option<u16>,
}

impl Accepted {
    /// Parses one `Accept-Encoding` field value.
    #[allow(dead_code)] // the fuzz target's and the tests' entry (requests fold every field)
    pub fn parse(value: &[u8]) -> Accepted {
        let mut a = Accepted::default();
        a.add(value);
        a
    }

    /// Adds one more `Accept-Encoding` field value (as if appended to the list with a comma).
    pub fn add(&mut self, value: &[u8]) {
        self.present = true;
        for element in value.split(|&b| b == b',') {
            let mut parts = element.split(|&b| b == b';');
            let coding = trim(parts.next().unwrap_or(&[]));
            if coding.is_empty() {
                continue;
            }
            let mut q = Some(1000);
            for param in parts {
                let param = trim(param);
                let Some(eq) = param.iter().position(|&b| b == b'=') else {
                    continue;
                };
                if trim(&param[..eq]).eq_ignore_ascii_case(b"q") {
                    q = parse_q(trim(&param[eq + 1..]));
                }
            }
            let Some(q) = q else { continue };
            let slot = if coding.eq_ignore_ascii_case(b"br") {
                &mut self.br
            } else if coding.eq_ignore_ascii_case(b"gzip") || coding.eq_ignore_ascii_case(b"x-gzip")
            {
                &mut self.gzip
            } else if coding.eq_ignore_ascii_case(b"zstd") {
                &mut self.zstd
            } else if coding.eq_ignore_ascii_case(b"identity") {
                &mut self.identity
            } else if coding == b"*" {
                &mut self.any
            } else {
                continue;
            };
            slot.get_or_insert(q);
        }
    }

    /// The weight of `coding`: as listed, else `*`'s, else 0 (not acceptable).
    pub fn q(&self, coding: Coding) -> u16 {
        let named = match coding {
            Coding::Br => self.br,
            Coding::Gzip => self.gzip,
            Coding::Zstd => self.zstd,
        };
        named.or(self.any).unwrap_or(0)
    }

    /// Whether the unencoded file is acceptable: unless `identity;q=0`, or `*;q=0` without
    /// `identity` listed (RFC 9110, 12.5.3).
    #[allow(dead_code)] // for the tests and the fuzz target
    pub fn identity_ok(&self) -> bool {
        self.identity.or(self.any).unwrap_or(1) > 0
    }

    /// The codings worth trying, best first: weight above 0, not below `identity`'s when that
    /// is listed by name (the client said it prefers the file as it is), higher weight first,
    /// `br`, then `zstd`, then `gzip` at equal weight. Empty without an `Accept-Encoding`
    /// field.
    pub fn preferred(&self) -> Preferred {
        let floor = self.identity.unwrap_or(1).max(1);
        let mut list = [None; CODINGS];
        let mut n = 0;
        // In the tie order; each one goes in before the first of lower weight (a stable
        // insertion: equal weights keep the tie order).
        for c in [Coding::Br, Coding::Zstd, Coding::Gzip] {
            let q = self.q(c);
            if q < floor {
                continue;
            }
            let mut at = n;
            while at > 0 && list[at - 1].is_some_and(|p| self.q(p) < q) {
                list[at] = list[at - 1];
                at -= 1;
            }
            list[at] = Some(c);
            n += 1;
        }
        Preferred { list, next: 0 }
    }
}

/// How many codings there are precompressed files for.
pub const CODINGS: usize = 3;

/// The codings of [`Accepted::preferred`], best first.
#[derive(Debug, Clone)]
pub struct Preferred {
    list: [Option<Coding>; CODINGS],
    next: usize,
}

impl Preferred {
    /// Whether there is nothing to try.
    #[allow(dead_code)] // for the tests
    pub fn is_empty(&self) -> bool {
        self.list[self.next..].iter().all(Option::is_none)
    }
}

impl Iterator for Preferred {
    type Item = Coding;
    fn next(&mut self) -> Option<Coding> {
        let c = *self.list.get(self.next)?;
        self.next += 1;
        c
    }
}

/// A qvalue (`0`, `0.5`, `1`, `1.000`: RFC 9110, 12.4.2) in thousandths; `None` if malformed.
fn parse_q(s: &[u8]) -> Option<u16> {
    let (int, frac) = match s.iter().position(|&b| b == b'.') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &[][..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match int {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// Leading and trailing spaces and tabs removed.
fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(v: &str) -> Vec<Coding> {
        Accepted::parse(v.as_bytes()).preferred().collect()
    }

    use Coding::{Br, Gzip, Zstd};

    #[test]
    fn no_field_means_identity_only() {
        let a = Accepted::default();
        assert!(!a.present);
        assert!(a.preferred().is_empty());
        assert!(a.identity_ok());
        assert_eq!(order(""), vec![]);
        assert!(Accepted::parse(b"").identity_ok());
    }

    #[test]
    fn orders_by_weight_then_br_first() {
        assert_eq!(order("gzip, deflate, br"), vec![Br, Gzip]);
        assert_eq!(order("gzip"), vec![Gzip]);
        assert_eq!(order("br"), vec![Br]);
        assert_eq!(order("br;q=0.5, gzip;q=0.8"), vec![Gzip, Br]);
        assert_eq!(order("br;q=0.8, gzip;q=0.5"), vec![Br, Gzip]);
        assert_eq!(order("gzip;q=1.0, br;q=1"), vec![Br, Gzip]);
        assert_eq!(order("deflate, compress"), vec![]);
        assert_eq!(order("x-gzip"), vec![Gzip]);
    }

    #[test]
    fn zero_refuses_and_star_matches() {
        assert_eq!(order("br;q=0, gzip"), vec![Gzip]);
        assert_eq!(order("gzip;q=0"), vec![]);
        assert_eq!(order("*"), vec![Br, Zstd, Gzip]);
        assert_eq!(order("*;q=0.5, gzip"), vec![Gzip, Br, Zstd]);
        assert_eq!(order("*, br;q=0"), vec![Zstd, Gzip]);
        assert_eq!(order("*;q=0"), vec![]);
        let a = Accepted::parse(b"*;q=0");
        assert!(!a.identity_ok());
        let a = Accepted::parse(b"*;q=0, identity");
        assert!(a.identity_ok());
        let a = Accepted::parse(b"gzip, identity;q=0");
        assert!(!a.identity_ok());
        assert_eq!(a.preferred().collect::<Vec<_>>(), vec![Gzip]);
    }

    #[test]
    fn zstd_by_weight_and_between_br_and_gzip_at_a_tie() {
        assert_eq!(order("zstd"), vec![Zstd]);
        assert_eq!(order("ZSTD ; q=1.0"), vec![Zstd]);
        assert_eq!(order("gzip, zstd"), vec![Zstd, Gzip]);
        assert_eq!(order("gzip, zstd, br"), vec![Br, Zstd, Gzip]);
        assert_eq!(order("br;q=0.5, zstd;q=0.9, gzip"), vec![Gzip, Zstd, Br]);
        assert_eq!(
            order("br;q=0.1, zstd;q=0.5, gzip;q=0.8"),
            vec![Gzip, Zstd, Br]
        );
        assert_eq!(
            order("br;q=0.9, zstd;q=0.5, gzip;q=0.9"),
            vec![Br, Gzip, Zstd]
        );
        assert_eq!(order("zstd;q=0, gzip"), vec![Gzip]);
        assert_eq!(order("zstd;q=0.5, identity"), vec![]);
        assert_eq!(order("*;q=0.2, zstd;q=0.3"), vec![Zstd, Br, Gzip]);
        assert_eq!(Zstd.name(), "zstd");
        assert_eq!(Zstd.suffix(), b".zst");
    }

    #[test]
    fn identity_preferred_over_weaker_codings() {
        assert_eq!(order("gzip;q=0.5, identity"), vec![]);
        assert_eq!(order("gzip;q=0.5, br, identity;q=0.5"), vec![Br, Gzip]);
        assert_eq!(order("gzip;q=0.5"), vec![Gzip]);
    }

    #[test]
    fn robust_syntax() {
        assert_eq!(order(" GZIP ; Q = 0.5 ,\tBr;q=0.9 "), vec![Br, Gzip]);
        assert_eq!(order(",,gzip,,"), vec![Gzip]);
        // Malformed weights: the element is ignored.
        assert_eq!(order("br;q=2, gzip"), vec![Gzip]);
        assert_eq!(order("br;q=0.1234, gzip;q=abc"), vec![]);
        assert_eq!(order("br;q=, gzip;q=1.001"), vec![]);
        assert_eq!(order("br;q=1.000;level=3"), vec![Br]);
        assert_eq!(order("br;foo, gzip;q=0.001"), vec![Br, Gzip]);
        // The first mention counts; several fields are one list.
        assert_eq!(order("br;q=0, br"), vec![]);
        let mut a = Accepted::parse(b"gzip;q=0.2");
        a.add(b"br;q=0.1");
        assert_eq!(a.preferred().collect::<Vec<_>>(), vec![Gzip, Br]);
        assert_eq!(parse_q(b"0.5"), Some(500));
        assert_eq!(parse_q(b"0."), Some(0));
        assert_eq!(parse_q(b"1."), Some(1000));
        assert_eq!(parse_q(b".5"), None);
        assert_eq!(parse_q(b"-0"), None);
    }
}

#[cfg(test)]
mod properties {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::{Accepted, Coding};

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        /// Any bytes: no panic, at most three codings, never one with weight 0.
        #[test]
        fn any_bytes(bytes in vec(any::<u8>(), 0..512), more in vec(any::<u8>(), 0..64)) {
            let mut a = Accepted::parse(&bytes);
            a.add(&more);
            let p: Vec<Coding> = a.preferred().collect();
            prop_assert!(p.len() <= super::CODINGS);
            for c in p {
                prop_assert!(a.q(c) > 0);
            }
        }

        /// Lists of plausible elements: the same, with the weights honoured.
        #[test]
        fn plausible_lists(
            parts in vec(prop_oneof![
                Just("br".to_string()), Just("gzip".to_string()), Just("*".to_string()),
                Just("zstd".to_string()),
                Just("identity".to_string()), Just("deflate".to_string()), "[ \t;=qQ0-9.a-z]{0,12}",
            ], 0..6),
            weights in vec(prop_oneof![Just(String::new()), "; ?q=[01](\\.[0-9]{0,3})?"], 6),
        ) {
            let list: Vec<String> =
                parts.iter().zip(&weights).map(|(p, w)| format!("{p}{w}")).collect();
            let a = Accepted::parse(list.join(",").as_bytes());
            let p: Vec<Coding> = a.preferred().collect();
            for w in p.windows(2) {
                prop_assert!(a.q(w[0]) >= a.q(w[1]));
            }
        }
    }
}
