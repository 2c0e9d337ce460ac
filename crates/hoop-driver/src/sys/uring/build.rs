//! Ring setup: the flags hoop asks for, retried with fewer on `EINVAL`.

use std::io;

use io_uring::IoUring;

use super::probe::intern;
use super::regwait::{self, WaitRegion};
use crate::config::Config;
use crate::setup::SetupError;

/// One setup attempt: the flags, by kernel name, that `build_ring` asks for.
#[derive(Debug, Clone, Copy, Default)]
struct Attempt {
    sqpoll: bool,
    sq_aff: bool,
    iopoll: bool,
    single_issuer_defer: bool,
    no_sqarray: bool,
    coop_taskrun: bool,
    submit_all: bool,
}

impl Attempt {
    /// The accepted flags as `Driver::setup_flags` names them, e.g. `"SQPOLL|SUBMIT_ALL|CQSIZE"`.
    fn name(&self) -> &'static str {
        let mut names = Vec::new();
        let flags = [
            (self.sqpoll, "SQPOLL"),
            (self.sq_aff, "SQ_AFF"),
            (self.iopoll, "IOPOLL"),
            (self.single_issuer_defer, "SINGLE_ISSUER|DEFER_TASKRUN"),
            (self.no_sqarray, "NO_SQARRAY"),
            (self.coop_taskrun, "COOP_TASKRUN|TASKRUN_FLAG"),
            (self.submit_all, "SUBMIT_ALL"),
            (true, "CQSIZE"),
        ];
        for (on, name) in flags {
            if on {
                names.push(name);
            }
        }
        intern(names.join("|"))
    }

    /// The `IORING_SETUP_*` bits this attempt asks for (`CQSIZE | CLAMP` in every one).
    fn setup_bits(&self) -> u32 {
        let bit = crate::level::setup_bit;
        let flags = [
            (self.sqpoll, bit("SQPOLL")),
            (self.sq_aff, bit("SQ_AFF")),
            (self.iopoll, bit("IOPOLL")),
            (
                self.single_issuer_defer,
                bit("SINGLE_ISSUER") | bit("DEFER_TASKRUN"),
            ),
            (self.no_sqarray, bit("NO_SQARRAY")),
            (self.coop_taskrun, bit("COOP_TASKRUN") | bit("TASKRUN_FLAG")),
            (self.submit_all, bit("SUBMIT_ALL")),
            (true, bit("CQSIZE") | bit("CLAMP")),
        ];
        flags
            .iter()
            .filter(|(on, _)| *on)
            .fold(0, |bits, (_, b)| bits | b)
    }
}

