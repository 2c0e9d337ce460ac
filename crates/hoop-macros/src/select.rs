//! `select!`'s input, taken apart at the top level, and the pieces of its expansion that do not
//! depend on the user's tokens. As in `parse.rs`, the decisions are made on [`Tok`] shapes so
//! they are unit-tested outside a compiler; `lib.rs` slices the real tokens at the ranges
//! returned here.
//!
//! The grammar is tokio's:
//!
//! ```text
//! select! {
//!     biased;                                   // optional, first
//!     <pattern> = <async expression> (, if <precondition>)? => <handler>,
//!     ...
//!     else => <expression>                      // optional, last
//! }
//! ```
//!
//! A handler is a block (the comma after it is optional) or an expression (the comma after it
//! is required unless it is the last branch).

use std::ops::Range;

use super::tok::{Delim, ParseError, Tok};

/// At most this many branches (one bit each in the disabled mask, a `u64`).
pub(crate) const MAX_BRANCHES: usize = 64;

/// One `<pattern> = <future> (, if <cond>)? => <handler>` branch, as token ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Branch {
    pub(crate) pat: Range<usize>,
    pub(crate) fut: Range<usize>,
    pub(crate) cond: Option<Range<usize>>,
    pub(crate) handler: Range<usize>,
}

/// The whole input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Select {
    /// `biased;` came first: poll the branches in order.
    pub(crate) biased: bool,
    pub(crate) branches: Vec<Branch>,
    /// The expression of `else => <expression>`.
    pub(crate) else_expr: Option<Range<usize>>,
}

/// The character of a punctuation token, joined to the next or not.
fn punct(t: Option<&Tok>) -> Option<char> {
    match t {
        Some(Tok::Punct(c) | Tok::Joint(c)) => Some(*c),
        _ => None,
    }
}

/// Whether `toks[i]` is a `=` on its own: not part of `==`, `<=`, `..=`, `=>`, `+=`, ...
fn lone_eq(toks: &[Tok], i: usize) -> bool {
    toks[i] == Tok::Punct('=') && (i == 0 || !matches!(toks[i - 1], Tok::Joint(_)))
}

/// Whether `=>` starts at `toks[i]`.
fn fat_arrow(toks: &[Tok], i: usize) -> bool {
    toks.get(i) == Some(&Tok::Joint('=')) && punct(toks.get(i + 1)) == Some('>')
}

/// Tracks the angle brackets of turbofish generics (`f::<A, B>()`) in an expression, so
/// their commas are not taken for the comma that ends the expression.
#[derive(Default)]
struct Angles(usize);

impl Angles {
    /// Steps over `toks[i]`; returns whether it is inside (or is) a turbofish bracket.
    fn step(&mut self, toks: &[Tok], i: usize) -> bool {
        match punct(toks.get(i)) {
            Some('<') => {
                let turbofish =
                    i >= 2 && punct(toks.get(i - 1)) == Some(':') && toks[i - 2] == Tok::Joint(':');
                if turbofish || self.0 > 0 {
                    self.0 += 1;
                }
            }
            // `->` and `=>` are not closing brackets.
            Some('>') if self.0 > 0 && !matches!(toks[i - 1], Tok::Joint('-' | '=')) => {
                self.0 -= 1;
                return true;
            }
            _ => {}
        }
        self.0 > 0
    }
}

fn err(at: usize, toks: &[Tok], message: &str) -> ParseError {
    // Past the end: point at the last token (or the macro call itself).
    let at = if toks.is_empty() {
        None
    } else {
        Some(at.min(toks.len() - 1))
    };
    ParseError {
        at,
        message: format!("hoop::select!: {message}"),
    }
}

