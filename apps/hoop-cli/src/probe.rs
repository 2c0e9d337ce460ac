//! `hoop probe`: what this machine offers hoop (kernel, io_uring limits and features, opcodes)
//! and which driver `auto` picks and why; one `key: value` line per field of [`Probe`], or one
//! JSON object with `--json`.

use std::io::{self, Write};

use std::time::Duration;

use hoop::driver::{Config, Driver};
use hoop::DriverKind;
use serde::ser::SerializeMap;
use serde::Serialize;

use hoop_bench::machine::uring_paths as paths;

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

/// Named on/off facts, in a fixed order: a JSON object `{name: bool}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags(pub Vec<(&'static str, bool)>);

impl Serialize for Flags {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, on) in &self.0 {
            map.serialize_entry(name, on)?;
        }
        map.end()
    }
}

impl Flags {
    /// `on1, on2 (off: off1, off2)`, or `none` when empty.
    fn human(&self) -> String {
        let names = |want: bool| {
            self.0
                .iter()
                .filter(|(_, on)| *on == want)
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
        };
        let (on, off) = (names(true), names(false));
        let mut text = if on.is_empty() {
            "none".to_string()
        } else {
            on.join(", ")
        };
        if !off.is_empty() {
            text += &format!(" (off: {})", off.join(", "));
        }
        text
    }
}

/// hoop's io_uring features and whether each is on with this kernel (every one falls back to a
/// plainer path when off; all off on epoll).
///
/// - `multishot_accept`: `TcpListener::incoming` arms one multishot accept (5.19);
/// - `multishot_recv`, `buf_ring`: provided buffer rings registered with the kernel and
///   multishot receive into them (6.0, `Driver::supports_buf_ring`);
/// - `send_zc`: zero-copy send (`IORING_OP_SEND_ZC` in the probe);
/// - `fixed_files`: direct descriptors in a sparse fixed-file table (5.19);
/// - `registered_buffers`: `READ_FIXED`/`WRITE_FIXED` on registered buffers (5.13: earlier
///   kernels quiesce the ring to register);
/// - `sqpoll`: an SQPOLL ring could be set up (tried);
/// - `link_timeout`: per-operation deadlines in the kernel (`IORING_OP_LINK_TIMEOUT`);
/// - `registered_ring_fd`: the default ring's fd is registered (`IORING_REGISTER_RING_FDS`);
/// - `recv_bundle`: receives may take several buffers per CQE (`IORING_RECVSEND_BUNDLE`, 6.10);
/// - `buf_ring_inc`: incrementally consumed buffer rings (`IOU_PBUF_RING_INC`, 6.12);
/// - `msg_ring_wake`: other threads wake the runtime with a ring message rather than its
///   eventfd (`IORING_REGISTER_SEND_MSG_RING`, 6.13).
pub fn hoop_features(driver: Option<&Driver>) -> Flags {
    let uring = driver.filter(|d| d.kind() == DriverKind::Uring);
    let op = |code: u8| uring.is_some_and(|d| d.supports_opcode(code));
    let since = |major, minor| uring.is_some() && hoop::setup::kernel_at_least(major, minor);
    // IORING_OP_* numbers (linux/io_uring.h).
    const ACCEPT: u8 = 13;
    const LINK_TIMEOUT: u8 = 15;
    const FILES_UPDATE: u8 = 20;
    const READ_FIXED: u8 = 4;
    const WRITE_FIXED: u8 = 5;
    const SEND_ZC: u8 = 47;
    let buf_ring = uring.is_some_and(|d| d.supports_buf_ring());
    Flags(vec![
        ("multishot_accept", since(5, 19) && op(ACCEPT)),
        ("multishot_recv", buf_ring),
        ("buf_ring", buf_ring),
        ("send_zc", op(SEND_ZC)),
        ("fixed_files", since(5, 19) && op(FILES_UPDATE)),
        (
            "registered_buffers",
            since(5, 13) && op(READ_FIXED) && op(WRITE_FIXED),
        ),
        ("sqpoll", uring.is_some() && sqpoll_works()),
        ("link_timeout", op(LINK_TIMEOUT)),
        (
            "registered_ring_fd",
            uring.is_some_and(|d| d.ring_fd_registered()),
        ),
        (
            "recv_bundle",
            buf_ring && uring.is_some_and(|d| d.supports_recv_bundle()),
        ),
        (
            "buf_ring_inc",
            uring.is_some_and(|d| d.buf_ring_inc_supported()),
        ),
        (
            "msg_ring_wake",
            uring.is_some_and(|d| d.ring_waker().is_some()),
        ),
    ])
}

