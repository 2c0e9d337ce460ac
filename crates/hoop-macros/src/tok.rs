//! The shape of the macros' input at the top level, and the error they report: what `lib.rs`
//! turns real tokens into, so that every parser decision is unit-tested outside a compiler.

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
    pub(crate) fn new(at: Option<usize>, message: String) -> Self {
        ParseError { at, message }
    }
}

/// Token shapes for the parsers' unit tests.
#[cfg(test)]
pub(crate) mod shapes {
    use super::{Delim, Tok};

    pub(crate) fn id(s: &str) -> Tok {
        Tok::Ident(s.to_owned())
    }
    pub(crate) fn p(c: char) -> Tok {
        Tok::Punct(c)
    }
    pub(crate) fn lit(s: &str) -> Tok {
        Tok::Literal(s.to_owned())
    }
    pub(crate) fn g(d: Delim) -> Tok {
        Tok::Group(d)
    }
}
