//! Attribute macros for the hoop runtime: `#[hoop::main]` and `#[hoop::test]`.
//!
//! `#[hoop::main]` turns an `async fn` into an ordinary `fn` that starts a
//! `hoop::Runtime` and blocks on the original body:
//!
//! ```ignore
//! #[hoop::main]
//! async fn main() -> std::io::Result<()> {
//!     // ...
//!     Ok(())
//! }
//!
//! // expands to
//!
//! fn main() -> std::io::Result<()> {
//!     ::hoop::Runtime::new()
//!         .unwrap_or_else(|e| ::core::panic!("hoop: cannot start the runtime: {}", e))
//!         .block_on(async move {
//!             // ...
//!             Ok(())
//!         })
//! }
//! ```
//!
//! `#[hoop::test]` runs the body once on each driver, io_uring then epoll,
//! each on a fresh runtime:
//!
//! ```ignore
//! #[hoop::test]
//! async fn reads() -> std::io::Result<()> {
//!     // ...
//!     Ok(())
//! }
//!
//! // expands to
//!
//! #[::core::prelude::v1::test]
//! fn reads() -> std::io::Result<()> {
//!     async fn __hoop_test_body() -> std::io::Result<()> {
//!         // ...
//!         Ok(())
//!     }
//!     ::hoop::__private::run_test(
//!         &[::hoop::DriverKind::Uring, ::hoop::DriverKind::Epoll],
//!         ::core::option::Option::None, // entries
//!         false,                        // #[should_panic]: every driver must panic
//!         __hoop_test_body,
//!     )
//! }
//! ```
//!
//! Both accept `entries = N` (an integer literal), which builds the runtime
//! with `.entries(N)`; `#[hoop::test]` also accepts `driver = "uring"` or
//! `driver = "epoll"`, which runs the body on that driver only.
//!
//! This crate deliberately has no dependencies: the input is only taken apart
//! at the top level (attributes, qualifiers, body), which a few lines of
//! token matching handle. The decisions are made on [`Tok`], a plain copy of
//! each token's shape, so they can be unit-tested outside a compiler; the
//! `proc_macro` layer then slices the real tokens (keeping their spans) at
//! the positions those decisions return.

#![warn(missing_docs)]

use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

/// Marks the `async fn main` of a program that runs on hoop.
///
/// The function keeps its name, attributes, visibility, parameters and return
/// type, loses its `async`, and its body becomes
/// `::hoop::Runtime::new()....block_on(async move { body })`.
/// With `#[hoop::main(entries = 1024)]` the runtime is built by
/// `::hoop::Runtime::builder().entries(1024).build()` instead.
///
/// If the runtime cannot start, the program panics with the reason.
///
/// ```ignore
/// #[hoop::main(entries = 512)]
/// async fn main() {
///     println!("running on hoop");
/// }
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Flavor::Main, args, item)
}

/// Marks an `async fn` test that runs once on each hoop driver.
///
/// Adds `#[test]`, so other test attributes (`#[should_panic]`, `#[ignore]`,
/// ...) can follow it as usual. The body runs on a fresh runtime built with
/// `::hoop::Runtime::builder().driver(kind)`, first with io_uring, then with
/// epoll; the test stops at the first failure, and a panic's message starts
/// with the driver (`driver=Epoll: ...`). The body may return `()` or a
/// `Result` (the first `Err` is returned, after a line on stderr naming the
/// driver). With `#[should_panic]`, every driver must panic. Where io_uring
/// is unavailable, its run is skipped with a line on stderr.
///
/// Arguments, all optional: `entries = N` (SQ entries of the ring) and
/// `driver = "uring"` or `driver = "epoll"` (run on that driver only).
///
/// ```ignore
/// #[hoop::test]
/// async fn reads_a_file() -> std::io::Result<()> {
///     // ...
///     Ok(())
/// }
///
/// #[hoop::test(driver = "uring", entries = 8)]
/// async fn tiny_ring() {
///     // ...
/// }
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Flavor::Test, args, item)
}

/// Which of the two attributes is being expanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    Main,
    Test,
}

impl Flavor {
    /// The attribute as the user writes it, for error messages.
    fn attr(self) -> &'static str {
        match self {
            Flavor::Main => "#[hoop::main]",
            Flavor::Test => "#[hoop::test]",
        }
    }
}

// ---------------------------------------------------------------------------
// The proc_macro layer: converts tokens, calls the parsers, assembles output.
// ---------------------------------------------------------------------------