/// Whether the kernel sets up an SQPOLL ring for this process (5.13+ without privileges).
fn sqpoll_works() -> bool {
    let cfg = Config {
        driver: DriverKind::Uring,
        entries: 8,
        sqpoll_idle: Some(Duration::from_millis(10)),
        register_ring_fd: false,
        ..Config::default()
    };
    Driver::new(&cfg).is_ok_and(|d| d.setup_flags().starts_with("SQPOLL"))
}

/// Everything `hoop probe` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// `uname`: system name, release, version, machine.
    pub kernel: String,
    /// The kernel level hoop runs at: `"native"`, or the `HOOP_KERNEL_LEVEL` whose features
    /// it keeps (`"5.15"`); every feature below is as that kernel has it. An invalid value is
    /// given as set (and `reason` says why no driver starts).
    pub kernel_level: String,
    /// What hoop uses and the kernel level switches off, with the kernel that brought each
    /// (`"SEND_ZC (6.0)"`); empty at `native`.
    pub kernel_level_absent: Vec<String>,
    /// `kernel.io_uring_disabled` (0, 1 or 2), or `None` if the kernel has no such sysctl.
    pub io_uring_disabled: Option<u32>,
    /// Soft `RLIMIT_MEMLOCK`, or `None` if it cannot be read.
    pub memlock_soft: Option<Limit>,
    /// Hard `RLIMIT_MEMLOCK`, or `None` if it cannot be read.
    pub memlock_hard: Option<Limit>,
    /// What `auto` picks: `"uring"` or `"epoll"` (`"none"` with an invalid `HOOP_KERNEL_LEVEL`).
    pub driver: &'static str,
    /// Why `auto` falls back to epoll; `None` when io_uring works.
    pub reason: Option<String>,
    /// The setup flags the kernel accepted for a default ring (io_uring only).
    pub setup_flags: Option<String>,
    /// SQ entries of that ring (io_uring only).
    pub sq_entries: Option<u32>,
    /// CQ entries of that ring (io_uring only).
    pub cq_entries: Option<u32>,
    /// The kernel's `IORING_FEAT_*` bits by name, e.g. `FAST_POLL` (io_uring only).
    pub features: Option<Flags>,
    /// The `IORING_OP_*` opcodes the kernel supports, by name (io_uring only).
    pub opcodes: Option<Vec<&'static str>>,
    /// hoop's io_uring features and whether each is on here (see [`hoop_features`]).
    pub hoop_features: Flags,
    /// The newest io_uring features: whether the kernel (at the kernel level) has each, whether
    /// hoop uses it, and why (see `hoop_bench::machine::uring_paths`).
    pub hoop_paths: paths::Paths,
    /// The raw value of `HOOP_DRIVER`, if set.
    pub hoop_driver_env: Option<String>,
    /// The listen backlog hoop's listeners ask for by default and what the kernel gives.
    pub listen_backlog: ListenBacklog,
}

/// hoop's default listen backlog on this machine, and the sysctls that bound it.
#[derive(Debug, Clone, Serialize)]
pub struct ListenBacklog {
    /// What hoop asks for by default (`--backlog`, `ListenOptions`).
    pub requested: u32,
    /// What the kernel gives: `requested` capped at `net.core.somaxconn`.
    pub effective: u32,
    /// `net.core.somaxconn`, if readable.
    pub somaxconn: Option<u32>,
    /// `net.ipv4.tcp_max_syn_backlog`, if readable.
    pub tcp_max_syn_backlog: Option<u32>,
    /// `net.ipv4.tcp_syncookies`, if readable.
    pub tcp_syncookies: Option<u32>,
}

impl ListenBacklog {
    fn collect() -> ListenBacklog {
        let limits = hoop::net::listen_limits();
        let requested = hoop::net::DEFAULT_BACKLOG;
        ListenBacklog {
            requested,
            effective: limits.effective(requested),
            somaxconn: limits.somaxconn,
            tcp_max_syn_backlog: limits.tcp_max_syn_backlog,
            tcp_syncookies: limits.tcp_syncookies,
        }
    }

