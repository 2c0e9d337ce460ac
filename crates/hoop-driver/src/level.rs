//! The kernel level: `HOOP_KERNEL_LEVEL=5.10|5.15|5.19|6.1|6.10|6.12|6.13|native` starts hoop with the
//! io_uring features of an older kernel switched off, so a deployment's kernel can be tested on
//! a newer one.
//!
//! hoop probes every feature it uses and picks a path by what it finds; users run older kernels
//! than CI (Ubuntu 22.04: 5.15, Debian 12: 6.1), so the older paths need a way to run here. The
//! level is one mask over what the probes report, kept in this one place:
//!
//! - [`crate::setup::kernel_at_least`] answers as if the kernel were the level's;
//! - the opcode probe (`IORING_REGISTER_PROBE`) loses the opcodes that came later, so a path
//!   that asks `Driver::supports_opcode` and the check of the opcodes hoop needs (which refuses
//!   the ring, and so takes `Auto` to epoll, where one is missing) both see the older kernel;
//! - the `IORING_FEAT_*` bits the ring reports lose the later ones;
//! - the setup flags the ring asks for (`SUBMIT_ALL`, `COOP_TASKRUN`, `SINGLE_ISSUER`,
//!   `DEFER_TASKRUN`) are not asked for where the level's kernel would refuse them;
//! - registrations and system calls found by trying them ([`Since`] constants below: the
//!   registered ring fd, buffer rings, incremental buffer rings, `epoll_pwait2`, ...) are not
//!   tried.
//!
//! The mask only takes away: `native` (or unset) changes nothing, and a level above the running
//! kernel leaves what that kernel lacks absent. The level is read once per process; a value
//! hoop does not know refuses to start a driver ([`check`]: `Driver::new` and the shared rings'
//! builder return an `InvalidInput` error that names the variable and the accepted values)
//! rather than run a test of the wrong kernel. It is not fault injection: it works in release
//! builds, for users testing their own deployment.

use std::fmt;
use std::io;
use std::sync::OnceLock;

/// The environment variable that sets the level.
pub const VAR: &str = "HOOP_KERNEL_LEVEL";

/// The levels CI runs (the kernels users run: 5.10 LTS, below hoop's io_uring driver; Ubuntu
/// 22.04's 5.15, the first it runs on (sockets from `socket(2)`, no `IORING_OP_SOCKET`); 5.19,
/// with `SOCKET` and multishot accept; Debian 12's 6.1; 6.10, the first with bundles; 6.12, the
/// first with min-wait and incremental buffer rings; 6.13, the first that resizes rings).
pub const LEVELS: [&str; 7] = ["5.10", "5.15", "5.19", "6.1", "6.10", "6.12", "6.13"];

/// A kernel version, `(major, minor)`: when a feature came.
pub type Since = (u32, u32);

/// A kernel level: the running kernel (`Native`), or an older one's features only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Level {
    /// Whatever the running kernel has (`HOOP_KERNEL_LEVEL` unset, empty or `native`).
    #[default]
    Native,
    /// Only what kernel `major.minor` had.
    At(u32, u32),
}

impl Level {
    /// Parses a value of `HOOP_KERNEL_LEVEL`: `native`, or `MAJOR.MINOR` from 5.1 (the first
    /// kernel with io_uring) up; the error names the variable and the accepted values.
    pub fn parse(value: &str) -> Result<Level, String> {
        let v = value.trim();
        if v.is_empty() || v.eq_ignore_ascii_case("native") {
            return Ok(Level::Native);
        }
        let bad = || {
            format!(
                "{VAR}={value:?} is not a kernel level: expected {} or native (any MAJOR.MINOR \
                 from 5.1 is taken; unset means native)",
                LEVELS.join(", ")
            )
        };
        let (major, minor) = v.split_once('.').ok_or_else(bad)?;
        let digits =
            |s: &str| !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(major) || !digits(minor) {
            return Err(bad());
        }
        let (major, minor): (u32, u32) = (
            major.parse().map_err(|_| bad())?,
            minor.parse().map_err(|_| bad())?,
        );
        if (major, minor) < (5, 1) {
            return Err(bad());
        }
        Ok(Level::At(major, minor))
    }

    /// Whether a feature that came in kernel `since` is there at this level (always at
    /// `Native`: the running kernel's own probe decides).
    pub fn has(self, since: Since) -> bool {
        match self {
            Level::Native => true,
            Level::At(major, minor) => (major, minor) >= since,
        }
    }