fn expand(flavor: Flavor, args: TokenStream, item: TokenStream) -> TokenStream {
    let item_trees: Vec<TokenTree> = item.clone().into_iter().collect();
    let parts = match parse_fn(&shapes(&item_trees), flavor) {
        Ok(parts) => parts,
        // Not something we can rewrite: report it and hand the item back
        // untouched, so the error is the only one the user sees about it.
        Err(err) => {
            let mut out = compile_error(&err, &item_trees);
            out.extend(item);
            return out;
        }
    };

    let mut out = TokenStream::new();
    let arg_trees = flatten_invisible(args);
    let args = match parse_args(&shapes(&arg_trees), flavor) {
        Ok(args) => args,
        // A bad argument: report it, but still expand with the defaults so
        // the function itself does not cause follow-up errors
        // (e.g. "`main` function is not allowed to be `async`").
        Err(err) => {
            out.extend(compile_error(&err, &arg_trees));
            Args::default()
        }
    };

    if flavor == Flavor::Test {
        out.extend(parse("#[::core::prelude::v1::test]"));
    }
    // Attributes, visibility and qualifiers before `async`, then everything
    // after it (`fn name(params) -> Ret where ...`) up to the body.
    out.extend(item_trees[..parts.async_at].iter().cloned());
    out.extend(
        item_trees[parts.async_at + 1..parts.body_at]
            .iter()
            .cloned(),
    );

    let TokenTree::Group(body) = &item_trees[parts.body_at] else {
        unreachable!("parse_fn checked that the body is a brace group")
    };
    let new_body = match flavor {
        Flavor::Main => main_body(args.entries, body.clone()),
        Flavor::Test => {
            let expect_panic = has_should_panic(&item_trees[..parts.async_at]);
            // `(params) -> Ret where ...`: what follows the name.
            let signature = &item_trees[parts.fn_at + 2..parts.body_at];
            test_body(&args, expect_panic, signature, body.clone())
        }
    };
    out.extend([TokenTree::Group(Group::new(Delimiter::Brace, new_body))]);
    out
}

/// `RUNTIME.unwrap_or_else(|e| panic!(...)).block_on(async move { body })`.
fn main_body(entries: Option<u32>, body: Group) -> TokenStream {
    let mut out = parse(&runtime_expr(entries));
    // `.block_on( async move { body } )`: the user's brace group is reused
    // as is, so its tokens keep their spans.
    let future: TokenStream = [
        TokenTree::Ident(Ident::new("async", Span::call_site())),
        TokenTree::Ident(Ident::new("move", Span::call_site())),
        TokenTree::Group(body),
    ]
    .into_iter()
    .collect();
    out.extend(parse(".block_on"));
    out.extend([TokenTree::Group(Group::new(Delimiter::Parenthesis, future))]);
    out
}

/// `async fn __hoop_test_body(params) -> Ret { body }` followed by
/// `::hoop::__private::run_test(DRIVERS, ENTRIES, EXPECT_PANIC, __hoop_test_body)`.
///
/// The body becomes an `async fn` with the test's own return type, so `?`
/// and `return` mean what they meant, and it can be run once per driver.
fn test_body(args: &Args, expect_panic: bool, signature: &[TokenTree], body: Group) -> TokenStream {
    let mut out = parse(&format!("async fn {TEST_BODY}"));
    out.extend(signature.iter().cloned());
    out.extend([TokenTree::Group(body)]);
    out.extend(parse(&run_test_expr(args, expect_panic)));
    out
}

/// The name of the inner `async fn` that holds a test's body.
const TEST_BODY: &str = "__hoop_test_body";

/// Whether one of `attrs` (the item's outer attributes) is `#[should_panic...]`.
fn has_should_panic(attrs: &[TokenTree]) -> bool {
    attrs.iter().any(|tree| match tree {
        TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket => {
            g.stream().into_iter().next().is_some_and(
                |t| matches!(&t, TokenTree::Ident(i) if i.to_string() == "should_panic"),
            )
        }
        _ => false,
    })
}

/// Parses generated source that is known to be valid.
fn parse(src: &str) -> TokenStream {
    src.parse()
        .unwrap_or_else(|e| panic!("hoop-macros generated invalid tokens `{src}`: {e:?}"))
}

/// `::core::compile_error!("message");`, spanned at the offending token
/// (or the attribute itself) so the error points at the right place.
fn compile_error(err: &ParseError, trees: &[TokenTree]) -> TokenStream {
    let span = err
        .at
        .and_then(|i| trees.get(i))
        .map_or_else(Span::call_site, TokenTree::span);
    let mut message = Literal::string(&err.message);
    message.set_span(span);
    let tokens = vec![
        TokenTree::Punct(Punct::new(':', Spacing::Joint)),
        TokenTree::Punct(Punct::new(':', Spacing::Alone)),
        TokenTree::Ident(Ident::new("core", span)),
        TokenTree::Punct(Punct::new(':', Spacing::Joint)),
        TokenTree::Punct(Punct::new(':', Spacing::Alone)),
        TokenTree::Ident(Ident::new("compile_error", span)),
        TokenTree::Punct(Punct::new('!', Spacing::Alone)),
        TokenTree::Group(Group::new(
            Delimiter::Parenthesis,
            TokenTree::Literal(message).into(),
        )),
        TokenTree::Punct(Punct::new(';', Spacing::Alone)),
    ];
    tokens
        .into_iter()
        .map(|mut tree| {
            tree.set_span(span);
            tree
        })
        .collect()
}

