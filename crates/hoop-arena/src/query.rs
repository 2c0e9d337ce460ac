//! The query strings and bodies of the endpoints, parsed by hand (std only: the peers' actix
//! server compiles this very file, so both parse the same way).

/// `a` and `b` of the query, both integers.
pub(crate) fn operands(query: Option<&str>) -> Option<(i64, i64)> {
    let q = query?;
    let a = parse_i64(query_param(q, "a")?.as_bytes())?;
    let b = parse_i64(query_param(q, "b")?.as_bytes())?;
    Some((a, b))
}

/// The first value of `name` in `query` (`k=v&k=v`; a key without `=` has the empty value).
/// Nothing is percent-decoded: the values wanted here are integers.
pub(crate) fn query_param<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then_some(v)
    })
}

/// A decimal i64 (an optional sign, digits); `None` for anything else or an overflow.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    std::str::from_utf8(s).ok()?.parse().ok()
}
