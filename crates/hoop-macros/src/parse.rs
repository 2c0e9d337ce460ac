//! The macros' input, taken apart at the top level: no `proc_macro` types here, so every
//! decision is unit-tested outside a compiler. `lib.rs` turns real tokens into [`Tok`] shapes,
//! asks these functions where things are, and slices the real tokens there.

use super::{Flavor, TEST_BODY};

/// The shape of one top-level token: enough to recognise keywords,
/// punctuation and groups, without the contents of groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    Ident(String),
    Punct(char),
    /// A punctuation character joined to the next one (the `=` of `=>`, the first `:` of
    /// `::`). Only `select!` tells these apart; the attributes see them as [`Tok::Punct`].
    Joint(char),
    /// The literal as written, e.g. `256`, `0x100`, `1_024u32`, `"text"`.
    Literal(String),
    Group(Delim),
}

/// A group's delimiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delim {
    Paren,
    Brace,
    Bracket,
    Invisible,
}

impl Tok {
    pub(crate) fn is_ident(&self, name: &str) -> bool {
        matches!(self, Tok::Ident(s) if s == name)
    }

    pub(crate) fn is_punct(&self, c: char) -> bool {
        *self == Tok::Punct(c)
    }

    /// How the token reads in an error message.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) | Tok::Literal(s) => format!("`{s}`"),
            Tok::Punct(c) | Tok::Joint(c) => format!("`{c}`"),
            Tok::Group(Delim::Paren) => "`(...)`".to_owned(),
            Tok::Group(Delim::Brace) => "`{...}`".to_owned(),
            Tok::Group(Delim::Bracket) => "`[...]`".to_owned(),
            Tok::Group(Delim::Invisible) => "a macro fragment".to_owned(),
        }
    }
}

/// A problem to report with `compile_error!`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    /// Index of the offending token, if there is one to point at.
    pub(crate) at: Option<usize>,
    pub(crate) message: String,
}

impl ParseError {
    fn new(at: Option<usize>, message: String) -> Self {
        ParseError { at, message }
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
    fn variant(self) -> &'static str {
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

/// Where the pieces of an `async fn` item are, as token indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FnParts {
    /// The `async` keyword, to be dropped.
    pub(crate) async_at: usize,
    /// The `fn` keyword; the name follows it.
    pub(crate) fn_at: usize,
    /// The body `{ ... }`, always the last token.
    pub(crate) body_at: usize,
}

/// Checks that the item is `#[attrs]* vis? qualifiers* async qualifiers* fn
/// name ... { body }` and finds the `async` keyword and the body.
///
/// Only the top level is looked at: what lies between the name and the body
/// (generics, parameters, return type, where clause) is passed through for
/// the compiler to check.
pub(crate) fn parse_fn(toks: &[Tok], flavor: Flavor) -> Result<FnParts, ParseError> {
    let attr = flavor.attr();
    let not_a_fn = |at: Option<usize>| {
        ParseError::new(
            at,
            format!("{attr} can only be applied to an `async fn` with a body"),
        )
    };

    let mut i = 0;
    // Outer attributes, including doc comments: `#` followed by `[...]`.
    while toks.get(i).is_some_and(|t| t.is_punct('#'))
        && toks.get(i + 1) == Some(&Tok::Group(Delim::Bracket))
    {
        i += 2;
    }
    // Visibility: `pub`, `pub(crate)`, `pub(in path)`, ...
    if toks.get(i).is_some_and(|t| t.is_ident("pub")) {
        i += 1;
        if toks.get(i) == Some(&Tok::Group(Delim::Paren)) {
            i += 1;
        }
    }
    // Qualifiers up to `fn`: `const`, `async`, `unsafe`, `extern "abi"`.
    let mut async_at = None;
    loop {
        match toks.get(i) {
            Some(t) if t.is_ident("async") => async_at = Some(i),
            Some(t) if t.is_ident("const") || t.is_ident("unsafe") => {}
            Some(t) if t.is_ident("extern") => {
                if matches!(toks.get(i + 1), Some(Tok::Literal(_))) {
                    i += 1;
                }
            }
            Some(t) if t.is_ident("fn") => break,
            Some(_) => return Err(not_a_fn(Some(i))),
            None => return Err(not_a_fn(None)),
        }
        i += 1;
    }
    let fn_at = i;
    if !matches!(toks.get(fn_at + 1), Some(Tok::Ident(_))) {
        return Err(not_a_fn(Some(fn_at)));
    }
    let Some(async_at) = async_at else {
        return Err(ParseError::new(
            Some(fn_at),
            format!("{attr} must be applied to an `async fn`; add `async` before `fn`"),
        ));
    };
    // The body is the last token; a declaration ending in `;` has none.
    let body_at = toks.len() - 1;
    if body_at <= fn_at + 1 || toks[body_at] != Tok::Group(Delim::Brace) {
        return Err(not_a_fn(Some(body_at)));
    }
    Ok(FnParts {
        async_at,
        fn_at,
        body_at,
    })
}

/// The expression that creates the runtime, ending in `.unwrap_or_else(...)`
/// so that it evaluates to the runtime itself.
///
/// `panic!` takes `{}` with an explicit argument rather than `{e}`: these
/// tokens get the user's edition, and before 2021 a lone format string would
/// not be formatted.
pub(crate) fn runtime_expr(entries: Option<u32>) -> String {
    let build = match entries {
        None => "::hoop::Runtime::new()".to_owned(),
        Some(n) => format!("::hoop::Runtime::builder().entries({n}).build()"),
    };
    format!(
        "{build}.unwrap_or_else(|e| ::core::panic!(\"hoop: cannot start the runtime: {{}}\", e))"
    )
}

/// The call that runs a test's body (the inner `async fn`) on its drivers.
pub(crate) fn run_test_expr(args: &Args, expect_panic: bool) -> String {
    let drivers = match args.driver {
        Some(d) => format!("::hoop::DriverKind::{}", d.variant()),
        None => "::hoop::DriverKind::Uring, ::hoop::DriverKind::Epoll".to_owned(),
    };
    let entries = match args.entries {
        Some(n) => format!("::core::option::Option::Some({n}u32)"),
        None => "::core::option::Option::None".to_owned(),
    };
    format!("::hoop::__private::run_test(&[{drivers}], {entries}, {expect_panic}, {TEST_BODY})")
}

#[cfg(test)]
mod tests {
    use super::Flavor;
    use super::{
        parse_args, parse_fn, parse_int_literal, run_test_expr, runtime_expr, Args, Delim, FnParts,
        TestDriver, Tok,
    };