    /// Whether `IORING_OP_*` number `opcode` is there at this level (opcodes newer than hoop's
    /// table only at `Native`).
    pub fn has_opcode(self, opcode: u8) -> bool {
        match OPCODES.get(usize::from(opcode)) {
            Some(&(_, since)) => self.has(since),
            None => self == Level::Native,
        }
    }

    /// The `IORING_FEAT_*` bits there at this level (all at `Native`).
    pub fn feature_mask(self) -> u32 {
        if self == Level::Native {
            return u32::MAX;
        }
        FEATURES
            .iter()
            .filter(|f| self.has(f.2))
            .fold(0, |mask, f| mask | f.0)
    }

    /// Whether the kernel of this level takes every `IORING_SETUP_*` bit in `flags` (bits newer
    /// than hoop's table only at `Native`).
    pub fn has_setup_flags(self, flags: u32) -> bool {
        if self == Level::Native {
            return true;
        }
        let known = SETUP_FLAGS
            .iter()
            .filter(|f| self.has(f.2))
            .fold(0, |mask, f| mask | f.0);
        flags & !known == 0
    }

    /// What hoop uses and this level lacks, by kernel name with the kernel that brought it
    /// (`"SEND_ZC (6.0)"`), oldest first: opcodes, `FEAT_*` bits, setup flags, then the
    /// registrations and paths of [`PATHS`]. Empty at `Native`.
    pub fn absent(self) -> Vec<String> {
        let mut out: Vec<(Since, String)> = Vec::new();
        let mut add = |since: Since, name: String| {
            if !self.has(since) {
                out.push((since, name));
            }
        };
        for &(name, since) in OPCODES.iter() {
            add(since, name.to_owned());
        }
        for &(_, name, since) in FEATURES {
            add(since, format!("FEAT_{name}"));
        }
        for &(_, name, since) in SETUP_FLAGS {
            add(since, format!("SETUP_{name}"));
        }
        for &(name, since) in PATHS {
            add(since, name.to_owned());
        }
        // Stable: the tables' order within one kernel.
        out.sort_by_key(|(since, _)| *since);
        out.into_iter()
            .map(|((major, minor), name)| format!("{name} ({major}.{minor})"))
            .collect()
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Level::Native => f.write_str("native"),
            Level::At(major, minor) => write!(f, "{major}.{minor}"),
        }
    }
}

/// The level of this process: `HOOP_KERNEL_LEVEL`, read once (`Native` when unset, and when
/// the value is invalid: [`check`] reports that, and every driver's setup calls it).
pub fn current() -> Level {
    parsed().as_ref().copied().unwrap_or_default()
}

/// Whether a feature that came in kernel `since` is there at this process's level.
pub fn has(since: Since) -> bool {
    current().has(since)
}

/// The level of this process, or the error a driver's setup returns for an invalid
/// `HOOP_KERNEL_LEVEL` (`InvalidInput`, naming the variable and the accepted values).
pub fn check() -> io::Result<Level> {
    parsed()
        .clone()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// The raw value of `HOOP_KERNEL_LEVEL`, if set (for reports).
pub fn env_value() -> Option<String> {
    std::env::var_os(VAR).map(|v| v.to_string_lossy().into_owned())
}

fn parsed() -> &'static Result<Level, String> {
    static LEVEL: OnceLock<Result<Level, String>> = OnceLock::new();
    LEVEL.get_or_init(|| match env_value() {
        None => Ok(Level::Native),
        Some(v) => Level::parse(&v),
    })
}

