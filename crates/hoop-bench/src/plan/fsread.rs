//! The plan of `hoop bench fsread`: which engines read which file sizes, how many times, for
//! how long at most.

use std::io;
use std::path::PathBuf;

use crate::plan::check::{check_secs, invalid};
use crate::plan::size::SECTOR;
use crate::plan::size::{fmt_bytes, parse_size};

/// The engines, in the order they run.
pub const ENGINES: [&str; 3] = ["shared", "tokio-io-uring", "spawn-blocking"];
/// The engine of the peers' binary.
pub const PEER: &str = "tokio-io-uring";
/// Largest test file.
pub const MAX_FILE: u64 = 256 << 20;
/// Most reads (timed or warm-up) per engine and size.
pub const MAX_READS: u64 = 10_000_000;

/// What `hoop bench fsread` measures.
#[derive(Debug, Clone)]
pub struct FsreadPlan {
    /// Directory of the test files.
    pub dir: PathBuf,
    /// File sizes.
    pub sizes: Vec<u64>,
    /// Timed reads per engine and size.
    pub reads: u64,
    /// Warm-up reads per engine and size.
    pub warmup: u64,
    /// Longest time per engine and size.
    pub secs: f64,
    /// Engines, in order.
    pub engines: Vec<&'static str>,
}

impl FsreadPlan {
    /// Checks the numbers.
    pub fn check(&self) -> io::Result<()> {
        check_secs("--secs", self.secs)?;
        if self.sizes.is_empty() || self.engines.is_empty() {
            return Err(invalid("--sizes and --engines must not be empty"));
        }
        for &s in &self.sizes {
            if s == 0 || !s.is_multiple_of(SECTOR as u64) || s > MAX_FILE {
                return Err(invalid(format!(
                    "--sizes: each must be a positive multiple of {SECTOR} bytes, at most {} \
                     (got {s})",
                    fmt_bytes(MAX_FILE)
                )));
            }
        }
        if self.reads == 0 || self.reads > MAX_READS || self.warmup > MAX_READS {
            return Err(invalid(format!(
                "--reads must be between 1 and {MAX_READS}, --warmup at most {MAX_READS}"
            )));
        }
        Ok(())
    }

    /// Planned seconds at most: `secs` per engine and size.
    pub fn planned_secs(&self) -> f64 {
        self.secs * (self.sizes.len() * self.engines.len()) as f64
    }
}

/// Parses `--engines`.
pub fn parse_engines(list: &[String]) -> io::Result<Vec<&'static str>> {
    let mut v = Vec::new();
    for name in list.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let e = ENGINES.iter().find(|&&e| e == name).ok_or_else(|| {
            invalid(format!(
                "unknown engine {name:?} (known: {})",
                ENGINES.join(", ")
            ))
        })?;
        if !v.contains(e) {
            v.push(*e);
        }
    }
    if v.is_empty() {
        return Err(invalid("--engines: no engine given"));
    }
    Ok(v)
}

/// Parses `--sizes`.
pub fn parse_sizes(list: &[String]) -> io::Result<Vec<u64>> {
    list.iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| parse_size("--sizes", s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_and_sizes_parse() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_engines(&s(&["spawn-blocking", "shared", "shared"])).unwrap(),
            ["spawn-blocking", "shared"]
        );
        assert!(parse_engines(&s(&["tokio-fs"])).is_err());
        assert!(parse_engines(&s(&[""])).is_err());
        assert_eq!(parse_sizes(&s(&["64k", "1m"])).unwrap(), [65536, 1 << 20]);
        let plan = FsreadPlan {
            dir: PathBuf::from("."),
            sizes: vec![65536],
            reads: 10,
            warmup: 0,
            secs: 1.0,
            engines: vec!["shared"],
        };
        assert!(plan.check().is_ok());
        for bad in [
            FsreadPlan {
                sizes: vec![1000],
                ..plan.clone()
            },
            FsreadPlan {
                sizes: vec![MAX_FILE * 2],
                ..plan.clone()
            },
            FsreadPlan {
                reads: 0,
                ..plan.clone()
            },
            FsreadPlan {
                secs: 0.0,
                ..plan.clone()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