/// A handler starting at `toks[at]`: a block, or an expression up to the next top-level comma.
/// Returns its range and where the next branch starts (after the comma).
fn handler(toks: &[Tok], at: usize, what: &str) -> Result<(Range<usize>, usize), ParseError> {
    if at >= toks.len() {
        return Err(err(
            at,
            toks,
            &format!("expected {what} after `=>`, found nothing"),
        ));
    }
    if toks[at] == Tok::Group(Delim::Brace) {
        let next = at + 1;
        let next = if toks.get(next).is_some_and(|t| t.is_punct(',')) {
            next + 1
        } else {
            next
        };
        return Ok((at..at + 1, next));
    }
    let mut angles = Angles::default();
    let mut i = at;
    while i < toks.len() {
        let in_generics = angles.step(toks, i);
        if !in_generics && toks[i].is_punct(',') {
            if i == at {
                return Err(err(at, toks, &format!("expected {what} after `=>`")));
            }
            return Ok((at..i, i + 1));
        }
        if fat_arrow(toks, i) {
            return Err(err(
                at,
                toks,
                "expected `,` after this handler (a handler that is not a block ends with a comma)",
            ));
        }
        i += 1;
    }
    Ok((at..toks.len(), toks.len()))
}

/// Parses the whole input of `select!`.
pub(crate) fn parse_select(toks: &[Tok]) -> Result<Select, ParseError> {
    let mut i = 0;
    let biased = toks.first().is_some_and(|t| t.is_ident("biased"))
        && toks.get(1).is_some_and(|t| t.is_punct(';'));
    if biased {
        i = 2;
    }
    let mut branches = Vec::new();
    let mut else_expr: Option<Range<usize>> = None;
    let mut else_at = 0;
    while i < toks.len() {
        if toks[i].is_ident("else") && fat_arrow(toks, i + 1) {
            if else_expr.is_some() {
                return Err(err(i, toks, "more than one `else` branch"));
            }
            let (expr, next) = handler(toks, i + 3, "an expression")?;
            else_expr = Some(expr);
            else_at = i;
            i = next;
            continue;
        }
        if else_expr.is_some() {
            return Err(err(
                else_at,
                toks,
                "the `else` branch must be the last branch",
            ));
        }
        if toks[i].is_ident("biased") && toks.get(i + 1).is_some_and(|t| t.is_punct(';')) {
            return Err(err(i, toks, "`biased;` must come before the first branch"));
        }
        let start = i;
        // The pattern: up to the first `=` on its own.
        let eq = loop {
            match toks.get(i) {
                None => {
                    return Err(err(
                        start,
                        toks,
                        "expected `<pattern> = <async expression> => <handler>`, \
                         found no `=` after the pattern",
                    ))
                }
                Some(_) if fat_arrow(toks, i) => {
                    return Err(err(
                        i,
                        toks,
                        "expected `<pattern> = <async expression>` before `=>`",
                    ))
                }
                Some(_) if lone_eq(toks, i) => break i,
                Some(_) => i += 1,
            }
        };
        if eq == start {
            return Err(err(eq, toks, "expected a pattern before `=`"));
        }
        // The future (and the precondition): up to `=>`.
        let mut arrow = eq + 1;
        while arrow < toks.len() && !fat_arrow(toks, arrow) {
            arrow += 1;
        }
        if arrow >= toks.len() {
            return Err(err(
                toks.len(),
                toks,
                "expected `=> <handler>` after the async expression",
            ));
        }
        let comma_if = (eq + 1..arrow)
            .find(|&k| toks[k].is_punct(',') && toks.get(k + 1).is_some_and(|t| t.is_ident("if")));
        let (fut, cond) = match comma_if {
            Some(k) => {
                if k + 2 == arrow {
                    return Err(err(k + 1, toks, "expected a precondition after `if`"));
                }
                (eq + 1..k, Some(k + 2..arrow))
            }
            None => (eq + 1..arrow, None),
        };
        if fut.is_empty() {
            return Err(err(eq, toks, "expected an async expression after `=`"));
        }
        let (handler, next) = handler(toks, arrow + 2, "a handler")?;
        branches.push(Branch {
            pat: start..eq,
            fut,
            cond,
            handler,
        });
        if branches.len() > MAX_BRANCHES {
            return Err(err(
                start,
                toks,
                &format!("at most {MAX_BRANCHES} branches are supported"),
            ));
        }
        i = next;
    }
    if branches.is_empty() {
        return Err(err(
            0,
            toks,
            "expected at least one `<pattern> = <async expression> => <handler>` branch",
        ));
    }
    Ok(Select {
        biased,
        branches,
        else_expr,
    })
}