/// Splices the contents of invisible groups (what `macro_rules!` wraps
/// around `$x:literal` and friends) into the surrounding stream, so
/// `entries = $n` works from inside a declarative macro.
fn flatten_invisible(stream: TokenStream) -> Vec<TokenTree> {
    let mut out = Vec::new();
    for tree in stream {
        match tree {
            TokenTree::Group(g) if g.delimiter() == Delimiter::None => {
                out.extend(flatten_invisible(g.stream()));
            }
            other => out.push(other),
        }
    }
    out
}

/// The shape of each token, for the parsers below.
fn shapes(trees: &[TokenTree]) -> Vec<Tok> {
    trees
        .iter()
        .map(|tree| match tree {
            TokenTree::Ident(i) => Tok::Ident(i.to_string()),
            TokenTree::Punct(p) => Tok::Punct(p.as_char()),
            TokenTree::Literal(l) => Tok::Literal(l.to_string()),
            TokenTree::Group(g) => Tok::Group(match g.delimiter() {
                Delimiter::Parenthesis => Delim::Paren,
                Delimiter::Brace => Delim::Brace,
                Delimiter::Bracket => Delim::Bracket,
                Delimiter::None => Delim::Invisible,
            }),
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Pure logic: no proc_macro types below this line, so it is unit-tested.
// ---------------------------------------------------------------------------

/// The shape of one top-level token: enough to recognise keywords,
/// punctuation and groups, without the contents of groups.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Punct(char),
    /// The literal as written, e.g. `256`, `0x100`, `1_024u32`, `"text"`.
    Literal(String),
    Group(Delim),
}

/// A group's delimiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delim {
    Paren,
    Brace,
    Bracket,
    Invisible,
}

impl Tok {
    fn is_ident(&self, name: &str) -> bool {
        matches!(self, Tok::Ident(s) if s == name)
    }

    fn is_punct(&self, c: char) -> bool {
        *self == Tok::Punct(c)
    }

    /// How the token reads in an error message.
    fn describe(&self) -> String {
        match self {
            Tok::Ident(s) | Tok::Literal(s) => format!("`{s}`"),
            Tok::Punct(c) => format!("`{c}`"),
            Tok::Group(Delim::Paren) => "`(...)`".to_owned(),
            Tok::Group(Delim::Brace) => "`{...}`".to_owned(),
            Tok::Group(Delim::Bracket) => "`[...]`".to_owned(),
            Tok::Group(Delim::Invisible) => "a macro fragment".to_owned(),
        }
    }
}

/// A problem to report with `compile_error!`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ParseError {
    /// Index of the offending token, if there is one to point at.
    at: Option<usize>,
    message: String,
}

impl ParseError {
    fn new(at: Option<usize>, message: String) -> Self {
        ParseError { at, message }
    }
}

/// The parsed attribute arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Args {
    /// `entries = N`: the ring size to build the runtime with.
    entries: Option<u32>,
    /// `driver = "uring" | "epoll"` (`#[hoop::test]` only): run on that
    /// driver only instead of on both.
    driver: Option<TestDriver>,
}

/// The driver named by `driver = "..."`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TestDriver {
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
fn parse_args(toks: &[Tok], flavor: Flavor) -> Result<Args, ParseError> {
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
fn parse_int_literal(lit: &str) -> Option<u32> {
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
struct FnParts {
    /// The `async` keyword, to be dropped.
    async_at: usize,
    /// The `fn` keyword; the name follows it.
    fn_at: usize,
    /// The body `{ ... }`, always the last token.
    body_at: usize,
}

/// Checks that the item is `#[attrs]* vis? qualifiers* async qualifiers* fn
/// name ... { body }` and finds the `async` keyword and the body.
///
/// Only the top level is looked at: what lies between the name and the body
/// (generics, parameters, return type, where clause) is passed through for
/// the compiler to check.
fn parse_fn(toks: &[Tok], flavor: Flavor) -> Result<FnParts, ParseError> {
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
fn runtime_expr(entries: Option<u32>) -> String {
    let build = match entries {
        None => "::hoop::Runtime::new()".to_owned(),
        Some(n) => format!("::hoop::Runtime::builder().entries({n}).build()"),
    };
    format!(
        "{build}.unwrap_or_else(|e| ::core::panic!(\"hoop: cannot start the runtime: {{}}\", e))"
    )
}

/// The call that runs a test's body (the inner `async fn`) on its drivers.
fn run_test_expr(args: &Args, expect_panic: bool) -> String {
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
    use super::{
        parse_args, parse_fn, parse_int_literal, run_test_expr, runtime_expr, Args, Delim, Flavor,
        FnParts, TestDriver, Tok,
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
