//! How a driver is chosen and set up.

use std::fmt;
use std::io;
use std::str::FromStr;
use std::time::Duration;

/// Which driver a runtime runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DriverKind {
    /// io_uring if it can be set up and has the operations hoop needs, else epoll (saying why,
    /// in one line on stderr).
    #[default]
    Auto,
    /// io_uring or an error that says why it cannot run.
    Uring,
    /// The readiness driver: epoll for sockets, a thread pool for files.
    Epoll,
}

impl DriverKind {
    /// The choice in `HOOP_DRIVER` (`uring`, `epoll` or `auto`), if set.
    pub fn from_env() -> io::Result<Option<DriverKind>> {
        match std::env::var("HOOP_DRIVER") {
            Ok(v) if !v.is_empty() => v.parse().map(Some),
            _ => Ok(None),
        }
    }
}

impl FromStr for DriverKind {
    type Err = io::Error;
    fn from_str(s: &str) -> io::Result<DriverKind> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(DriverKind::Auto),
            "uring" | "io_uring" | "io-uring" => Ok(DriverKind::Uring),
            "epoll" => Ok(DriverKind::Epoll),
            other => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown driver {other:?}: expected uring, epoll or auto"),
            )),
        }
    }
}

impl fmt::Display for DriverKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DriverKind::Auto => "auto",
            DriverKind::Uring => "uring",
            DriverKind::Epoll => "epoll",
        })
    }
}

/// How a ring is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// SQ entries (rounded up to a power of two by the kernel).
    pub entries: u32,
    /// CQ entries; `None` means the default (see [`default_cq_entries`]): the larger of 16384,
    /// 4 x `entries` and what lets one single-shot operation per descriptor of the process's
    /// `RLIMIT_NOFILE` soft limit be in flight (at most 65536, the kernel's largest CQ).
    pub cq_entries: Option<u32>,
    /// Most operations in flight at once; `None` means "what the CQ can hold" (CQ size minus the
    /// room reserved for cancels and the wake-up poll). Multishot receives and accepts, which
    /// wait for a peer, are not counted: they take slots beyond the cap (one per descriptor of
    /// the `RLIMIT_NOFILE` soft limit, at most 65,536), so idle connections never hold the room new work needs. Larger values are for tests that force
    /// CQ overflow.
    pub max_in_flight: Option<u32>,
    /// Try `SINGLE_ISSUER | DEFER_TASKRUN` (then `COOP_TASKRUN`) before plain setup.
    pub taskrun_flags: bool,
    /// Try `COOP_TASKRUN | TASKRUN_FLAG` (not `SINGLE_ISSUER`) before plain setup, when
    /// `taskrun_flags` is off: for rings several threads submit to (shared rings).
    pub coop_taskrun: bool,
    /// How long shutdown waits for in-flight operations' final CQEs before leaking their memory.
    pub shutdown_timeout: Duration,
    /// Which driver to run.
    pub driver: DriverKind,
    /// Threads of the epoll driver's blocking pool (file operations).
    pub pool_threads: usize,
    /// `IORING_SETUP_SQPOLL`: a kernel thread polls the SQ, so submitting needs no system call
    /// while it is awake; it sleeps after this long without work (whole milliseconds, at least
    /// 1). `None` (the default): no SQ thread. If the kernel refuses SQPOLL (`EINVAL`, or
    /// `EPERM` before 5.13) the ring is set up without it; `Driver::setup_flags` says which.
    /// With SQPOLL, `Counters::sqes_submitted` stays 0 (the SQ thread takes SQEs unseen).
    pub sqpoll_idle: Option<Duration>,
    /// `IORING_SETUP_SQ_AFF`: the CPU the SQ thread is bound to (only with `sqpoll_idle`). A CPU
    /// the kernel refuses is dropped (the SQ thread then runs anywhere).
    pub sqpoll_cpu: Option<u32>,
    /// `IORING_SETUP_IOPOLL`: completions are busy-polled from the device instead of signalled by
    /// interrupts. Only reads and writes (and NOPs) of files opened with `O_DIRECT` on a device
    /// with poll queues may be used on such a ring: sockets, timers, polls, cancels, opens and
    /// closes fail with `EINVAL`, and a read on a device without poll queues fails with
    /// `EOPNOTSUPP`. The thread spins while it waits. Such a ring uses `COOP_TASKRUN`, not
    /// `DEFER_TASKRUN` (with which a polled read stalled on Linux 6.18). Default false.
    pub iopoll: bool,
    /// Register the ring's fd with the kernel (`IORING_REGISTER_RING_FDS`, 5.18) so that
    /// `io_uring_enter` skips the fd lookup. Default true; a kernel that refuses is ignored.
    pub register_ring_fd: bool,
    /// `IORING_REGISTER_IOWQ_MAX_WORKERS` (5.15): the most io-wq worker threads for bounded work
    /// (regular files, block devices) and unbounded work (sockets, pipes); 0 keeps the kernel's
    /// limit. The kernel keeps them per thread (the io-wq of the thread, or of the SQ thread with
    /// SQPOLL), so they outlast the ring. `None` (the default) registers nothing; a kernel that
    /// refuses is ignored.
    pub iowq_max_workers: Option<(u32, u32)>,
    /// Start with a small CQ (1,024 entries, or 4 x `entries`) and grow it under load with
    /// `IORING_REGISTER_RESIZE_RINGS` (6.13) to the size [`default_cq_entries`] gives, rather
    /// than set that size up front: a thread's rings start at 36 KiB instead of up to 1 MiB.
    /// Only where the kernel resizes (6.13, rings with `DEFER_TASKRUN`) and `cq_entries` and
    /// `max_in_flight` are `None`; elsewhere the CQ has its full size from the start. Default
    /// true.
    pub resize_rings: bool,
    /// A blocking wait asks the kernel (6.12, `IORING_FEAT_MIN_TIMEOUT`) for a batch of
    /// completions, at most 32 of those owed, and returns this long after it began once one
    /// has come, instead of at the first completion: fewer wake-ups under load, each
    /// completion later by up to this much. `None` (the default, unless `HOOP_MIN_WAIT_US` is
    /// set): the wait ends at the first completion. Ignored on older kernels and by epoll.
    pub min_wait: Option<Duration>,
    /// Bounded waits (a timer's deadline, a min-wait) pass their arguments in a page
    /// registered with the ring (`IORING_REGISTER_MEM_REGION`, 6.13) rather than copied in on
    /// every `io_uring_enter`; the ring is set up disabled, the page registered, the ring
    /// enabled. Default true (`HOOP_REG_WAIT=0` turns it off for a whole process): a bounded
    /// wait's `io_uring_enter` took 200 ns instead of 264 (DESIGN.md). A kernel that refuses
    /// the page leaves the ring as it would be without. Ignored before 6.13, with SQPOLL or
    /// IOPOLL, on shared rings (their reapers wait outside the ring's lock) and by epoll.
    pub reg_wait: bool,
    /// Keep a time-weighted count of the operations in the kernel (`Counters::depth_ns` and
    /// `Counters::depth_sampled_ns`): one clock read per `io_uring_enter` and per drain, so off
    /// by default; benchmarks turn it on to see the queue depth the device really had.
    pub sample_depth: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            entries: 256,
            cq_entries: None,
            max_in_flight: None,
            taskrun_flags: true,
            coop_taskrun: false,
            shutdown_timeout: Duration::from_secs(5),
            driver: DriverKind::Auto,
            pool_threads: 4,
            sqpoll_idle: None,
            sqpoll_cpu: None,
            iopoll: false,
            register_ring_fd: true,
            iowq_max_workers: None,
            resize_rings: true,
            min_wait: min_wait_from_env(),
            reg_wait: std::env::var("HOOP_REG_WAIT").map_or(true, |v| v.trim() != "0"),
            sample_depth: false,
        }
    }
}

