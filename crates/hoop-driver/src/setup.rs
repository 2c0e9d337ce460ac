//! Explaining why io_uring could not be set up.
//!
//! `io_uring_setup(2)` fails for reasons a user can act on (an old kernel, a
//! sysctl, a container's seccomp profile, the locked-memory limit), but the
//! bare errno says little. [`SetupError::classify`] turns the error into a
//! [`SetupErrorKind`] and a one-line message that names the cause and the fix,
//! reading the relevant system settings at the moment of the failure.

use std::{error, fmt, fs, io};

/// The largest ring the kernel accepts without `IORING_SETUP_CLAMP`
/// (`IORING_MAX_ENTRIES`).
const MAX_ENTRIES: u32 = 32768;

/// What to suggest when io_uring cannot be used at all.
const USE_EPOLL: &str = "use the epoll driver (HOOP_DRIVER=epoll)";

/// Why io_uring could not be set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SetupErrorKind {
    /// `ENOSYS`: the kernel has no io_uring (too old, built without it, or a
    /// sandbox hides the system call).
    NotSupported,
    /// `EPERM`: io_uring exists but this process may not use it (the
    /// `kernel.io_uring_disabled` sysctl or a seccomp filter).
    PermissionDenied,
    /// `ENOMEM`: the ring could not be allocated, usually because of the
    /// locked-memory limit (`RLIMIT_MEMLOCK`) on kernels before 5.12.
    MemoryLimit,
    /// `EINVAL`: the kernel rejected the ring size or a setup flag.
    InvalidArgument,
    /// The ring works but the kernel's opcode probe lacks operations hoop needs.
    MissingOpcodes,
    /// Any other error.
    Other,
}

/// A refused io_uring setup: the kind, the OS error, and a one-line
/// explanation with what to do.
#[derive(Debug)]
pub struct SetupError {
    kind: SetupErrorKind,
    error: io::Error,
    /// Built by `classify`, so it describes the system as it was when the
    /// setup failed.
    message: String,
}

impl SetupError {
    /// Classifies the error returned by `io_uring_setup` for a ring of
    /// `entries` entries, reading the sysctls and limits that explain it.
    pub fn classify(err: io::Error, entries: u32) -> SetupError {
        let (kind, message) = match err.raw_os_error() {
            Some(libc::ENOSYS) => (SetupErrorKind::NotSupported, enosys_message()),
            Some(libc::EPERM) => {
                let disabled = io_uring_disabled();
                let group = match disabled {
                    Some(1) => Some(Groups::current()),
                    _ => None,
                };
                (
                    SetupErrorKind::PermissionDenied,
                    eperm_message(disabled, group.as_ref()),
                )
            }
            Some(libc::ENOMEM) => (
                SetupErrorKind::MemoryLimit,
                enomem_message(memlock_limit(), entries),
            ),
            Some(libc::EINVAL) => (SetupErrorKind::InvalidArgument, einval_message(entries)),
            _ => (
                SetupErrorKind::Other,
                format!("io_uring_setup failed: {err}"),
            ),
        };
        SetupError {
            kind,
            error: err,
            message,
        }
    }

    /// The ring was set up but the kernel lacks operations hoop needs (gVisor, for one,
    /// supports only NOP and READV): found by `IORING_REGISTER_PROBE`.
    pub fn missing_opcodes(names: &[&str]) -> SetupError {
        SetupError {
            kind: SetupErrorKind::MissingOpcodes,
            error: io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            message: format!(
                "io_uring is present but lacks operations hoop needs ({}): the kernel is too old \
                 or a sandbox (gVisor) implements only part of io_uring; use the epoll driver \
                 (HOOP_DRIVER=epoll)",
                names.join(", ")
            ),
        }
    }

    /// As [`missing_opcodes`](Self::missing_opcodes), when the kernel level
    /// (`HOOP_KERNEL_LEVEL`) switched them off: `names` carry the kernel that brought each
    /// (`"MKDIRAT 5.15"`).
    pub fn missing_opcodes_at_level(names: &[String], level: crate::level::Level) -> SetupError {
        SetupError {
            kind: SetupErrorKind::MissingOpcodes,
            error: io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            message: format!(
                "io_uring at kernel level {level} ({}={level}) lacks operations hoop's io_uring \
                 driver needs ({}), so it uses the epoll driver as it would on that kernel",
                crate::level::VAR,
                names.join(", ")
            ),
        }
    }

