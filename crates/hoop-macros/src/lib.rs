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

mod parse;

use parse::{parse_args, parse_fn, run_test_expr, runtime_expr, Args, Delim, ParseError, Tok};
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