/// `enum __HoopOut<T0, ..> { B0(T0), .., Disabled }`: the output of the polling loop.
pub(crate) fn out_enum(n: usize) -> String {
    let params: Vec<String> = (0..n).map(|i| format!("T{i}")).collect();
    let variants: Vec<String> = (0..n).map(|i| format!("B{i}(T{i}),")).collect();
    format!(
        "enum __HoopOut<{}> {{ {} Disabled, }}",
        params.join(", "),
        variants.concat()
    )
}

/// Where the polling loop starts: branch 0 with `biased;`, else a pseudo-random branch.
pub(crate) fn start_expr(n: usize, biased: bool) -> String {
    if biased || n == 1 {
        "let __hoop_start: u32 = 0;".to_owned()
    } else {
        format!("let __hoop_start: u32 = ::hoop::__private::select_start({n}u32);")
    }
}

#[cfg(test)]
mod tests {
    use super::{out_enum, parse_select, start_expr, Branch, Delim, Select, Tok};

    fn id(s: &str) -> Tok {
        Tok::Ident(s.to_owned())
    }
    fn p(c: char) -> Tok {
        Tok::Punct(c)
    }
    fn j(c: char) -> Tok {
        Tok::Joint(c)
    }
    fn g(d: Delim) -> Tok {
        Tok::Group(d)
    }
    /// `=>`
    fn arrow() -> [Tok; 2] {
        [j('='), p('>')]
    }

    /// `v = fut() => v,`: 8 tokens.
    fn simple(v: &str) -> Vec<Tok> {
        let mut t = vec![id(v), p('='), id("fut"), g(Delim::Paren)];
        t.extend(arrow());
        t.extend([id(v), p(',')]);
        t
    }

    #[test]
    fn two_branches() {
        let mut toks = simple("a");
        toks.extend(simple("b"));
        let s = parse_select(&toks).unwrap();
        assert!(!s.biased);
        assert_eq!(s.else_expr, None);
        assert_eq!(
            s.branches,
            vec![
                Branch {
                    pat: 0..1,
                    fut: 2..4,
                    cond: None,
                    handler: 6..7
                },
                Branch {
                    pat: 8..9,
                    fut: 10..12,
                    cond: None,
                    handler: 14..15
                },
            ]
        );
    }

    #[test]
    fn biased_precondition_block_and_else() {
        // biased; Some(x) = f, if !done => { .. } else => 0
        let mut toks = vec![id("biased"), p(';')];
        toks.extend([id("Some"), g(Delim::Paren), p('='), id("f")]);
        toks.extend([p(','), id("if"), p('!'), id("done")]);
        toks.extend(arrow());
        toks.push(g(Delim::Brace));
        toks.extend([id("else")]);
        toks.extend(arrow());
        toks.push(Tok::Literal("0".to_owned()));
        let s = parse_select(&toks).unwrap();
        assert_eq!(
            s,
            Select {
                biased: true,
                branches: vec![Branch {
                    pat: 2..4,
                    fut: 5..6,
                    cond: Some(8..10),
                    handler: 12..13
                }],
                else_expr: Some(16..17),
            }
        );
    }

    #[test]
    fn operators_are_not_the_separators() {
        // x = a == b..=c => f::<A, B>(), y = g => y
        let mut toks = vec![id("x"), p('='), id("a"), j('='), p('='), id("b")];
        toks.extend([j('.'), j('.'), p('='), id("c")]);
        toks.extend(arrow());
        toks.extend([id("f"), j(':'), j(':'), p('<'), id("A"), p(',')]);
        toks.extend([id("B"), p('>'), g(Delim::Paren), p(',')]);
        let second = toks.len();
        toks.extend([id("y"), p('='), id("g")]);
        toks.extend(arrow());
        toks.push(id("y"));
        let s = parse_select(&toks).unwrap();
        assert_eq!(s.branches.len(), 2);
        assert_eq!(s.branches[0].fut, 2..10);
        assert_eq!(
            s.branches[0].handler,
            12..21,
            "the turbofish comma stays inside"
        );
        assert_eq!(s.branches[1].pat, second..second + 1);
        assert_eq!(s.branches[1].handler, toks.len() - 1..toks.len());
    }

