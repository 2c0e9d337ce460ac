//! Seeded fault injection, for tests and soaks.
//!
//! Built only with the `fault-injection` feature (off by default; hoop's own test builds turn it
//! on through a dev-dependency, so `cargo test` and `cargo run` build different code). With
//! the feature and `HOOP_FAULTS=seed=N,rate=P[,kinds=LIST]` in the environment, both drivers
//! inject, with probability `P` per event and reproducibly from the seed, the failures a
//! kernel may really produce: errors from `io_uring_enter`/`epoll_wait`, short submits, short
//! reads and writes, `ECANCELED`, `ENOBUFS` on buffer-ring receives, `ECONNRESET` on sockets,
//! completions held back and delivered out of order, a tiny CQ that overflows, and a ring setup
//! that fails with each classified error. `LIST` is a `+`- or `:`-separated list of [`KINDS`]
//! (default: all).
//!
//! Without the feature every function here exists and does nothing ([`enabled`] is false), and
//! the drivers' injection points compile to nothing.
//!
//! Each driver gets its own random stream, seeded from the plan's seed, the name of the thread
//! that built it (a test's name, under the test harness) and how many drivers that thread built
//! before, so a failing test repeats with the same `HOOP_FAULTS` whatever else runs beside it.
//! A test that cannot hold under a kind opts out of it by name with [`opt_out`], which says so
//! on stderr.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// One kind of injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// `io_uring_enter` fails with `EAGAIN` (nothing submitted); a send made inline
    /// (`Driver::try_send`) finds no room (`EAGAIN`, nothing sent).
    Eagain,
    /// `io_uring_enter` fails with `EBUSY` (nothing submitted).
    Ebusy,
    /// `io_uring_enter` or `epoll_wait` is interrupted by a signal (`EINTR`).
    Eintr,
    /// `io_uring_enter` consumes fewer SQEs than were queued (the rest stay queued).
    ShortSubmit,
    /// A read, write, send or receive (an inline send too) is asked for fewer bytes than the
    /// caller asked (the kernel then really moves fewer bytes: the result is short, never a
    /// lie). A multishot buffer-ring receive gets a cap per receive instead (6.17+), so its
    /// receives and bundles end mid-message more often.
    ShortIo,
    /// An operation ends with `ECANCELED` without having run.
    Ecanceled,
    /// A buffer-ring receive ends with `ENOBUFS` without having run.
    Enobufs,
    /// A socket send or receive ends with `ECONNRESET` without having run (an inline send
    /// too); never on a datagram socket, which a kernel does not reset.
    Econnreset,
    /// A completion is held back for a turn or more, and delivered after later ones (the
    /// completions of one operation stay in order).
    Late,
    /// The ring is set up with a tiny CQ (but the driver keeps its usual in-flight cap), so
    /// the CQ overflows into the kernel's backlog under load.
    CqOverflow,
    /// The ring's setup fails with one of the classified errors (ENOSYS, EPERM, ENOMEM,
    /// EINVAL), as if the kernel had refused it.
    Setup,
}

impl Kind {
    /// Every kind, in the order [`counts`] reports them.
    pub const ALL: [Kind; 11] = [
        Kind::Eagain,
        Kind::Ebusy,
        Kind::Eintr,
        Kind::ShortSubmit,
        Kind::ShortIo,
        Kind::Ecanceled,
        Kind::Enobufs,
        Kind::Econnreset,
        Kind::Late,
        Kind::CqOverflow,
        Kind::Setup,
    ];

    /// The kind's name in `HOOP_FAULTS` and in reports.
    pub fn name(self) -> &'static str {
        KINDS[self as usize]
    }

    /// The kind called `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        KINDS.iter().position(|k| *k == name).map(|i| Kind::ALL[i])
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// The kinds' names, in [`Kind::ALL`]'s order.
pub const KINDS: [&str; 11] = [
    "eagain",
    "ebusy",
    "eintr",
    "short_submit",
    "short_io",
    "ecanceled",
    "enobufs",
    "econnreset",
    "late",
    "cq_overflow",
    "setup",
];

const ALL_BITS: u32 = (1 << KINDS.len()) - 1;

mod plan;
pub use plan::Plan;

static COUNTS: [AtomicU64; 11] = [const { AtomicU64::new(0) }; 11];