/// Kernels of the registrations and system calls hoop tries (rather than probes), and of the
/// paths it picks by kernel version.
pub mod since {
    use super::Since;
    /// `epoll_pwait2` (the epoll driver's sub-millisecond waits).
    pub const EPOLL_PWAIT2: Since = (5, 11);
    /// `IORING_REGISTER_IOWQ_MAX_WORKERS`.
    pub const IOWQ_MAX_WORKERS: Since = (5, 15);
    /// `IORING_REGISTER_RING_FDS`: the registered ring fd.
    pub const RING_FDS: Since = (5, 18);
    /// `IORING_REGISTER_PBUF_RING`: provided buffer rings (hoop uses them from 6.0, with
    /// multishot receive).
    pub const PBUF_RING: Since = (5, 19);
    /// Multishot accept (`IORING_ACCEPT_MULTISHOT`).
    pub const MULTISHOT_ACCEPT: Since = (5, 19);
    /// Sparse registered file tables with kernel-allocated slots (`IORING_FILE_INDEX_ALLOC`).
    pub const FILE_INDEX_ALLOC: Since = (5, 19);
    /// Multishot receive (`IORING_RECV_MULTISHOT`), so hoop's buffer rings.
    pub const MULTISHOT_RECV: Since = (6, 0);
    /// `IORING_REGISTER_SYNC_CANCEL`: a cancel that returns once its target has ended.
    pub const SYNC_CANCEL: Since = (6, 0);
    /// Incrementally consumed buffer rings (`IOU_PBUF_RING_INC`).
    pub const PBUF_RING_INC: Since = (6, 12);
    /// `IORING_REGISTER_SEND_MSG_RING`: a message to a ring without a source ring (the
    /// runtime's cross-thread wake-up).
    pub const SEND_MSG_RING: Since = (6, 13);
    /// `IORING_REGISTER_RESIZE_RINGS`: a ring's SQ and CQ resized in place (hoop grows the CQ
    /// of a thread's ring under load instead of sizing it up front).
    pub const RESIZE_RINGS: Since = (6, 13);
    /// `IORING_REGISTER_MEM_REGION` with wait arguments (`Config::reg_wait`).
    pub const MEM_REGION: Since = (6, 13);
}

/// The registrations, flags and system calls of [`since`], by kernel name, for [`Level::absent`].
pub const PATHS: &[(&str, Since)] = &[
    ("epoll_pwait2", since::EPOLL_PWAIT2),
    ("REGISTER_IOWQ_MAX_WORKERS", since::IOWQ_MAX_WORKERS),
    ("REGISTER_RING_FDS", since::RING_FDS),
    ("REGISTER_PBUF_RING", since::PBUF_RING),
    ("ACCEPT_MULTISHOT", since::MULTISHOT_ACCEPT),
    ("FILE_INDEX_ALLOC", since::FILE_INDEX_ALLOC),
    ("RECV_MULTISHOT", since::MULTISHOT_RECV),
    ("REGISTER_SYNC_CANCEL", since::SYNC_CANCEL),
    ("PBUF_RING_INC", since::PBUF_RING_INC),
    ("REGISTER_SEND_MSG_RING", since::SEND_MSG_RING),
    ("REGISTER_RESIZE_RINGS", since::RESIZE_RINGS),
    ("REGISTER_MEM_REGION", since::MEM_REGION),
];

/// `IORING_OP_*` (linux/io_uring.h) by number, without the prefix, and the kernel that brought
/// each: 0 (`NOP`) to 62 (`PIPE`).
pub(crate) const OPCODES: [(&str, Since); 63] = [
    ("NOP", (5, 1)),
    ("READV", (5, 1)),
    ("WRITEV", (5, 1)),
    ("FSYNC", (5, 1)),
    ("READ_FIXED", (5, 1)),
    ("WRITE_FIXED", (5, 1)),
    ("POLL_ADD", (5, 1)),
    ("POLL_REMOVE", (5, 1)),
    ("SYNC_FILE_RANGE", (5, 2)),
    ("SENDMSG", (5, 3)),
    ("RECVMSG", (5, 3)),
    ("TIMEOUT", (5, 4)),
    ("TIMEOUT_REMOVE", (5, 5)),
    ("ACCEPT", (5, 5)),
    ("ASYNC_CANCEL", (5, 5)),
    ("LINK_TIMEOUT", (5, 5)),
    ("CONNECT", (5, 5)),
    ("FALLOCATE", (5, 6)),
    ("OPENAT", (5, 6)),
    ("CLOSE", (5, 6)),
    ("FILES_UPDATE", (5, 6)),
    ("STATX", (5, 6)),
    ("READ", (5, 6)),
    ("WRITE", (5, 6)),
    ("FADVISE", (5, 6)),
    ("MADVISE", (5, 6)),
    ("SEND", (5, 6)),
    ("RECV", (5, 6)),
    ("OPENAT2", (5, 6)),
    ("EPOLL_CTL", (5, 6)),
    ("SPLICE", (5, 7)),
    ("PROVIDE_BUFFERS", (5, 7)),
    ("REMOVE_BUFFERS", (5, 7)),
    ("TEE", (5, 8)),
    ("SHUTDOWN", (5, 11)),
    ("RENAMEAT", (5, 11)),
    ("UNLINKAT", (5, 11)),
    ("MKDIRAT", (5, 15)),
    ("SYMLINKAT", (5, 15)),
    ("LINKAT", (5, 15)),
    ("MSG_RING", (5, 18)),
    ("FSETXATTR", (5, 19)),
    ("SETXATTR", (5, 19)),
    ("FGETXATTR", (5, 19)),
    ("GETXATTR", (5, 19)),
    ("SOCKET", (5, 19)),
    ("URING_CMD", (5, 19)),
    ("SEND_ZC", (6, 0)),
    ("SENDMSG_ZC", (6, 1)),
    ("READ_MULTISHOT", (6, 7)),
    ("WAITID", (6, 7)),
    ("FUTEX_WAIT", (6, 7)),
    ("FUTEX_WAKE", (6, 7)),
    ("FUTEX_WAITV", (6, 7)),
    ("FIXED_FD_INSTALL", (6, 8)),
    ("FTRUNCATE", (6, 9)),
    ("BIND", (6, 11)),
    ("LISTEN", (6, 11)),
    ("RECV_ZC", (6, 15)),
    ("EPOLL_WAIT", (6, 15)),
    ("READV_FIXED", (6, 15)),
    ("WRITEV_FIXED", (6, 15)),
    ("PIPE", (6, 16)),
];

