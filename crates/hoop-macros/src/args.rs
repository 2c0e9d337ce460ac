//! The attributes' arguments (`entries = N`, `driver = "..."`), taken apart from [`Tok`]
//! shapes: no `proc_macro` types here, so every decision is unit-tested outside a compiler.

use super::tok::{ParseError, Tok};

/// Which of the two attributes is being expanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    Main,
    Test,
}

impl Flavor {
    /// The attribute as the user writes it, for error messages.
    pub(crate) fn attr(self) -> &'static str {
        match self {
            Flavor::Main => "#[hoop::main]",
            Flavor::Test => "#[hoop::test]",
        }
    }
}

/// The parsed attribute arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Args {
    /// `entries = N`: the ring size to build the runtime with.
    pub(crate) entries: Option<u32>,
    /// `driver = "uring" | "epoll"` (`#[hoop::test]` only): run on that
    /// driver only instead of on both.
    pub(crate) driver: Option<TestDriver>,
}

/// The driver named by `driver = "..."`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TestDriver {
    Uring,
    Epoll,
}

impl TestDriver {
    /// The `::hoop::DriverKind` variant.
    pub(crate) fn variant(self) -> &'static str {
        match self {
            TestDriver::Uring => "Uring",
            TestDriver::Epoll => "Epoll",
        }
    }
}

/// Parses `entries = N` and (for `#[hoop::test]`) `driver = "uring" |
/// "epoll"`, in any order, comma-separated (a trailing comma is fine), or
/// nothing.
pub(crate) fn parse_args(toks: &[Tok], flavor: Flavor) -> Result<Args, ParseError> {
    let attr = flavor.attr();
    let supported = match flavor {
        Flavor::Main => "the only supported argument is `entries = N`",
        Flavor::Test => {
            "the supported arguments are `entries = N` and `driver = \"uring\" | \"epoll\"`"
        }
    };
    let mut args = Args::default();
    let mut i = 0;
    while i < toks.len() {
        // Each argument is `name = value`.
        let name = match &toks[i] {
            Tok::Ident(name) => name.as_str(),
            other => {
                return Err(ParseError::new(
                    Some(i),
                    format!(
                        "{attr}: expected an argument like `entries = 256`, found {}",
                        other.describe()
                    ),
                ))
            }
        };
        let known = match (name, flavor) {
            ("entries", _) => args.entries.is_some(),
            ("driver", Flavor::Test) => args.driver.is_some(),
            _ => {
                return Err(ParseError::new(
                    Some(i),
                    format!("{attr}: unknown argument `{name}`; {supported}"),
                ))
            }
        };
        if known {
            return Err(ParseError::new(
                Some(i),
                format!("{attr}: `{name}` is given more than once"),
            ));
        }
        let example = if name == "entries" {
            "`entries = N` with an integer literal N"
        } else {
            "`driver = \"uring\"` or `driver = \"epoll\"`"
        };
        if !toks.get(i + 1).is_some_and(|t| t.is_punct('=')) {
            return Err(ParseError::new(
                Some(i),
                format!("{attr}: expected {example}"),
            ));
        }
        let value_at = i + 2;
        let value = toks.get(value_at);
        let found = || value.map_or_else(|| "nothing".to_owned(), Tok::describe);
        let bad_value_at = Some(value_at.min(toks.len() - 1));
        let shown = if name == "entries" {
            let entries = match value {
                Some(Tok::Literal(lit)) => parse_int_literal(lit).filter(|&n| n > 0),
                _ => None,
            };
            let Some(entries) = entries else {
                return Err(ParseError::new(
                    bad_value_at,
                    format!(
                        "{attr}: `entries` must be an integer literal from 1 to {}, found {}",
                        u32::MAX,
                        found()
                    ),
                ));
            };
            args.entries = Some(entries);
            entries.to_string()
        } else {
            let driver = match value {
                Some(Tok::Literal(lit)) if lit == "\"uring\"" => TestDriver::Uring,
                Some(Tok::Literal(lit)) if lit == "\"epoll\"" => TestDriver::Epoll,
                _ => {
                    return Err(ParseError::new(
                        bad_value_at,
                        format!("{attr}: expected {example}, found {}", found()),
                    ))
                }
            };
            args.driver = Some(driver);
            format!("\"{}\"", driver.variant().to_lowercase())
        };
        // After the value: the end, or a comma (trailing commas are fine).
        i = value_at + 1;
        match toks.get(i) {
            None => {}
            Some(t) if t.is_punct(',') => i += 1,
            Some(other) => {
                return Err(ParseError::new(
                    Some(i),
                    format!(
                        "{attr}: expected `,` after `{name} = {shown}`, found {}",
                        other.describe()
                    ),
                ))
            }
        }
    }
    Ok(args)
}