    fn id(s: &str) -> Tok {
        Tok::Ident(s.to_owned())
    }
    fn p(c: char) -> Tok {
        Tok::Punct(c)
    }
    fn lit(s: &str) -> Tok {
        Tok::Literal(s.to_owned())
    }
    fn g(d: Delim) -> Tok {
        Tok::Group(d)
    }

    /// `async fn main() { }`
    fn plain_main() -> Vec<Tok> {
        vec![
            id("async"),
            id("fn"),
            id("main"),
            g(Delim::Paren),
            g(Delim::Brace),
        ]
    }

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

    #[test]
    fn fn_plain() {
        assert_eq!(
            parse_fn(&plain_main(), Flavor::Main),
            Ok(FnParts {
                async_at: 0,
                fn_at: 1,
                body_at: 4
            })
        );
    }

    #[test]
    fn fn_with_attrs_vis_and_return_type() {
        // #[doc = ".."] #[allow(x)] pub(crate) async fn run() -> io::Result<()> { }
        let toks = vec![
            p('#'),
            g(Delim::Bracket),
            p('#'),
            g(Delim::Bracket),
            id("pub"),
            g(Delim::Paren),
            id("async"),
            id("fn"),
            id("run"),
            g(Delim::Paren),
            p('-'),
            p('>'),
            id("io"),
            p(':'),
            p(':'),
            id("Result"),
            p('<'),
            g(Delim::Paren),
            p('>'),
            g(Delim::Brace),
        ];
        assert_eq!(
            parse_fn(&toks, Flavor::Test),
            Ok(FnParts {
                async_at: 6,
                fn_at: 7,
                body_at: 19
            })
        );
    }

    #[test]
    fn fn_with_other_qualifiers() {
        // pub async unsafe extern "C" fn f() {}
        let toks = vec![
            id("pub"),
            id("async"),
            id("unsafe"),
            id("extern"),
            lit("\"C\""),
            id("fn"),
            id("f"),
            g(Delim::Paren),
            g(Delim::Brace),
        ];
        assert_eq!(
            parse_fn(&toks, Flavor::Main),
            Ok(FnParts {
                async_at: 1,
                fn_at: 5,
                body_at: 8
            })
        );
    }

    #[test]
    fn fn_not_async() {
        let mut toks = plain_main();
        toks.remove(0);
        let err = parse_fn(&toks, Flavor::Main).unwrap_err();
        assert_eq!(err.at, Some(0));
        assert!(err.message.contains("`async fn`"), "{err:?}");
        assert!(err.message.contains("add `async`"), "{err:?}");
    }

    #[test]
    fn not_a_fn() {
        // struct S;
        let toks = [id("struct"), id("S"), p(';')];
        let err = parse_fn(&toks, Flavor::Test).unwrap_err();
        assert_eq!(err.at, Some(0));
        assert!(err.message.contains("#[hoop::test] can only"), "{err:?}");

        // Nothing at all.
        let err = parse_fn(&[], Flavor::Main).unwrap_err();
        assert_eq!(err.at, None);

        // async fn main();  (no body)
        let mut toks = plain_main();
        *toks.last_mut().unwrap() = p(';');
        let err = parse_fn(&toks, Flavor::Main).unwrap_err();
        assert_eq!(err.at, Some(4));

        // `fn` without a name.
        let err = parse_fn(&[id("async"), id("fn")], Flavor::Main).unwrap_err();
        assert_eq!(err.at, Some(1));
    }

    #[test]
    fn runtime_expressions() {
        assert_eq!(
            runtime_expr(None),
            "::hoop::Runtime::new().unwrap_or_else(|e| ::core::panic!(\"hoop: cannot start the runtime: {}\", e))"
        );
        assert_eq!(
            runtime_expr(Some(64)),
            "::hoop::Runtime::builder().entries(64).build().unwrap_or_else(|e| ::core::panic!(\"hoop: cannot start the runtime: {}\", e))"
        );
    }

    #[test]
    fn run_test_expressions() {
        assert_eq!(
            run_test_expr(&Args::default(), false),
            "::hoop::__private::run_test(&[::hoop::DriverKind::Uring, ::hoop::DriverKind::Epoll], ::core::option::Option::None, false, __hoop_test_body)"
        );
        let args = Args {
            entries: Some(8),
            driver: Some(TestDriver::Epoll),
        };
        assert_eq!(
            run_test_expr(&args, true),
            "::hoop::__private::run_test(&[::hoop::DriverKind::Epoll], ::core::option::Option::Some(8u32), true, __hoop_test_body)"
        );
    }
}