    /// The kernel level (`HOOP_KERNEL_LEVEL`) is not one hoop knows: no driver starts, so that
    /// a typo never runs a test of the wrong kernel.
    pub fn invalid_level(err: io::Error) -> SetupError {
        SetupError {
            kind: SetupErrorKind::InvalidArgument,
            message: err.to_string(),
            error: err,
        }
    }

    /// Why the setup failed.
    pub fn kind(&self) -> SetupErrorKind {
        self.kind
    }

    /// The error `io_uring_setup` returned.
    pub fn os_error(&self) -> &io::Error {
        &self.error
    }
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl error::Error for SetupError {
    fn source(&self) -> Option<&(dyn error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<SetupError> for io::Error {
    /// Keeps the [`io::ErrorKind`] of the OS error (`Unsupported` for
    /// `ENOSYS`, `PermissionDenied` for `EPERM`, `OutOfMemory` for `ENOMEM`,
    /// `InvalidInput` for `EINVAL`) and displays as the [`SetupError`].
    fn from(err: SetupError) -> io::Error {
        io::Error::new(err.error.kind(), err)
    }
}

/// The value of the `kernel.io_uring_disabled` sysctl (Linux 6.6+): 0 lets
/// everyone use io_uring, 1 only members of `kernel.io_uring_group` and
/// processes with `CAP_SYS_ADMIN`, 2 nobody. `None` if the kernel has no such
/// sysctl or it cannot be read.
pub fn io_uring_disabled() -> Option<u32> {
    read_sysctl("/proc/sys/kernel/io_uring_disabled")
}

/// The group allowed to use io_uring when `kernel.io_uring_disabled` is 1
/// (`-1` for none), or `None` if it cannot be read.
fn io_uring_group() -> Option<i64> {
    read_sysctl("/proc/sys/kernel/io_uring_group")
}

fn read_sysctl<T: std::str::FromStr>(path: &str) -> Option<T> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The locked-memory limit (`RLIMIT_MEMLOCK`) as `(soft, hard)` in bytes,
/// with `u64::MAX` for unlimited; `None` if it cannot be read.
pub fn memlock_limit() -> Option<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable `rlimit` that outlives the call;
    // getrlimit only writes to it.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) };
    if rc != 0 {
        return None;
    }
    let bytes = |v: libc::rlim_t| {
        if v == libc::RLIM_INFINITY {
            u64::MAX
        } else {
            // rlim_t is u64 on 64-bit targets and may be narrower elsewhere.
            #[allow(clippy::unnecessary_cast)]
            let v = v as u64;
            v
        }
    };
    Some((bytes(limit.rlim_cur), bytes(limit.rlim_max)))
}

/// The group ids the kernel checks against `kernel.io_uring_group`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Groups {
    /// The io_uring group, if set (`kernel.io_uring_group`, -1 for none).
    io_uring_group: Option<i64>,
    /// This process's effective group id.
    egid: u32,
    /// This process's supplementary groups.
    supplementary: Vec<u32>,
}

impl Groups {
    fn current() -> Groups {
        Groups {
            io_uring_group: io_uring_group(),
            // SAFETY: getegid takes no arguments, cannot fail and has no
            // side effects.
            egid: unsafe { libc::getegid() },
            supplementary: supplementary_groups(),
        }
    }
}

/// The supplementary groups of this process (empty if they cannot be read).
fn supplementary_groups() -> Vec<u32> {
    // SAFETY: with a size of 0, getgroups only returns the number of groups
    // and does not touch the (null) list.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    let Ok(len) = usize::try_from(n) else {
        return Vec::new();
    };
    let mut groups: Vec<libc::gid_t> = vec![0; len];
    // SAFETY: `groups` has room for exactly `n` gids, the size passed; the
    // kernel writes at most that many.
    let got = unsafe { libc::getgroups(n, groups.as_mut_ptr()) };
    // The groups may have changed in between (got < 0 with EINVAL); give up.
    match usize::try_from(got) {
        Ok(got) => {
            groups.truncate(got);
            groups
        }
        Err(_) => Vec::new(),
    }
}

fn enosys_message() -> String {
    String::from(
        "io_uring is not available: io_uring_setup returned ENOSYS (kernel older than 5.1, \
         built without CONFIG_IO_URING, or a sandbox hides it); use a newer kernel or the epoll \
         driver (HOOP_DRIVER=epoll)",
    )
}