    #[test]
    fn a_pattern_named_biased_is_a_pattern() {
        let toks = simple("biased");
        let s = parse_select(&toks).unwrap();
        assert!(!s.biased);
        assert_eq!(s.branches[0].pat, 0..1);
    }

    #[test]
    fn errors() {
        let e = parse_select(&[]).unwrap_err();
        assert_eq!(e.at, None);
        assert!(e.message.contains("at least one"), "{e:?}");

        let e = parse_select(&[id("biased"), p(';')]).unwrap_err();
        assert!(e.message.contains("at least one"), "{e:?}");

        // `v = fut()` with no `=>`.
        let e = parse_select(&simple("v")[..4]).unwrap_err();
        assert_eq!(e.at, Some(3));
        assert!(e.message.contains("expected `=> <handler>`"), "{e:?}");

        // `fut() => v` with no pattern.
        let e = parse_select(&simple("v")[2..]).unwrap_err();
        assert_eq!(e.at, Some(2));
        assert!(e.message.contains("before `=>`"), "{e:?}");

        // `= fut() => v`
        let e = parse_select(&simple("v")[1..]).unwrap_err();
        assert_eq!(e.at, Some(0));
        assert!(e.message.contains("expected a pattern"), "{e:?}");

        // `v = => v`
        let mut toks = simple("v");
        toks.drain(2..4);
        let e = parse_select(&toks).unwrap_err();
        assert!(e.message.contains("async expression after `=`"), "{e:?}");

        // `v = fut() =>` (nothing after)
        let e = parse_select(&simple("v")[..6]).unwrap_err();
        assert!(e.message.contains("expected a handler"), "{e:?}");

        // `v = fut(), if => v`
        let mut toks = simple("v");
        toks.splice(4..4, [p(','), id("if")]);
        let e = parse_select(&toks).unwrap_err();
        assert_eq!(e.at, Some(5));
        assert!(e.message.contains("precondition"), "{e:?}");

        // else first, then a branch.
        let mut toks = vec![id("else")];
        toks.extend(arrow());
        toks.extend([id("x"), p(',')]);
        toks.extend(simple("v"));
        let e = parse_select(&toks).unwrap_err();
        assert_eq!(e.at, Some(0));
        assert!(e.message.contains("must be the last"), "{e:?}");

        // Two elses.
        let mut toks = simple("v");
        for _ in 0..2 {
            toks.push(id("else"));
            toks.extend(arrow());
            toks.extend([id("x"), p(',')]);
        }
        let e = parse_select(&toks).unwrap_err();
        assert_eq!(e.at, Some(13));
        assert!(e.message.contains("more than one `else`"), "{e:?}");

        // A missing comma after an expression handler.
        let mut toks = simple("a");
        toks.pop();
        toks.extend(simple("b"));
        let e = parse_select(&toks).unwrap_err();
        assert_eq!(e.at, Some(6));
        assert!(
            e.message.contains("expected `,` after this handler"),
            "{e:?}"
        );

        // `biased;` after a branch.
        let mut toks = simple("a");
        toks.extend([id("biased"), p(';')]);
        toks.extend(simple("b"));
        let e = parse_select(&toks).unwrap_err();
        assert!(e.message.contains("before the first branch"), "{e:?}");

        // 65 branches.
        let toks: Vec<Tok> = (0..65).flat_map(|_| simple("v")).collect();
        let e = parse_select(&toks).unwrap_err();
        assert!(e.message.contains("at most 64"), "{e:?}");
        let toks: Vec<Tok> = (0..64).flat_map(|_| simple("v")).collect();
        assert_eq!(parse_select(&toks).unwrap().branches.len(), 64);
    }

    #[test]
    fn generated_pieces() {
        assert_eq!(
            out_enum(2),
            "enum __HoopOut<T0, T1> { B0(T0),B1(T1), Disabled, }"
        );
        assert_eq!(start_expr(3, true), "let __hoop_start: u32 = 0;");
        assert_eq!(start_expr(1, false), "let __hoop_start: u32 = 0;");
        assert!(start_expr(3, false).contains("select_start(3u32)"));
    }
}