/// Reads an integer literal as written in source: decimal, `0x`, `0o` or
/// `0b`, with `_` separators and an optional integer suffix (`u32`, ...).
/// Returns `None` for anything else, or if it does not fit in a `u32`.
pub(crate) fn parse_int_literal(lit: &str) -> Option<u32> {
    let (radix, digits) = if let Some(rest) = lit.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = lit.strip_prefix("0o") {
        (8, rest)
    } else if let Some(rest) = lit.strip_prefix("0b") {
        (2, rest)
    } else {
        (10, lit)
    };
    // An integer suffix starts at the first `u` or `i`, which are not digits
    // in any radix (hex stops at `f`).
    let (digits, suffix) = match digits.find(['u', 'i']) {
        Some(at) => digits.split_at(at),
        None => (digits, ""),
    };
    const SUFFIXES: [&str; 13] = [
        "", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
    ];
    if !SUFFIXES.contains(&suffix) {
        return None;
    }
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    // from_str_radix would accept a leading `+`; source literals never have one.
    if digits.is_empty() || digits.starts_with('+') {
        return None;
    }
    u32::from_str_radix(&digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::{parse_args, parse_int_literal, Args, Flavor, TestDriver};
    use crate::tok::shapes::{id, lit, p};

    #[test]
    fn int_literals() {
        assert_eq!(parse_int_literal("256"), Some(256));
        assert_eq!(parse_int_literal("1_024"), Some(1024));
        assert_eq!(parse_int_literal("256u32"), Some(256));
        assert_eq!(parse_int_literal("256_usize"), Some(256));
        assert_eq!(parse_int_literal("0x100"), Some(256));
        assert_eq!(parse_int_literal("0xffu16"), Some(255));
        assert_eq!(parse_int_literal("0o400"), Some(256));
        assert_eq!(parse_int_literal("0b1_0000_0000"), Some(256));
        assert_eq!(parse_int_literal("4294967295"), Some(u32::MAX));
        assert_eq!(parse_int_literal("4294967296"), None);
        assert_eq!(parse_int_literal("1.0"), None);
        assert_eq!(parse_int_literal("1e3"), None);
        assert_eq!(parse_int_literal("256f32"), None);
        assert_eq!(parse_int_literal("256u33"), None);
        assert_eq!(parse_int_literal("\"256\""), None);
        assert_eq!(parse_int_literal("0x"), None);
        assert_eq!(parse_int_literal("_"), None);
    }

    #[test]
    fn args_empty_and_entries() {
        assert_eq!(parse_args(&[], Flavor::Main), Ok(Args::default()));
        let toks = [id("entries"), p('='), lit("512")];
        assert_eq!(
            parse_args(&toks, Flavor::Main),
            Ok(Args {
                entries: Some(512),
                driver: None
            })
        );
        let trailing = [id("entries"), p('='), lit("0x200"), p(',')];
        assert_eq!(
            parse_args(&trailing, Flavor::Test),
            Ok(Args {
                entries: Some(512),
                driver: None
            })
        );
    }

    #[test]
    fn args_driver() {
        let toks = [id("driver"), p('='), lit("\"epoll\"")];
        assert_eq!(
            parse_args(&toks, Flavor::Test),
            Ok(Args {
                entries: None,
                driver: Some(TestDriver::Epoll)
            })
        );
        // Both, either order, trailing comma.
        let toks = [
            id("driver"),
            p('='),
            lit("\"uring\""),
            p(','),
            id("entries"),
            p('='),
            lit("8"),
            p(','),
        ];
        assert_eq!(
            parse_args(&toks, Flavor::Test),
            Ok(Args {
                entries: Some(8),
                driver: Some(TestDriver::Uring)
            })
        );
    }

    #[test]
    fn args_driver_errors() {
        // `#[hoop::main]` takes no driver: it follows HOOP_DRIVER (auto by default).
        let err = parse_args(&[id("driver"), p('='), lit("\"epoll\"")], Flavor::Main).unwrap_err();
        assert_eq!(err.at, Some(0));
        assert!(err.message.contains("unknown argument `driver`"), "{err:?}");
        assert!(
            err.message
                .contains("only supported argument is `entries = N`"),
            "{err:?}"
        );

        for bad in [lit("\"auto\""), lit("\"io_uring\""), id("epoll"), lit("1")] {
            let err = parse_args(&[id("driver"), p('='), bad.clone()], Flavor::Test).unwrap_err();
            assert_eq!(err.at, Some(2), "{bad:?}");
            assert!(err.message.contains("`driver = \"epoll\"`"), "{err:?}");
        }
        let err = parse_args(&[id("driver")], Flavor::Test).unwrap_err();
        assert_eq!(err.at, Some(0));
        assert!(
            err.message.contains("expected `driver = \"uring\"`"),
            "{err:?}"
        );

        let twice = [
            id("driver"),
            p('='),
            lit("\"uring\""),
            p(','),
            id("driver"),
            p('='),
            lit("\"epoll\""),
        ];
        let err = parse_args(&twice, Flavor::Test).unwrap_err();
        assert_eq!(err.at, Some(4));
        assert!(
            err.message.contains("`driver` is given more than once"),
            "{err:?}"
        );

        let no_comma = [id("driver"), p('='), lit("\"uring\""), id("entries")];
        let err = parse_args(&no_comma, Flavor::Test).unwrap_err();
        assert_eq!(err.at, Some(3));
        assert!(
            err.message.contains("after `driver = \"uring\"`"),
            "{err:?}"
        );
    }

    #[test]
    fn args_errors() {
        let err = parse_args(&[id("workers"), p('='), lit("4")], Flavor::Main).unwrap_err();
        assert_eq!(err.at, Some(0));
        assert!(
            err.message.contains("unknown argument `workers`"),
            "{err:?}"
        );
        assert!(err.message.contains("#[hoop::main]"), "{err:?}");

        let err = parse_args(&[id("entries")], Flavor::Test).unwrap_err();
        assert_eq!(err.at, Some(0));
        assert!(err.message.contains("#[hoop::test]"), "{err:?}");
        assert!(err.message.contains("entries = N"), "{err:?}");

        let err = parse_args(&[id("entries"), p('=')], Flavor::Main).unwrap_err();
        assert_eq!(err.at, Some(1));
        assert!(err.message.contains("found nothing"), "{err:?}");

        for bad in [lit("\"256\""), lit("1.5"), lit("0"), id("N")] {
            let err = parse_args(&[id("entries"), p('='), bad.clone()], Flavor::Main).unwrap_err();
            assert_eq!(err.at, Some(2), "{bad:?}");
            assert!(err.message.contains("integer literal"), "{err:?}");
        }
        // `-1` is a `-` punct followed by a literal.
        let err = parse_args(&[id("entries"), p('='), p('-'), lit("1")], Flavor::Main).unwrap_err();
        assert_eq!(err.at, Some(2));

        let twice = [
            id("entries"),
            p('='),
            lit("8"),
            p(','),
            id("entries"),
            p('='),
            lit("16"),
        ];
        let err = parse_args(&twice, Flavor::Main).unwrap_err();
        assert_eq!(err.at, Some(4));
        assert!(err.message.contains("more than once"), "{err:?}");

        let no_comma = [id("entries"), p('='), lit("8"), id("entries")];
        let err = parse_args(&no_comma, Flavor::Main).unwrap_err();
        assert_eq!(err.at, Some(3));

        let err = parse_args(&[lit("8")], Flavor::Main).unwrap_err();
        assert_eq!(err.at, Some(0));
        assert!(err.message.contains("expected an argument"), "{err:?}");
    }
}