/// `disabled` is `kernel.io_uring_disabled`; `groups` is read only when it
/// is 1, the one case where they matter.
fn eperm_message(disabled: Option<u32>, groups: Option<&Groups>) -> String {
    const SECCOMP: &str = "a seccomp filter (Docker/containerd default profile since 2023) \
         blocks it; run with a profile that allows \
         io_uring_setup/io_uring_enter/io_uring_register";
    match disabled {
        Some(2) => format!(
            "io_uring is disabled: kernel.io_uring_disabled = 2 (nobody may use it), so \
             io_uring_setup returned EPERM; run `sysctl kernel.io_uring_disabled=0` as root \
             or {USE_EPOLL}"
        ),
        Some(1) => {
            let who = match groups {
                Some(g) => {
                    let list: Vec<String> = g.supplementary.iter().map(u32::to_string).collect();
                    let list = if list.is_empty() {
                        "none".to_owned()
                    } else {
                        list.join(",")
                    };
                    format!(
                        "this process (gid {}, supplementary groups {list}) is not in it",
                        g.egid
                    )
                }
                None => "this process is not in it".to_owned(),
            };
            match groups.and_then(|g| g.io_uring_group).filter(|&g| g >= 0) {
                Some(gid) => format!(
                    "io_uring is restricted: kernel.io_uring_disabled = 1 allows only \
                     kernel.io_uring_group = {gid} and CAP_SYS_ADMIN, {who}, so io_uring_setup \
                     returned EPERM; add the user to group {gid}, run \
                     `sysctl kernel.io_uring_disabled=0` as root, or {USE_EPOLL}"
                ),
                None => format!(
                    "io_uring is restricted: kernel.io_uring_disabled = 1 and \
                     kernel.io_uring_group is unset (-1), so only CAP_SYS_ADMIN may use it and \
                     io_uring_setup returned EPERM; run `sysctl kernel.io_uring_disabled=0` (or \
                     set kernel.io_uring_group to one of this process's groups) as root, \
                     or {USE_EPOLL}"
                ),
            }
        }
        Some(0) => format!(
            "io_uring_setup was refused with EPERM although kernel.io_uring_disabled = 0: \
             {SECCOMP} or use HOOP_DRIVER=epoll"
        ),
        None => format!(
            "io_uring_setup was refused with EPERM (this kernel has no \
             kernel.io_uring_disabled sysctl): {SECCOMP} or use HOOP_DRIVER=epoll"
        ),
        Some(other) => format!(
            "io_uring_setup was refused with EPERM (kernel.io_uring_disabled = {other}, an \
             unknown setting, or a seccomp filter); run `sysctl kernel.io_uring_disabled=0` as \
             root, run with a seccomp profile that allows \
             io_uring_setup/io_uring_enter/io_uring_register, or use HOOP_DRIVER=epoll"
        ),
    }
}

fn enomem_message(memlock: Option<(u64, u64)>, entries: u32) -> String {
    let limit = match memlock {
        Some((soft, hard)) => format!(
            "RLIMIT_MEMLOCK = {} soft / {} hard",
            format_bytes(soft),
            format_bytes(hard)
        ),
        None => "RLIMIT_MEMLOCK, which could not be read".to_owned(),
    };
    format!(
        "io_uring_setup failed with ENOMEM: the locked-memory limit ({limit}) is too small \
         for a ring of {entries} entries (kernels before 5.12 charge rings to it); raise it \
         (ulimit -l unlimited, or LimitMEMLOCK= in systemd) or use fewer entries"
    )
}

fn einval_message(entries: u32) -> String {
    let size = if entries == 0 || entries > MAX_ENTRIES {
        format!("; the ring size must be between 1 and {MAX_ENTRIES} entries")
    } else {
        String::new()
    };
    format!(
        "io_uring_setup rejected the parameters (EINVAL): a setup flag or the ring size \
         ({entries} entries) is not supported by this kernel{size}"
    )
}

/// `65536` → `64 KiB`, `u64::MAX` → `unlimited`; sizes that are not a whole
/// number of KiB stay in bytes.
fn format_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    if bytes == u64::MAX {
        return "unlimited".to_owned();
    }
    for (size, unit) in UNITS {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{} {unit}", bytes / size);
        }
    }
    format!("{bytes} bytes")
}