thread_local! {
    /// Kinds this thread opted out of ([`opt_out`]).
    static OPTED_OUT: Cell<u32> = const { Cell::new(0) };
    /// Drivers this thread built so far (each gets its own random stream).
    #[cfg(feature = "fault-injection")]
    static BUILT: Cell<u64> = const { Cell::new(0) };
    /// The engines (`Faults::new`'s bit) this thread built a driver of: only the first of each
    /// injects the plan's `first` kinds.
    #[cfg(feature = "fault-injection")]
    static ENGINES_BUILT: Cell<u32> = const { Cell::new(0) };
    /// A plan set for this thread only ([`set_thread_plan`]), over `HOOP_FAULTS`.
    static THREAD_PLAN: Cell<Option<Plan>> = const { Cell::new(None) };
}

/// The plan from `HOOP_FAULTS`, read once. A value that does not parse stops the process with
/// the reason: a typo must not silently run a fault-free suite. An empty value (`HOOP_FAULTS=`,
/// the shell's way to clear a variable for one command) means no faults.
#[cfg(feature = "fault-injection")]
fn env_plan() -> Option<Plan> {
    use std::sync::OnceLock;
    static PLAN: OnceLock<Option<Plan>> = OnceLock::new();
    *PLAN.get_or_init(|| {
        let spec = std::env::var("HOOP_FAULTS").ok()?;
        if spec.trim().is_empty() {
            return None;
        }
        match Plan::parse(&spec) {
            Ok(plan) => {
                install_panic_note(plan);
                install_tally();
                Some(plan)
            }
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        }
    })
}

#[cfg(not(feature = "fault-injection"))]
fn env_plan() -> Option<Plan> {
    None
}

/// With `HOOP_FAULTS_TALLY=DIR` beside `HOOP_FAULTS`, the process writes the faults it
/// injected per kind to `DIR/PID.tally` when it exits (`kind count` lines), so a run of many
/// processes (a test suite and the servers it starts) can be totalled (`.ci/run` does).
#[cfg(feature = "fault-injection")]
fn install_tally() {
    if std::env::var_os("HOOP_FAULTS_TALLY").is_none() {
        return;
    }
    extern "C" fn write_tally() {
        let Some(dir) = std::env::var_os("HOOP_FAULTS_TALLY") else {
            return;
        };
        let path = std::path::Path::new(&dir).join(format!("{}.tally", std::process::id()));
        let text: String = KINDS
            .iter()
            .zip(COUNTS.iter())
            .map(|(name, c)| format!("{name} {}\n", c.load(Ordering::Relaxed)))
            .collect();
        let _ = std::fs::write(path, text);
    }
    // SAFETY: `write_tally` is an `extern "C" fn()` that never unwinds (it only formats and
    // writes a file, ignoring errors); atexit keeps the pointer for the life of the process.
    unsafe {
        libc::atexit(write_tally);
    }
}

/// Every panic under faults names the plan, so the run can be repeated.
#[cfg(feature = "fault-injection")]
fn install_panic_note(plan: Plan) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        eprintln!(
            "hoop faults: panic under HOOP_FAULTS={plan} in thread {} (repeat with the same \
             HOOP_FAULTS)",
            thread.name().unwrap_or("?")
        );
        previous(info);
    }));
}

/// The plan in force on this thread: [`set_thread_plan`]'s, else `HOOP_FAULTS`'s.
fn current_plan() -> Option<Plan> {
    if !cfg!(feature = "fault-injection") {
        return None;
    }
    THREAD_PLAN.with(Cell::get).or_else(env_plan)
}

/// For a driver its caller named (io_uring, not `Auto`): an opt-out of `setup` while it is
/// set up, unless `setup` is the plan's only kind (`kinds=setup`: a test of the setup errors
/// themselves). Under any broader plan (every kind, or every kind but those a test opted out
/// of, as its child processes get) a named driver would only fail its caller on an injected
/// setup failure; `Auto`'s fallback to epoll is where that kind is tested.
pub(crate) fn spare_named_setup() -> Option<OptOut> {
    match current_plan() {
        Some(plan) if plan.kinds != Kind::Setup.bit() => Some(opt_out_quietly(&["setup"])),
        _ => None,
    }
}

/// Whether faults are being injected: the `fault-injection` feature is compiled in and a plan
/// is set (`HOOP_FAULTS`, or [`set_thread_plan`] on this thread).
pub fn enabled() -> bool {
    current_plan().is_some()
}

/// The plan in force as `HOOP_FAULTS` would spell it (`seed=1,rate=0.01[,kinds=...]`).
pub fn describe() -> Option<String> {
    current_plan().map(|p| p.to_string())
}

/// Faults injected so far in this process, per kind (every kind, in [`KINDS`] order); empty
/// when injection is not [`enabled`].
pub fn counts() -> Vec<(&'static str, u64)> {
    if !enabled() && COUNTS.iter().all(|c| c.load(Ordering::Relaxed) == 0) {
        return Vec::new();
    }
    KINDS
        .iter()
        .zip(COUNTS.iter())
        .map(|(name, c)| (*name, c.load(Ordering::Relaxed)))
        .collect()
}