/// `HOOP_MIN_WAIT_US`: the default of `Config::min_wait`, in microseconds (unset, empty or 0:
/// none; a value that is not a number is ignored).
fn min_wait_from_env() -> Option<Duration> {
    let us: u64 = std::env::var("HOOP_MIN_WAIT_US")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (us > 0).then(|| Duration::from_micros(us))
}

/// The kernel's largest CQ (`IORING_MAX_CQ_ENTRIES`); larger requests are clamped to it.
const MAX_CQ_ENTRIES: u32 = 65536;

/// The in-flight cap a CQ of `cq` entries allows: its size minus the room reserved for cancels
/// (a sixteenth) and the wake-up poll (one).
pub(crate) fn cap_for_cq(cq: usize) -> usize {
    cq.saturating_sub((cq / 16).max(1) + 1).max(1)
}

/// The default CQ size for an SQ of `entries`: the larger of 16384, 4 x `entries`, and the
/// smallest power of two whose in-flight cap (`cap_for_cq`) holds one operation per descriptor
/// the process may open (the `RLIMIT_NOFILE` soft limit when the runtime is built), at most
/// 65536. Every idle connection keeps one receive in flight (single-shot or multishot), so a
/// cap below the descriptor limit stalls the next accept behind idle connections while the
/// process could still open sockets; sized this way, running out of descriptors (`EMFILE` on
/// accept) comes first. A CQE is 16 bytes: 32768 entries (a limit of 20000) cost 512 KiB.
pub fn default_cq_entries(entries: u32) -> u32 {
    let base = entries.saturating_mul(4).max(16384);
    let nofile = crate::fixedfile::table_size() as usize;
    let mut cq = base.next_power_of_two();
    while cq < MAX_CQ_ENTRIES && cap_for_cq(cq as usize) < nofile {
        cq *= 2;
    }
    cq.min(MAX_CQ_ENTRIES).max(base)
}

/// Slots beyond the in-flight cap for the operations it does not count (multishots that wait
/// for a peer): one per descriptor the process may open (the `RLIMIT_NOFILE` soft limit, at
/// most [`MAX_UNCAPPED`]), since each waits on a socket. Past that they take counted slots:
/// with the cap of the largest CQ (61,439) a thread has 126,975 slots for waiting receives.
pub(crate) fn uncapped_slots() -> usize {
    (crate::fixedfile::table_size() as usize).min(MAX_UNCAPPED)
}

/// Most slots outside the cap: the table is allocated whole when the driver is built (32
/// bytes a slot: 2 MiB at this size), so a process with a huge limit (containers often allow
/// 2^20 descriptors) does not pay for slots it will not use.
const MAX_UNCAPPED: usize = 65536;
