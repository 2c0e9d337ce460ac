//! The annotated `async fn` item, taken apart at the top level, and the expressions the
//! attributes put around its body: no `proc_macro` types here, so every decision is
//! unit-tested outside a compiler. `lib.rs` turns real tokens into [`Tok`] shapes, asks these
//! functions where things are, and slices the real tokens there.

use super::args::{Args, Flavor};
use super::tok::{Delim, ParseError, Tok};

/// The name of the inner `async fn` that holds a test's body.
pub(crate) const TEST_BODY: &str = "__hoop_test_body";

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
    use super::{parse_fn, run_test_expr, runtime_expr, FnParts};
    use crate::args::{Args, Flavor, TestDriver};
    use crate::tok::shapes::{g, id, lit, p};
    use crate::tok::{Delim, Tok};

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
