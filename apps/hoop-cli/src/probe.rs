//! `hoop probe`: what this machine offers hoop, and which driver `auto` picks and why.
//!
//! Reads the kernel version (uname), the `kernel.io_uring_disabled` sysctl, the locked-memory
//! limit, and `HOOP_DRIVER`, then tries to set up a forced io_uring runtime exactly as `auto`
//! does: when it works, `auto` runs io_uring (its setup flags and ring sizes are shown); when
//! it fails, `auto` falls back to epoll and the reason is the setup error's explanation.
//!
//! Human output is one `key: value` line per field; `--json` prints one JSON object with the
//! same keys. New facts (feature bits, opcodes) are new fields of [`Probe`] and new lines in
//! [`Probe::lines`].

use std::io::{self, Write};

use hoop::DriverKind;
use serde::Serialize;

/// Arguments of `hoop probe`.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// Print one JSON object instead of `key: value` lines.
    #[arg(long)]
    pub json: bool,
}

/// A resource limit: bytes (a JSON number), or unlimited (the JSON string `"unlimited"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// A limit in bytes.
    Bytes(u64),
    /// No limit (`RLIM_INFINITY`).
    Unlimited,
}

impl Serialize for Limit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Limit::Bytes(b) => s.serialize_u64(*b),
            Limit::Unlimited => s.serialize_str("unlimited"),
        }
    }
}

impl Limit {
    /// `hoop::setup::memlock_limit` says unlimited with `u64::MAX`.
    fn from_raw(v: u64) -> Limit {
        if v == u64::MAX {
            Limit::Unlimited
        } else {
            Limit::Bytes(v)
        }
    }

    fn human(self) -> String {
        match self {
            Limit::Unlimited => "unlimited".to_string(),
            Limit::Bytes(b) if b >= 1024 * 1024 && b % (1024 * 1024) == 0 => {
                format!("{b} ({} MiB)", b / (1024 * 1024))
            }
            Limit::Bytes(b) if b >= 1024 && b % 1024 == 0 => format!("{b} ({} KiB)", b / 1024),
            Limit::Bytes(b) => b.to_string(),
        }
    }
}

/// Everything `hoop probe` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// `uname`: system name, release, version, machine.
    pub kernel: String,
    /// `kernel.io_uring_disabled` (0, 1 or 2), or `None` if the kernel has no such sysctl.
    pub io_uring_disabled: Option<u32>,
    /// Soft `RLIMIT_MEMLOCK`, or `None` if it cannot be read.
    pub memlock_soft: Option<Limit>,
    /// Hard `RLIMIT_MEMLOCK`, or `None` if it cannot be read.
    pub memlock_hard: Option<Limit>,
    /// What `auto` picks: `"uring"` or `"epoll"`.
    pub driver: &'static str,
    /// Why `auto` falls back to epoll; `None` when io_uring works.
    pub reason: Option<String>,
    /// The setup flags the kernel accepted for a default ring (io_uring only).
    pub setup_flags: Option<String>,
    /// SQ entries of that ring (io_uring only).
    pub sq_entries: Option<u32>,
    /// CQ entries of that ring (io_uring only).
    pub cq_entries: Option<u32>,
    /// The raw value of `HOOP_DRIVER`, if set.
    pub hoop_driver_env: Option<String>,
}

impl Probe {
    /// Probes this machine (sets up and closes one io_uring ring).
    pub fn collect() -> Probe {
        let memlock = hoop::setup::memlock_limit();
        let mut p = Probe {
            kernel: crate::bench::sysinfo::kernel(),
            io_uring_disabled: hoop::setup::io_uring_disabled(),
            memlock_soft: memlock.map(|(s, _)| Limit::from_raw(s)),
            memlock_hard: memlock.map(|(_, h)| Limit::from_raw(h)),
            driver: "epoll",
            reason: None,
            setup_flags: None,
            sq_entries: None,
            cq_entries: None,
            hoop_driver_env: std::env::var_os("HOOP_DRIVER")
                .map(|v| v.to_string_lossy().into_owned()),
        };
        // What `auto` does first: a forced io_uring runtime, without the fallback (and so
        // without its line on stderr).
        match hoop::Runtime::builder().driver(DriverKind::Uring).build() {
            Ok(rt) => {
                let (sq, cq) = rt.ring_sizes();
                p.driver = "uring";
                p.setup_flags = Some(rt.setup_flags().to_string());
                p.sq_entries = Some(sq);
                p.cq_entries = Some(cq);
            }
            Err(e) => p.reason = Some(e.to_string()),
        }
        p
    }

    /// The human output: `(key, value)` in print order, keys as in the JSON.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        let opt = |v: Option<String>, none: &str| v.unwrap_or_else(|| none.to_string());
        let env = match self.hoop_driver_env.as_deref() {
            None => "unset (runtimes built without a driver choice use auto)".to_string(),
            Some(v) => match v.parse::<DriverKind>() {
                Ok(k) => format!("{v} (runtimes built without a driver choice use {k})"),
                Err(e) => format!("{v} (invalid: {e})"),
            },
        };
        vec![
            ("kernel", self.kernel.clone()),
            (
                "io_uring_disabled",
                opt(
                    self.io_uring_disabled.map(|v| v.to_string()),
                    "unknown (no kernel.io_uring_disabled sysctl)",
                ),
            ),
            (
                "memlock_soft",
                opt(self.memlock_soft.map(Limit::human), "unknown"),
            ),
            (
                "memlock_hard",
                opt(self.memlock_hard.map(Limit::human), "unknown"),
            ),
            ("driver", self.driver.to_string()),
            ("reason", opt(self.reason.clone(), "none: io_uring works")),
            ("setup_flags", opt(self.setup_flags.clone(), "-")),
            (
                "sq_entries",
                opt(self.sq_entries.map(|v| v.to_string()), "-"),
            ),
            (
                "cq_entries",
                opt(self.cq_entries.map(|v| v.to_string()), "-"),
            ),
            ("hoop_driver_env", env),
        ]
    }
}

/// Runs `hoop probe`.
pub fn run(args: ProbeArgs) -> io::Result<()> {
    let probe = Probe::collect();
    let text = if args.json {
        serde_json::to_string(&probe).map_err(io::Error::other)? + "\n"
    } else {
        probe
            .lines()
            .into_iter()
            .map(|(k, v)| format!("{k}: {v}\n"))
            .collect()
    };
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot write to stdout: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_print_as_bytes_or_unlimited() {
        assert_eq!(
            serde_json::to_string(&Limit::from_raw(u64::MAX)).unwrap(),
            "\"unlimited\""
        );
        assert_eq!(
            serde_json::to_string(&Limit::from_raw(8 << 20)).unwrap(),
            "8388608"
        );
        assert_eq!(Limit::from_raw(8 << 20).human(), "8388608 (8 MiB)");
        assert_eq!(Limit::from_raw(65536).human(), "65536 (64 KiB)");
        assert_eq!(Limit::from_raw(1000).human(), "1000");
    }

    #[test]
    fn every_json_field_has_a_human_line() {
        let p = Probe::collect();
        let v = serde_json::to_value(&p).unwrap();
        let keys: Vec<&str> = p.lines().iter().map(|(k, _)| *k).collect();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), keys.len());
        for k in keys {
            assert!(obj.contains_key(k), "{k}");
        }
    }
}
