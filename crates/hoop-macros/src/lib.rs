//! Macros for the hoop runtime: `#[hoop::main]`, `#[hoop::test]` and [`select!`] (tokio's
//! `select!`, described at the macro).
//!
//! Use them through the `hoop` crate (`hoop::main`, `hoop::test`, `hoop::select!`), which
//! re-exports them; their expansions name `::hoop`. This crate has no cargo features and no
//! dependencies.
//!
//! ```
//! use std::time::Duration;
//!
//! #[hoop::main]
//! async fn main() -> std::io::Result<()> {
//!     let stop = hoop::sync::CancellationToken::new();
//!     let worker = hoop::spawn({
//!         let stop = stop.clone();
//!         async move {
//!             let mut interval = hoop::time::interval(Duration::from_millis(1));
//!             let mut ticks = 0u32;
//!             loop {
//!                 hoop::select! {
//!                     biased;
//!                     _ = stop.cancelled() => return ticks,
//!                     _ = interval.tick() => ticks += 1,
//!                 }
//!             }
//!         }
//!     });
//!     hoop::time::sleep(Duration::from_millis(10)).await;
//!     stop.cancel();
//!     let ticks = worker.await?;
//!     assert!(ticks >= 1); // an interval's first tick is immediate
//!     Ok(())
//! }
//! ```
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
//! token matching handle. The decisions are made on `Tok`, a plain copy of
//! each token's shape, so they can be unit-tested outside a compiler; the
//! `proc_macro` layer then slices the real tokens (keeping their spans) at
//! the positions those decisions return.

#![warn(missing_docs)]

/// The README's examples, compiled with the doc tests so the crate page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod args;
mod parse;
mod select;
mod tok;

use args::{parse_args, Args, Flavor};
use parse::{parse_fn, run_test_expr, runtime_expr, TEST_BODY};
use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use select::{out_enum, parse_select, start_expr};
use tok::{Delim, ParseError, Tok};

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