/// `IORING_FEAT_*` (linux/io_uring.h): the bit, its kernel name without the prefix, and the
/// kernel that brought it.
pub(crate) const FEATURES: &[(u32, &str, Since)] = &[
    (1 << 0, "SINGLE_MMAP", (5, 4)),
    (1 << 1, "NODROP", (5, 5)),
    (1 << 2, "SUBMIT_STABLE", (5, 5)),
    (1 << 3, "RW_CUR_POS", (5, 6)),
    (1 << 4, "CUR_PERSONALITY", (5, 6)),
    (1 << 5, "FAST_POLL", (5, 7)),
    (1 << 6, "POLL_32BITS", (5, 9)),
    (1 << 7, "SQPOLL_NONFIXED", (5, 11)),
    (1 << 8, "EXT_ARG", (5, 11)),
    (1 << 9, "NATIVE_WORKERS", (5, 12)),
    (1 << 10, "RSRC_TAGS", (5, 13)),
    (1 << 11, "CQE_SKIP", (5, 17)),
    (1 << 12, "LINKED_FILE", (5, 17)),
    (1 << 13, "REG_REG_RING", (6, 3)),
    (1 << 14, "RECVSEND_BUNDLE", (6, 10)),
    (1 << 15, "MIN_TIMEOUT", (6, 12)),
    (1 << 16, "RW_ATTR", (6, 13)),
    (1 << 17, "NO_IOWAIT", (6, 15)),
];

/// `IORING_SETUP_*` (linux/io_uring.h): the bit, its kernel name without the prefix, and the
/// kernel that brought it.
pub(crate) const SETUP_FLAGS: &[(u32, &str, Since)] = &[
    (1 << 0, "IOPOLL", (5, 1)),
    (1 << 1, "SQPOLL", (5, 1)),
    (1 << 2, "SQ_AFF", (5, 1)),
    (1 << 3, "CQSIZE", (5, 5)),
    (1 << 4, "CLAMP", (5, 6)),
    (1 << 5, "ATTACH_WQ", (5, 6)),
    (1 << 6, "R_DISABLED", (5, 10)),
    (1 << 7, "SUBMIT_ALL", (5, 18)),
    (1 << 8, "COOP_TASKRUN", (5, 19)),
    (1 << 9, "TASKRUN_FLAG", (5, 19)),
    (1 << 10, "SQE128", (5, 19)),
    (1 << 11, "CQE32", (5, 19)),
    (1 << 12, "SINGLE_ISSUER", (6, 0)),
    (1 << 13, "DEFER_TASKRUN", (6, 1)),
    (1 << 14, "NO_MMAP", (6, 5)),
    (1 << 15, "REGISTERED_FD_ONLY", (6, 5)),
    (1 << 16, "NO_SQARRAY", (6, 6)),
    (1 << 17, "HYBRID_IOPOLL", (6, 13)),
    (1 << 18, "CQE_MIXED", (6, 18)),
];

