//! Sizes as the flags give them (`4k`, `2G`, `512`) and as the tables print them (`4 KiB`).

use std::io;

use crate::plan::check::invalid;

/// The smallest O_DIRECT unit there is: block sizes and file sizes are multiples of it. The
/// test file's stamps use the same unit (`load::file::content`, which the peers' binary
/// compiles on its own, so it keeps its own copy; a test there checks they agree).
pub const SECTOR: usize = 512;

/// Parses a size given as `flag`: bytes, or a number with a k/m/g/t suffix (powers of 1024;
/// `KiB`, `KB` and `K` all mean 1024).
pub fn parse_size(flag: &str, s: &str) -> io::Result<u64> {
    let bad = || {
        invalid(format!(
            "{flag}: {s:?} is not a size (bytes, or a number with a k, m, g or t suffix, e.g. 4k, 2G)"
        ))
    };
    let t = s.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (num, suffix) = t.split_at(digits);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let lower = suffix.to_ascii_lowercase();
    let unit = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let shift = match unit {
        "" if lower.is_empty() || lower == "b" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(bad()),
    };
    n.checked_mul(1u64 << shift).ok_or_else(bad)
}

/// A size for humans: `4 KiB`, `2 GiB`, or bytes.
pub fn fmt_bytes(n: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    if n >= 1 << 20 {
        return format!("{:.1} MiB", n as f64 / f64::from(1 << 20));
    }
    format!("{n} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("--bs", "4k").unwrap(), 4096);
        assert_eq!(parse_size("--bs", "4K").unwrap(), 4096);
        assert_eq!(parse_size("--bs", "4KiB").unwrap(), 4096);
        assert_eq!(parse_size("--size", "2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("--size", "8m").unwrap(), 8 << 20);
        assert_eq!(parse_size("--size", "512").unwrap(), 512);
        assert_eq!(parse_size("--size", "512b").unwrap(), 512);
        for bad in ["", "k", "4x", "-1", "1.5G", "4kk", "99999999999999999999"] {
            assert!(parse_size("--size", bad).is_err(), "{bad}");
        }
        assert!(parse_size("--size", "99999999999t").is_err());
        let e = parse_size("--file-size", "12x").unwrap_err().to_string();
        assert!(e.starts_with("--file-size: \"12x\" is not a size"), "{e}");
    }

    #[test]
    fn sizes_print_in_the_largest_whole_unit() {
        assert_eq!(fmt_bytes(2 << 30), "2 GiB");
        assert_eq!(fmt_bytes(4096), "4 KiB");
        assert_eq!(fmt_bytes(1000), "1000 B");
        assert_eq!(fmt_bytes(3 << 19), "1536 KiB");
        assert_eq!(fmt_bytes(1_500_000), "1.4 MiB");
    }
}