    fn human(&self) -> String {
        let n = |v: Option<u32>| v.map_or("unknown".to_string(), |v| v.to_string());
        let head = if self.effective < self.requested {
            format!(
                "{} asked by default, capped to {} by net.core.somaxconn",
                self.requested, self.effective
            )
        } else {
            format!("{} asked by default, given", self.requested)
        };
        format!(
            "{head} (somaxconn {}, tcp_max_syn_backlog {}, tcp_syncookies {})",
            n(self.somaxconn),
            n(self.tcp_max_syn_backlog),
            n(self.tcp_syncookies)
        )
    }
}

impl Probe {
    /// Probes this machine (sets up and closes one io_uring ring).
    pub fn collect() -> Probe {
        let memlock = hoop::setup::memlock_limit();
        let level = hoop::driver::level::check();
        let mut p = Probe {
            kernel: hoop_bench::machine::kernel(),
            kernel_level: match &level {
                Ok(l) => l.to_string(),
                Err(_) => hoop::driver::level::env_value().unwrap_or_default(),
            },
            kernel_level_absent: level.as_ref().map(|l| l.absent()).unwrap_or_default(),
            io_uring_disabled: hoop::setup::io_uring_disabled(),
            memlock_soft: memlock.map(|(s, _)| Limit::from_raw(s)),
            memlock_hard: memlock.map(|(_, h)| Limit::from_raw(h)),
            driver: "epoll",
            reason: None,
            setup_flags: None,
            sq_entries: None,
            cq_entries: None,
            features: None,
            opcodes: None,
            hoop_features: hoop_features(None),
            hoop_paths: paths::collect(None),
            hoop_driver_env: std::env::var_os("HOOP_DRIVER")
                .map(|v| v.to_string_lossy().into_owned()),
            listen_backlog: ListenBacklog::collect(),
        };
        // What `auto` does first: a forced io_uring driver with the runtime's default settings,
        // without the fallback (and so without its line on stderr).
        let cfg = Config {
            driver: DriverKind::Uring,
            ..Config::default()
        };
        match Driver::new(&cfg) {
            Ok(d) => {
                let (sq, cq) = d.ring_sizes();
                p.driver = "uring";
                p.setup_flags = Some(d.setup_flags().to_string());
                p.sq_entries = Some(sq);
                p.cq_entries = Some(cq);
                p.features = Some(Flags(d.uring_features()));
                p.opcodes = Some(d.supported_opcodes());
                p.hoop_features = hoop_features(Some(&d));
                p.hoop_paths = paths::collect(Some(&d));
            }
            Err(e) => p.reason = Some(e.to_string()),
        }
        if level.is_err() {
            // `auto` would not fall back to epoll either: no driver starts.
            p.driver = "none";
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
        let level = match hoop::driver::level::Level::parse(&self.kernel_level) {
            Ok(hoop::driver::level::Level::Native) => "native".to_string(),
            Ok(l) => format!("{l} ({})", hoop::driver::level::VAR),
            Err(_) => format!(
                "{} ({}, invalid: no driver starts)",
                self.kernel_level,
                hoop::driver::level::VAR
            ),
        };
        let absent = if self.kernel_level_absent.is_empty() {
            "none".to_string()
        } else {
            self.kernel_level_absent.join(", ")
        };
        vec![
            ("kernel", self.kernel.clone()),
            ("kernel_level", level),
            ("kernel_level_absent", absent),
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
            (
                "features",
                opt(self.features.as_ref().map(Flags::human), "-"),
            ),
            (
                "opcodes",
                opt(self.opcodes.as_ref().map(|o| o.join(", ")), "-"),
            ),
            ("hoop_features", self.hoop_features.human()),
            ("hoop_paths", self.hoop_paths.human()),
            ("hoop_driver_env", env),
            ("listen_backlog", self.listen_backlog.human()),
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
    fn flags_print_in_order_as_an_object_and_a_line() {
        let f = Flags(vec![("b", true), ("a", false), ("c", true)]);
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"b":true,"a":false,"c":true}"#
        );
        assert_eq!(f.human(), "b, c (off: a)");
        assert_eq!(Flags(vec![("a", false)]).human(), "none (off: a)");
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