/// The `IORING_SETUP_*` bit of `name` (a name of [`SETUP_FLAGS`]); 0 for an unknown name.
pub(crate) fn setup_bit(name: &str) -> u32 {
    SETUP_FLAGS.iter().find(|f| f.1 == name).map_or(0, |f| f.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Level {
        Level::parse(s).unwrap()
    }

    fn absent(s: &str) -> Vec<String> {
        at(s).absent()
    }

    fn lacks(level: &str, name: &str) -> bool {
        absent(level)
            .iter()
            .any(|a| a.split(" (").next() == Some(name))
    }

    #[test]
    fn parses_the_levels_and_native() {
        assert_eq!(at("native"), Level::Native);
        assert_eq!(at("NATIVE"), Level::Native);
        assert_eq!(at(""), Level::Native);
        assert_eq!(at(" 5.15 "), Level::At(5, 15));
        for l in LEVELS {
            assert_eq!(at(l).to_string(), l);
        }
        assert_eq!(at("6.8"), Level::At(6, 8));
    }

    #[test]
    fn refuses_what_is_not_a_level_with_the_accepted_values() {
        for bad in [
            "5", "5.", ".10", "5.10.1", "five", "4.19", "5.0", "6.1a", "-6.1", "1234.1",
        ] {
            let e = Level::parse(bad).unwrap_err();
            assert!(e.starts_with("HOOP_KERNEL_LEVEL="), "{e}");
            assert!(
                e.contains("5.10, 5.15, 5.19, 6.1, 6.10, 6.12, 6.13 or native"),
                "{e}"
            );
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn native_masks_nothing() {
        let n = Level::Native;
        assert!(n.absent().is_empty());
        assert_eq!(n.feature_mask(), u32::MAX);
        assert!(n.has_setup_flags(u32::MAX));
        assert!((0..=u8::MAX).all(|op| n.has_opcode(op)));
        assert!(n.has((99, 99)));
    }

    #[test]
    fn the_tables_are_in_bit_and_kernel_order() {
        for t in [FEATURES, SETUP_FLAGS] {
            for (i, f) in t.iter().enumerate() {
                assert_eq!(f.0, 1 << i, "{}", f.1);
            }
        }
        for w in OPCODES.windows(2) {
            assert!(w[0].1 <= w[1].1, "{} after {}", w[1].0, w[0].0);
        }
        assert_eq!(setup_bit("DEFER_TASKRUN"), 1 << 13);
        assert_eq!(setup_bit("nonsense"), 0);
    }

    /// What each CI level lacks of what hoop uses: the facts the matrix rests on.
    #[test]
    fn each_level_lacks_what_came_after_it() {
        // 5.10: no SHUTDOWN, RENAMEAT, UNLINKAT (5.11), MKDIRAT (5.15), which hoop's io_uring
        // driver needs, so it cannot run; no SOCKET (5.19), no epoll_pwait2 (5.11) either.
        for name in [
            "SHUTDOWN",
            "RENAMEAT",
            "MKDIRAT",
            "SOCKET",
            "FEAT_EXT_ARG",
            "epoll_pwait2",
        ] {
            assert!(lacks("5.10", name), "5.10 has {name}");
        }
        // 5.15: has MKDIRAT and epoll_pwait2 (io_uring runs), still no SOCKET (5.19: sockets
        // come from socket(2)).
        assert!(!lacks("5.15", "MKDIRAT") && !lacks("5.15", "epoll_pwait2"));
        assert!(!lacks("5.15", "REGISTER_IOWQ_MAX_WORKERS"));
        for name in [
            "SOCKET",
            "MSG_RING",
            "SETUP_SUBMIT_ALL",
            "REGISTER_RING_FDS",
            "SETUP_COOP_TASKRUN",
        ] {
            assert!(lacks("5.15", name), "5.15 has {name}");
        }
        // 5.19: SOCKET, multishot accept, COOP_TASKRUN, buffer ring registration; no
        // SINGLE_ISSUER, multishot receive, SEND_ZC (6.0), DEFER_TASKRUN (6.1).
        for name in [
            "SOCKET",
            "ACCEPT_MULTISHOT",
            "SETUP_COOP_TASKRUN",
            "SETUP_SUBMIT_ALL",
            "REGISTER_PBUF_RING",
            "FILE_INDEX_ALLOC",
            "MSG_RING",
        ] {
            assert!(!lacks("5.19", name), "5.19 lacks {name}");
        }
        for name in [
            "SETUP_SINGLE_ISSUER",
            "SETUP_DEFER_TASKRUN",
            "RECV_MULTISHOT",
            "SEND_ZC",
        ] {
            assert!(lacks("5.19", name), "5.19 has {name}");
        }
        // 6.1: DEFER_TASKRUN, SEND_ZC, SENDMSG_ZC; no futex (6.7), FIXED_FD_INSTALL (6.8),
        // FTRUNCATE (6.9), bundles (6.10).
        for name in [
            "SETUP_DEFER_TASKRUN",
            "SEND_ZC",
            "SENDMSG_ZC",
            "RECV_MULTISHOT",
        ] {
            assert!(!lacks("6.1", name), "6.1 lacks {name}");
        }
        for name in [
            "FUTEX_WAIT",
            "FIXED_FD_INSTALL",
            "FTRUNCATE",
            "FEAT_RECVSEND_BUNDLE",
            "READ_MULTISHOT",
        ] {
            assert!(lacks("6.1", name), "6.1 has {name}");
        }
        // 6.10: bundles; no BIND/LISTEN (6.11), incremental rings, MIN_TIMEOUT (6.12), the
        // ringless message (6.13).
        assert!(!lacks("6.10", "FEAT_RECVSEND_BUNDLE") && !lacks("6.10", "FTRUNCATE"));
        for name in [
            "BIND",
            "PBUF_RING_INC",
            "FEAT_MIN_TIMEOUT",
            "REGISTER_SEND_MSG_RING",
        ] {
            assert!(lacks("6.10", name), "6.10 has {name}");
        }
        // 6.12: min-wait and incremental rings; no ring resize (6.13). 6.13: resize; no
        // NO_IOWAIT (6.15).
        assert!(!lacks("6.12", "FEAT_MIN_TIMEOUT") && !lacks("6.12", "PBUF_RING_INC"));
        assert!(lacks("6.12", "REGISTER_RESIZE_RINGS"));
        assert!(!lacks("6.13", "REGISTER_RESIZE_RINGS") && lacks("6.13", "FEAT_NO_IOWAIT"));
        // Each level lacks everything the next one lacks, and more.
        for w in LEVELS.windows(2) {
            let (older, newer) = (absent(w[0]), absent(w[1]));
            assert!(older.len() > newer.len(), "{} vs {}", w[0], w[1]);
            assert!(
                newer.iter().all(|n| older.contains(n)),
                "{} vs {}",
                w[0],
                w[1]
            );
        }
        // Oldest first.
        assert_eq!(
            absent("6.1").first().map(String::as_str),
            Some("FEAT_REG_REG_RING (6.3)")
        );
    }

    #[test]
    fn masks_agree_with_the_tables() {
        let l = at("5.19");
        assert!(l.has_opcode(45)); // SOCKET
        assert!(!l.has_opcode(47)); // SEND_ZC
        assert!(!l.has_opcode(200)); // newer than the table
        assert!(Level::Native.has_opcode(200));
        let mask = l.feature_mask();
        assert_ne!(mask & (1 << 8), 0); // EXT_ARG
        assert_eq!(mask & (1 << 14), 0); // RECVSEND_BUNDLE
        assert_eq!(mask & (1 << 31), 0); // unknown bits go
        let flag = setup_bit;
        assert!(l.has_setup_flags(flag("COOP_TASKRUN") | flag("TASKRUN_FLAG") | flag("SUBMIT_ALL")));
        assert!(!l.has_setup_flags(flag("SINGLE_ISSUER") | flag("SUBMIT_ALL")));
        assert!(!at("6.1").has_setup_flags(1 << 30));
        assert!(at("6.1").has_setup_flags(flag("SINGLE_ISSUER") | flag("DEFER_TASKRUN")));
        assert!(!at("6.0").has_setup_flags(flag("DEFER_TASKRUN")));
        assert!(!at("5.17").has_setup_flags(flag("SUBMIT_ALL")));
        assert!(at("6.10").absent().iter().all(|a| !a.ends_with("(6.10)")));
        assert!(l.absent().iter().any(|a| a == "SEND_ZC (6.0)"));
    }
}