/// The running kernel's (major, minor) version, from `uname`.
pub fn kernel_version() -> Option<(u32, u32)> {
    // SAFETY: utsname is plain old data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a live, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let release: Vec<u8> = u
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    let release = String::from_utf8_lossy(&release);
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Whether the running kernel is at least `major.minor` (false when unknown), and so is the
/// kernel level (`HOOP_KERNEL_LEVEL`, see [`crate::level`]): at level 5.15 a 6.18 kernel is
/// not at least 6.0. ([`kernel_version`] stays the running kernel's.)
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    crate::level::has((major, minor)) && kernel_version().is_some_and(|v| v >= (major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(errno: i32, entries: u32) -> SetupError {
        SetupError::classify(io::Error::from_raw_os_error(errno), entries)
    }

    fn assert_one_line(msg: &str) {
        assert!(!msg.contains('\n'), "{msg}");
        assert!(!msg.contains("  "), "double space in {msg}");
    }

    #[test]
    fn enosys() {
        let err = classify(libc::ENOSYS, 256);
        assert_eq!(err.kind(), SetupErrorKind::NotSupported);
        assert_eq!(err.os_error().raw_os_error(), Some(libc::ENOSYS));
        let msg = err.to_string();
        assert_one_line(&msg);
        assert!(msg.contains("ENOSYS"), "{msg}");
        assert!(msg.contains("5.1"), "{msg}");
        assert!(msg.contains("HOOP_DRIVER=epoll"), "{msg}");
    }

    #[test]
    fn eperm_classified() {
        // The message depends on this machine's sysctl; each variant is
        // checked below with fixed inputs.
        let err = classify(libc::EPERM, 256);
        assert_eq!(err.kind(), SetupErrorKind::PermissionDenied);
        let msg = err.to_string();
        assert_one_line(&msg);
        assert!(msg.contains("EPERM"), "{msg}");
        assert!(msg.contains("HOOP_DRIVER=epoll"), "{msg}");
    }

    #[test]
    fn eperm_disabled() {
        let msg = eperm_message(Some(2), None);
        assert_one_line(&msg);
        assert!(msg.starts_with("io_uring is disabled"), "{msg}");
        assert!(msg.contains("kernel.io_uring_disabled = 2 (nobody may use it)"));
        assert!(msg.contains("EPERM"), "{msg}");
        assert!(
            msg.contains("`sysctl kernel.io_uring_disabled=0` as root"),
            "{msg}"
        );
        assert!(msg.contains("HOOP_DRIVER=epoll"), "{msg}");
    }

    #[test]
    fn eperm_restricted_to_group() {
        let groups = Groups {
            io_uring_group: Some(990),
            egid: 1000,
            supplementary: vec![1000, 27],
        };
        let msg = eperm_message(Some(1), Some(&groups));
        assert_one_line(&msg);
        assert!(msg.contains("kernel.io_uring_disabled = 1"), "{msg}");
        assert!(msg.contains("kernel.io_uring_group = 990"), "{msg}");
        assert!(
            msg.contains("gid 1000, supplementary groups 1000,27"),
            "{msg}"
        );
        assert!(msg.contains("EPERM"), "{msg}");
        assert!(msg.contains("add the user to group 990"), "{msg}");
        assert!(msg.contains("HOOP_DRIVER=epoll"), "{msg}");

        let no_group = Groups {
            io_uring_group: Some(-1),
            egid: 1000,
            supplementary: vec![],
        };
        for groups in [Some(&no_group), None] {
            let msg = eperm_message(Some(1), groups);
            assert_one_line(&msg);
            assert!(msg.contains("kernel.io_uring_group is unset"), "{msg}");
            assert!(msg.contains("EPERM"), "{msg}");
            assert!(msg.contains("HOOP_DRIVER=epoll"), "{msg}");
        }
    }

    #[test]
    fn eperm_seccomp() {
        for disabled in [Some(0), None, Some(7)] {
            let msg = eperm_message(disabled, None);
            assert_one_line(&msg);
            assert!(msg.contains("EPERM"), "{msg}");
            assert!(msg.contains("seccomp"), "{msg}");
            assert!(
                msg.contains("io_uring_setup/io_uring_enter/io_uring_register"),
                "{msg}"
            );
            assert!(msg.contains("HOOP_DRIVER=epoll"), "{msg}");
        }
        assert!(eperm_message(Some(0), None).contains("although kernel.io_uring_disabled = 0"));
    }

    #[test]
    fn enomem() {
        let err = classify(libc::ENOMEM, 256);
        assert_eq!(err.kind(), SetupErrorKind::MemoryLimit);
        let msg = err.to_string();
        assert_one_line(&msg);
        assert!(msg.contains("ENOMEM"), "{msg}");
        assert!(msg.contains("256 entries"), "{msg}");
        assert!(msg.contains("ulimit -l unlimited"), "{msg}");
        let (soft, hard) = memlock_limit().expect("getrlimit works");
        let limits = format!(
            "RLIMIT_MEMLOCK = {} soft / {} hard",
            format_bytes(soft),
            format_bytes(hard)
        );
        assert!(msg.contains(&limits), "{msg}");
    }

    #[test]
    fn enomem_fixed_limits() {
        let msg = enomem_message(Some((65536, 65536)), 256);
        assert!(
            msg.contains("(RLIMIT_MEMLOCK = 64 KiB soft / 64 KiB hard)"),
            "{msg}"
        );
        let msg = enomem_message(Some((8 << 20, u64::MAX)), 4096);
        assert!(
            msg.contains("RLIMIT_MEMLOCK = 8 MiB soft / unlimited hard"),
            "{msg}"
        );
        assert!(msg.contains("4096 entries"), "{msg}");
        let msg = enomem_message(None, 1);
        assert!(msg.contains("could not be read"), "{msg}");
    }

    #[test]
    fn einval() {
        let err = classify(libc::EINVAL, 256);
        assert_eq!(err.kind(), SetupErrorKind::InvalidArgument);
        let msg = err.to_string();
        assert_one_line(&msg);
        assert!(msg.contains("EINVAL"), "{msg}");
        assert!(msg.contains("(256 entries)"), "{msg}");
        assert!(!msg.contains("between"), "{msg}");
        let msg = classify(libc::EINVAL, 65536).to_string();
        assert!(msg.contains("between 1 and 32768 entries"), "{msg}");
    }

    #[test]
    fn other() {
        let err = classify(libc::EIO, 256);
        assert_eq!(err.kind(), SetupErrorKind::Other);
        let msg = err.to_string();
        assert_one_line(&msg);
        assert!(msg.starts_with("io_uring_setup failed: "), "{msg}");
        assert!(
            msg.contains(&io::Error::from_raw_os_error(libc::EIO).to_string()),
            "{msg}"
        );
    }

    #[test]
    fn into_io_error() {
        let cases = [
            (libc::ENOSYS, io::ErrorKind::Unsupported),
            (libc::EPERM, io::ErrorKind::PermissionDenied),
            (libc::ENOMEM, io::ErrorKind::OutOfMemory),
            (libc::EINVAL, io::ErrorKind::InvalidInput),
        ];
        for (errno, kind) in cases {
            let setup = classify(errno, 64);
            let message = setup.to_string();
            let err = io::Error::from(setup);
            assert_eq!(err.kind(), kind);
            assert_eq!(err.to_string(), message);
            let inner = err
                .get_ref()
                .and_then(|e| e.downcast_ref::<SetupError>())
                .expect("the SetupError is the inner error");
            assert_eq!(inner.os_error().raw_os_error(), Some(errno));
        }
    }

    #[test]
    fn source_is_the_os_error() {
        let err = classify(libc::ENOSYS, 8);
        let source = error::Error::source(&err).expect("has a source");
        assert_eq!(
            source.to_string(),
            io::Error::from_raw_os_error(libc::ENOSYS).to_string()
        );
    }

    #[test]
    fn bytes() {
        assert_eq!(format_bytes(u64::MAX), "unlimited");
        assert_eq!(format_bytes(65536), "64 KiB");
        assert_eq!(format_bytes(8 << 20), "8 MiB");
        assert_eq!(format_bytes(2 << 30), "2 GiB");
        assert_eq!(format_bytes(1536), "1536 bytes"); // 1.5 KiB stays exact
        assert_eq!(format_bytes(0), "0 bytes");
    }

    #[test]
    fn sysctl_readers_do_not_panic() {
        if let Some(v) = io_uring_disabled() {
            assert!(v <= 2, "unexpected kernel.io_uring_disabled = {v}");
        }
        let (soft, hard) = memlock_limit().expect("getrlimit works");
        assert!(soft <= hard);
        let g = Groups::current();
        assert!(g.supplementary.len() < 65537);
    }
}