/// Waits on several futures at once and runs the handler of the first to complete whose
/// output matches its pattern: tokio's `select!`, implemented by hoop (no tokio needed).
///
/// ```text
/// hoop::select! {
///     biased;                                            // optional: poll in order
///     <pattern> = <async expression> (, if <precondition>)? => <handler>,
///     ...
///     else => <expression>                               // optional, last
/// }
/// ```
///
/// 1. Every precondition is evaluated; a branch whose precondition is false is disabled.
/// 2. Every async expression is evaluated (disabled branches' too) and turned into a future
///    with `IntoFuture`; the futures are pinned on the stack, so they need not be `Unpin`
///    nor fused, and `&mut fut` works for a future that must outlive the `select!`.
/// 3. The enabled futures are polled, starting at a pseudo-random branch each time (or in
///    the written order with `biased;`). When one completes, its output is checked against
///    its pattern: if it does not match (`Some(x) = set.join_next()` getting `None`), that
///    branch is disabled and the others are polled on.
/// 4. When one matches, every future is dropped and then the handler runs, in the caller's
///    async context: it may `.await`, use `?`, `return`, and `break`/`continue` an enclosing
///    loop. The value of `select!` is the handler's.
/// 5. If every branch is disabled, the `else` expression runs; without one, `select!` panics
///    with "all branches are disabled and there is no else branch".
///
/// Up to 64 branches. Generated code refers to `::hoop`, so the crate must be a dependency
/// under that name.
///
/// `futures::select!` (and `futures::select_biased!`) still work: they are different macros,
/// and hoop's types are fused for them (see the `hoop::select` module). hoop no longer
/// re-exports `select_biased!`: write `biased;` first.
///
/// ```ignore
/// loop {
///     hoop::select! {
///         biased;
///         _ = stop.cancelled() => break,
///         Some(res) = set.join_next(), if !set.is_empty() => res?,
///         conn = listener.accept() => { set.spawn(serve(conn?.0)); }
///     }
/// }
/// ```
#[proc_macro]
pub fn select(input: TokenStream) -> TokenStream {
    let trees: Vec<TokenTree> = input.into_iter().collect();
    match parse_select(&shapes_with(&trees, true)) {
        Ok(parsed) => expand_select(&parsed, &trees),
        Err(err) => {
            // An expression: `compile_error!("..")` without the `;` (an error expression,
            // which type-checks as anything, so no follow-up errors).
            let mut error: Vec<TokenTree> = compile_error(&err, &trees).into_iter().collect();
            error.pop();
            error.into_iter().collect()
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
    shapes_with(trees, false)
}

/// The shape of each token; with `joints`, a punctuation character joined to the next one is
/// a [`Tok::Joint`] (`select!` must tell `=>` from `= >` and `=` from `==`).
fn shapes_with(trees: &[TokenTree], joints: bool) -> Vec<Tok> {
    trees
        .iter()
        .map(|tree| match tree {
            TokenTree::Ident(i) => Tok::Ident(i.to_string()),
            TokenTree::Punct(p) if joints && p.spacing() == Spacing::Joint => {
                Tok::Joint(p.as_char())
            }
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
// select!
// ---------------------------------------------------------------------------

/// Generated tokens, with `macro_rules!`-like hygiene: the expansion's local variables
/// (`__hoop_out`, the pinned futures, ...) are invisible to the user's tokens, and two nested
/// `select!`s never see each other's; paths (`::hoop`, `::core`) resolve at the call site.
fn gen(src: &str) -> TokenStream {
    respan(parse(src), Span::mixed_site())
}

fn respan(stream: TokenStream, span: Span) -> TokenStream {
    stream
        .into_iter()
        .map(|tree| match tree {
            TokenTree::Group(g) => {
                let mut new = Group::new(g.delimiter(), respan(g.stream(), span));
                new.set_span(span);
                TokenTree::Group(new)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}

/// A generated group around `inner`.
fn group(delimiter: Delimiter, inner: TokenStream) -> TokenStream {
    let mut g = Group::new(delimiter, inner);
    g.set_span(Span::mixed_site());
    TokenTree::Group(g).into()
}

/// The user's tokens in `range`.
fn slice(trees: &[TokenTree], range: &std::ops::Range<usize>) -> TokenStream {
    trees[range.clone()].iter().cloned().collect()
}

/// The pattern with `mut` and `ref` removed, to test an output by reference (`match &out`)
/// without moving out of it, as tokio does.
fn clean_pattern(stream: TokenStream) -> TokenStream {
    stream
        .into_iter()
        .filter(|tree| !matches!(tree, TokenTree::Ident(i) if i.to_string() == "mut" || i.to_string() == "ref"))
        .map(|tree| match tree {
            TokenTree::Group(g) => {
                let mut new = Group::new(g.delimiter(), clean_pattern(g.stream()));
                new.set_span(g.span());
                TokenTree::Group(new)
            }
            other => other,
        })
        .collect()
}

/// The expansion, for branches `0..n`:
///
/// ```text
/// {
///     enum __HoopOut<T0, ..> { B0(T0), .., Disabled }
///     let __hoop_out = {
///         let __hoop_c0: bool = (PRECONDITION or true); ..
///         let mut __hoop_f0 = pin!(IntoFuture::into_future(FUTURE)); ..
///         let mut __hoop_disabled: u64 = 0;
///         if !__hoop_c0 { __hoop_disabled |= 1 << 0; } ..
///         poll_fn(|cx| { poll the enabled futures from the start branch on; .. }).await
///     }; // the futures are dropped here
///     match __hoop_out {
///         __HoopOut::B0(PATTERN) => HANDLER, ..
///         __HoopOut::Disabled => ELSE (or panic!),
///         _ => unreachable!(),
///     }
/// }
/// ```
fn expand_select(parsed: &select::Select, trees: &[TokenTree]) -> TokenStream {
    let n = parsed.branches.len();
    let mut inner = TokenStream::new();
    for (i, b) in parsed.branches.iter().enumerate() {
        inner.extend(gen(&format!("let __hoop_c{i}: bool =")));
        match &b.cond {
            Some(cond) => inner.extend(group(Delimiter::Parenthesis, slice(trees, cond))),
            None => inner.extend(gen("true")),
        }
        inner.extend(gen(";"));
    }
    for (i, b) in parsed.branches.iter().enumerate() {
        // `pin!` pins on the stack, soundly and without `unsafe`: the future is moved into a
        // place the macro's own borrow keeps from ever being moved again.
        inner.extend(gen(&format!("let mut __hoop_f{i} = ::core::pin::pin!")));
        let mut into = gen("::core::future::IntoFuture::into_future");
        into.extend(group(Delimiter::Parenthesis, slice(trees, &b.fut)));
        inner.extend(group(Delimiter::Parenthesis, into));
        inner.extend(gen(";"));
    }
    inner.extend(gen("let mut __hoop_disabled: u64 = 0;"));
    for i in 0..n {
        inner.extend(gen(&format!(
            "if !__hoop_c{i} {{ __hoop_disabled |= 1u64 << {i}u32; }}"
        )));
    }

    // The poll function's body.
    let mut arms = TokenStream::new();
    for (i, b) in parsed.branches.iter().enumerate() {
        let mut arm = gen(&format!(
            "let __hoop_o = match ::core::future::Future::poll(\
                 ::core::pin::Pin::as_mut(&mut __hoop_f{i}), __hoop_cx) {{\
                 ::core::task::Poll::Ready(o) => o,\
                 ::core::task::Poll::Pending => {{ __hoop_pending = true; continue; }}\
             }};\
             __hoop_disabled |= 1u64 << {i}u32;\
             match &__hoop_o"
        ));
        let mut check = gen("#[allow(unused_variables)]");
        check.extend(clean_pattern(slice(trees, &b.pat)));
        check.extend(gen("=> {} #[allow(unreachable_patterns)] _ => continue,"));
        arm.extend(group(Delimiter::Brace, check));
        arm.extend(gen(&format!(
            "return ::core::task::Poll::Ready(__HoopOut::B{i}(__hoop_o));"
        )));
        arms.extend(gen(&format!("{i}u32 =>")));
        arms.extend(group(Delimiter::Brace, arm));
    }
    arms.extend(gen("_ => ::core::unreachable!(),"));
    let branch = if n == 1 {
        "let __hoop_b = __hoop_start + __hoop_n;".to_owned()
    } else {
        format!("let __hoop_b = (__hoop_start + __hoop_n) % {n}u32;")
    };
    let mut each = gen(&branch);
    each.extend(gen(
        "if __hoop_disabled & (1u64 << __hoop_b) != 0 { continue; } match __hoop_b",
    ));
    each.extend(group(Delimiter::Brace, arms));
    let mut body = gen(&start_expr(n, parsed.biased));
    body.extend(gen(&format!(
        "let mut __hoop_pending = false; for __hoop_n in 0..{n}u32"
    )));
    body.extend(group(Delimiter::Brace, each));
    body.extend(gen("if __hoop_pending { ::core::task::Poll::Pending } \
         else { ::core::task::Poll::Ready(__HoopOut::Disabled) }"));
    // `poll_fn(|cx| { body }).await`
    let mut closure = gen("|__hoop_cx: &mut ::core::task::Context<'_>|");
    closure.extend(group(Delimiter::Brace, body));
    inner.extend(gen("::core::future::poll_fn"));
    inner.extend(group(Delimiter::Parenthesis, closure));
    inner.extend(gen(".await"));

    // The handlers.
    let mut handlers = TokenStream::new();
    for (i, b) in parsed.branches.iter().enumerate() {
        handlers.extend(gen(&format!("__HoopOut::B{i}")));
        handlers.extend(group(Delimiter::Parenthesis, slice(trees, &b.pat)));
        handlers.extend(gen("=>"));
        handlers.extend(slice(trees, &b.handler));
        handlers.extend(gen(","));
    }
    handlers.extend(gen("__HoopOut::Disabled =>"));
    match &parsed.else_expr {
        Some(expr) => handlers.extend(slice(trees, expr)),
        None => handlers.extend(gen(
            "::core::panic!(\"all branches are disabled and there is no else branch\")",
        )),
    }
    handlers.extend(gen(
        ", #[allow(unreachable_patterns)] _ => ::core::unreachable!(\"hoop::select!: the pattern matched the output, then did not\"),",
    ));

    let mut block = gen(&out_enum(n));
    block.extend(gen("let __hoop_out ="));
    block.extend(group(Delimiter::Brace, inner));
    block.extend(gen("; match __hoop_out"));
    block.extend(group(Delimiter::Brace, handlers));
    group(Delimiter::Brace, block)
}