/// Opts the current thread out of some kinds until the guard drops, and says so on stderr
/// (uncaptured, so the opt-out shows in a test run's log). Names not in [`KINDS`] panic: an
/// opt-out that silently names nothing would hide a typo.
#[must_use = "the opt-out ends when the guard drops"]
pub fn opt_out(kinds: &[&str]) -> OptOut {
    opt_out_because(kinds, "")
}

/// [`opt_out`] with the reason, which the line on stderr gives:
/// `hoop faults: THREAD opts out of KINDS: REASON (HOOP_FAULTS=...)`. Under the test harness
/// the thread's name is the test's, so the opt-outs of a run are a list of tests by name.
#[must_use = "the opt-out ends when the guard drops"]
pub fn opt_out_because(kinds: &[&str], reason: &str) -> OptOut {
    let guard = opt_out_quietly(kinds);
    if let Some(plan) = current_plan() {
        use std::io::Write as _;
        let thread = std::thread::current();
        let because = if reason.is_empty() {
            String::new()
        } else {
            format!(": {reason}")
        };
        // One write: stderr is unbuffered, and a line written in pieces interleaves with the
        // harness's own lines (CI collects these lines from the log).
        let line = format!(
            "hoop faults: {} opts out of {}{because} (HOOP_FAULTS={plan})\n",
            thread.name().unwrap_or("?"),
            kinds.join(", ")
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
    guard
}

/// Whether faults of the kind called `name` are injected on this thread: a plan is in force,
/// it has the kind, and the thread has not opted out of it (what a test's client asks before it
/// treats an error of that kind as injected rather than real). Unknown names are never injected.
pub fn injects(name: &str) -> bool {
    let (Some(plan), Some(kind)) = (current_plan(), Kind::from_name(name)) else {
        return false;
    };
    plan.has(kind) && OPTED_OUT.with(Cell::get) & kind.bit() == 0
}

/// The plan in force on this thread without the kinds it opted out of, spelled as
/// `HOOP_FAULTS` takes it: what a child process this thread starts should get, so an
/// opt-out covers the programs a test runs. `None` when no plan is in force.
pub fn describe_for_child() -> Option<String> {
    let mut plan = current_plan()?;
    plan.kinds &= !OPTED_OUT.with(Cell::get);
    Some(plan.to_string())
}

/// The kinds this thread opted out of, to carry to a thread it starts ([`opt_out_inherited`]).
pub fn opted_out() -> OptedOut {
    OptedOut(OPTED_OUT.with(Cell::get))
}

/// Kinds a thread opted out of ([`opted_out`]).
#[derive(Debug, Clone, Copy)]
pub struct OptedOut(u32);

/// Opts the current thread out of the kinds another thread opted out of (quietly: that thread
/// said so), until the guard drops.
#[must_use = "the opt-out ends when the guard drops"]
pub fn opt_out_inherited(from: OptedOut) -> OptOut {
    let previous = OPTED_OUT.with(|o| {
        let previous = o.get();
        o.set(previous | from.0);
        previous
    });
    OptOut { previous }
}

/// [`opt_out`] without the line on stderr, for a harness that says it once for all its tests.
#[doc(hidden)]
#[must_use = "the opt-out ends when the guard drops"]
pub fn opt_out_quietly(kinds: &[&str]) -> OptOut {
    let mut bits = 0;
    for name in kinds {
        match Kind::from_name(name) {
            Some(k) => bits |= k.bit(),
            None => panic!(
                "hoop::fault::opt_out: unknown fault kind `{name}` (kinds: {})",
                KINDS.join(", ")
            ),
        }
    }
    let previous = OPTED_OUT.with(|o| {
        let previous = o.get();
        o.set(previous | bits);
        previous
    });
    OptOut { previous }
}

/// Ends an [`opt_out`] when dropped.
#[derive(Debug)]
pub struct OptOut {
    previous: u32,
}

impl Drop for OptOut {
    fn drop(&mut self) {
        OPTED_OUT.with(|o| o.set(self.previous));
    }
}

/// Sets a plan for drivers built on this thread from now on (over `HOOP_FAULTS`), until the
/// guard drops: how the fault tests of the ordinary suite run without the environment
/// variable. Without the `fault-injection` feature the plan is parsed and ignored.
pub fn set_thread_plan(spec: &str) -> Result<ThreadPlan, String> {
    let plan = Plan::parse(spec)?;
    let previous = THREAD_PLAN.with(|p| p.replace(Some(plan)));
    Ok(ThreadPlan { previous })
}

/// Ends a [`set_thread_plan`] when dropped.
#[derive(Debug)]
pub struct ThreadPlan {
    previous: Option<Plan>,
}

impl Drop for ThreadPlan {
    fn drop(&mut self) {
        THREAD_PLAN.with(|p| p.set(self.previous));
    }
}

/// One driver's injector: a seeded random stream and the plan's kinds. Without the feature it
/// holds nothing and never fires.
#[derive(Debug)]
pub(crate) struct Faults {
    #[cfg(feature = "fault-injection")]
    inner: Option<Injector>,
}

#[cfg(feature = "fault-injection")]
#[derive(Debug)]
struct Injector {
    state: u64,
    /// `rate` scaled to u64: an event fires when a draw is below it.
    threshold: u64,
    kinds: u32,
    /// Kinds still to be injected at their first event (`Plan::first`).
    first: u32,
}

impl Faults {
    /// An injector for a driver of engine `engine` (a bit: [`Faults::URING`], [`Faults::EPOLL`])
    /// built on the current thread (none when injection is off).
    pub(crate) fn new(engine: u32) -> Faults {
        #[cfg(feature = "fault-injection")]
        {
            let inner = current_plan().map(|plan| {
                let thread = std::thread::current();
                let name = thread.name().unwrap_or("");
                let built = BUILT.with(|b| {
                    let n = b.get();
                    b.set(n + 1);
                    n
                });
                // `first` kinds: on this thread's first driver of the engine, and not on a
                // rerun's thread (see `Plan::first`).
                let first_here = ENGINES_BUILT.with(|e| {
                    let seen = e.get();
                    e.set(seen | engine);
                    seen & engine == 0
                }) && !name.contains('#');
                // FNV-1a of the thread name, mixed with the seed and the driver's ordinal.
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for byte in name.bytes() {
                    h = (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
                }
                let threshold = if plan.rate >= 1.0 {
                    u64::MAX
                } else {
                    (plan.rate * u64::MAX as f64) as u64
                };
                Injector {
                    state: plan.seed ^ h ^ built.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    threshold,
                    kinds: plan.kinds,
                    first: if first_here { plan.first } else { 0 },
                }
            });
            Faults { inner }
        }
        #[cfg(not(feature = "fault-injection"))]
        {
            let _ = engine;
            Faults {}
        }
    }

    /// The io_uring engine, for [`Faults::new`].
    pub(crate) const URING: u32 = 1;
    /// The epoll engine, for [`Faults::new`].
    pub(crate) const EPOLL: u32 = 2;

    /// Whether this injector injects anything at all.
    #[inline(always)]
    pub(crate) fn active(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        {
            self.inner.is_some()
        }
        #[cfg(not(feature = "fault-injection"))]
        {
            false
        }
    }

    /// Draws for one event of `kind`: true (and counted) when the fault is to be injected.
    #[inline(always)]
    pub(crate) fn fire(&mut self, kind: Kind) -> bool {
        #[cfg(feature = "fault-injection")]
        {
            let Some(inj) = self.inner.as_mut() else {
                return false;
            };
            if inj.kinds & kind.bit() == 0 || OPTED_OUT.with(Cell::get) & kind.bit() != 0 {
                return false;
            }
            if inj.first & kind.bit() != 0 {
                inj.first &= !kind.bit();
            } else if inj.next() >= inj.threshold || inj.threshold == 0 {
                return false;
            }
            COUNTS[kind as usize].fetch_add(1, Ordering::Relaxed);
            true
        }
        #[cfg(not(feature = "fault-injection"))]
        {
            let _ = kind;
            false
        }
    }

    /// A uniform draw in `[0, n)` (0 when `n` is 0 or injection is off).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        #[cfg(feature = "fault-injection")]
        {
            match self.inner.as_mut() {
                Some(inj) if n > 0 => inj.next() % n,
                _ => 0,
            }
        }
        #[cfg(not(feature = "fault-injection"))]
        {
            let _ = n;
            0
        }
    }

    /// A shorter length for a read or write of `len` bytes, keeping the block alignment an
    /// `O_DIRECT` transfer needs (a multiple of 4096 or 512 stays one), or `None` when `len`
    /// cannot be shortened.
    pub(crate) fn shorten(&mut self, len: u32) -> Option<u32> {
        let unit = if len.is_multiple_of(4096) {
            4096
        } else if len.is_multiple_of(512) {
            512
        } else {
            1
        };
        let units = len / unit;
        if units < 2 {
            return None;
        }
        let keep = 1 + self.below(u64::from(units - 1)) as u32;
        Some(keep * unit)
    }
}

#[cfg(feature = "fault-injection")]
impl Injector {
    /// splitmix64.
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests;