/// Sets up a ring, retrying with fewer flags on EINVAL.
///
/// Without SQPOLL: `SINGLE_ISSUER | DEFER_TASKRUN` (not with IOPOLL), then `COOP_TASKRUN |
/// TASKRUN_FLAG`, then plain (the taskrun flags only if `cfg.taskrun_flags`). With SQPOLL
/// (`cfg.sqpoll_idle`): `SQPOLL [| SQ_AFF]` first, without the taskrun flags (the kernel refuses
/// DEFER_TASKRUN, COOP_TASKRUN and TASKRUN_FLAG with SQPOLL), then without `SQ_AFF` (a CPU it
/// refuses), then without SQPOLL, also when SQPOLL is refused with EPERM (kernels before 5.13
/// reserve it to privileged users). Always `SUBMIT_ALL` where the kernel takes it, a CQ of `cq`
/// entries, and `IOPOLL` in every attempt if `cfg.iopoll`. A ring that will `grow` asks for
/// `NO_SQARRAY` with `DEFER_TASKRUN` first: a resize (6.13 to at least 6.18) hands back no
/// offset for the new SQ index array, so only a ring without one can be mapped again. With
/// `Config::reg_wait` (6.13) every attempt is set up disabled, a wait region is registered
/// (`regwait`), and the ring enabled.
pub(super) fn build_ring(
    entries: u32,
    cq: u32,
    cfg: &Config,
    grow: bool,
) -> Result<(IoUring, &'static str, Option<WaitRegion>), SetupError> {
    let reg_wait = regwait::wanted(cfg);
    let base = Attempt {
        iopoll: cfg.iopoll,
        ..Attempt::default()
    };
    let mut attempts = Vec::new();
    if cfg.sqpoll_idle.is_some() {
        let sqpoll = Attempt {
            sqpoll: true,
            ..base
        };
        let mut with = vec![sqpoll];
        if cfg.sqpoll_cpu.is_some() {
            with.insert(
                0,
                Attempt {
                    sq_aff: true,
                    ..sqpoll
                },
            );
        }
        for a in with {
            attempts.push(Attempt {
                submit_all: true,
                ..a
            });
            attempts.push(a);
        }
    }
    if cfg.taskrun_flags {
        // Not with IOPOLL: on Linux 6.18 an IOPOLL ring with DEFER_TASKRUN never completed a
        // polled O_DIRECT read while another request failed on every enter (the runtime's
        // wake-up poll, which IOPOLL rings refuse with EINVAL); with COOP_TASKRUN it does.
        if !cfg.iopoll {
            let defer = Attempt {
                single_issuer_defer: true,
                submit_all: true,
                ..base
            };
            if grow {
                attempts.push(Attempt {
                    no_sqarray: true,
                    ..defer
                });
            }
            attempts.push(defer);
        }
        attempts.push(Attempt {
            coop_taskrun: true,
            submit_all: true,
            ..base
        });
    }
    if cfg.coop_taskrun && !cfg.taskrun_flags && cfg.sqpoll_idle.is_none() {
        attempts.push(Attempt {
            coop_taskrun: true,
            submit_all: true,
            ..base
        });
    }
    attempts.push(Attempt {
        submit_all: true,
        ..base
    });
    attempts.push(base);
    // The kernel level (`HOOP_KERNEL_LEVEL`): a flag its kernel lacks is not asked for, as
    // that kernel would refuse it with EINVAL and the next attempt would follow.
    let level = crate::level::current();
    attempts.retain(|a| level.has_setup_flags(a.setup_bits()));

    let idle_ms = cfg.sqpoll_idle.map_or(0, |d| {
        u32::try_from(d.as_millis()).unwrap_or(u32::MAX).max(1)
    });
    let mut last = None;
    for a in attempts {
        let mut b = IoUring::builder();
        b.setup_cqsize(cq).setup_clamp();
        if a.sqpoll {
            b.setup_sqpoll(idle_ms);
        }
        if let (true, Some(cpu)) = (a.sq_aff, cfg.sqpoll_cpu) {
            b.setup_sqpoll_cpu(cpu);
        }
        if a.iopoll {
            b.setup_iopoll();
        }
        if a.single_issuer_defer {
            b.setup_single_issuer().setup_defer_taskrun();
        }
        if a.no_sqarray {
            b.setup_no_sqarray();
        }
        if a.coop_taskrun {
            b.setup_coop_taskrun().setup_taskrun_flag();
        }
        if a.submit_all {
            b.setup_submit_all();
        }
        if reg_wait {
            b.setup_r_disabled();
        }
        match b.build(entries) {
            Ok(ring) if reg_wait => {
                let region = WaitRegion::register_and_enable(&ring)
                    .map_err(|e| SetupError::classify(e, entries))?;
                return Ok((ring, a.name(), region));
            }
            Ok(ring) => return Ok((ring, a.name(), None)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
            Err(e) if a.sqpoll && e.raw_os_error() == Some(libc::EPERM) => last = Some(e),
            Err(e) => return Err(SetupError::classify(e, entries)),
        }
    }
    let e = last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EINVAL));
    Err(SetupError::classify(e, entries))
}
