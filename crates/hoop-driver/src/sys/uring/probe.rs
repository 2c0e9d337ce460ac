//! The opcode probe and the feature tables: which `IORING_OP_*` and `IORING_FEAT_*` this kernel
//! has, by kernel name.

use io_uring::{opcode, IoUring};

use crate::level::{Level, FEATURES, OPCODES};
use crate::setup::SetupError;

/// The opcodes every hoop operation needs, by name. Not `SOCKET` (5.19): without it a socket
/// is made with `socket(2)`, which never blocks (`UringOp::without_sqe`), so the driver runs
/// from 5.15 (`MKDIRAT`).
const NEEDED: &[(u8, &str)] = &[
    (opcode::Nop::CODE, "NOP"),
    (opcode::Read::CODE, "READ"),
    (opcode::Write::CODE, "WRITE"),
    (opcode::Readv::CODE, "READV"),
    (opcode::Writev::CODE, "WRITEV"),
    (opcode::OpenAt::CODE, "OPENAT"),
    (opcode::Close::CODE, "CLOSE"),
    (opcode::Fsync::CODE, "FSYNC"),
    (opcode::Statx::CODE, "STATX"),
    (opcode::Fallocate::CODE, "FALLOCATE"),
    (opcode::UnlinkAt::CODE, "UNLINKAT"),
    (opcode::RenameAt::CODE, "RENAMEAT"),
    (opcode::MkDirAt::CODE, "MKDIRAT"),
    (opcode::Connect::CODE, "CONNECT"),
    (opcode::Accept::CODE, "ACCEPT"),
    (opcode::Recv::CODE, "RECV"),
    (opcode::Send::CODE, "SEND"),
    (opcode::SendMsg::CODE, "SENDMSG"),
    (opcode::RecvMsg::CODE, "RECVMSG"),
    (opcode::Shutdown::CODE, "SHUTDOWN"),
    (opcode::Timeout::CODE, "TIMEOUT"),
    (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
    (opcode::PollAdd::CODE, "POLL_ADD"),
    (opcode::PollRemove::CODE, "POLL_REMOVE"),
];

/// The kernel's opcodes (`IORING_REGISTER_PROBE`) as the kernel level (`HOOP_KERNEL_LEVEL`)
/// shows them: an opcode newer than the level is absent whatever the kernel says.
pub(super) struct Opcodes {
    probe: Box<io_uring::Probe>,
    level: Level,
}

impl Opcodes {
    /// Whether `opcode` is there (the kernel has it and the level does).
    pub(super) fn supports(&self, opcode: u8) -> bool {
        self.probe.is_supported(opcode) && self.level.has_opcode(opcode)
    }
}

/// Probes the kernel's opcodes; a ring that lacks one hoop needs (an old kernel, gVisor's
/// partial io_uring, a kernel level that lacks it) is refused with the missing names, so
/// `Auto` falls back to epoll.
pub(super) fn probe_opcodes(ring: &IoUring) -> Result<Opcodes, SetupError> {
    let mut probe = Box::new(io_uring::Probe::new());
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| SetupError::classify(e, 0))?;
    let level = crate::level::current();
    let missing: Vec<&str> = NEEDED
        .iter()
        .filter(|(code, _)| !probe.is_supported(*code))
        .map(|(_, name)| *name)
        .collect();
    if !missing.is_empty() {
        return Err(SetupError::missing_opcodes(&missing));
    }
    // The kernel has them all: the level may still lack some (the message names the kernel
    // that brought each).
    let masked: Vec<String> = NEEDED
        .iter()
        .filter(|(code, _)| !level.has_opcode(*code))
        .map(|&(code, name)| match OPCODES.get(usize::from(code)) {
            Some((_, (major, minor))) => format!("{name} {major}.{minor}"),
            None => name.to_owned(),
        })
        .collect();
    if !masked.is_empty() {
        return Err(SetupError::missing_opcodes_at_level(&masked, level));
    }
    Ok(Opcodes { probe, level })
}

/// Every `IORING_FEAT_*` bit hoop knows, by kernel name, and whether the kernel that set up a
/// ring with `params` set it (and the kernel level has it).
pub(super) fn feature_names(params: &io_uring::Parameters) -> Vec<(&'static str, bool)> {
    let bits = feature_bits(params);
    FEATURES
        .iter()
        .map(|&(bit, name, _)| (name, bits & bit != 0))
        .collect()
}

/// The names of the opcodes supported (see [`Opcodes::supports`]), in opcode order; opcodes
/// newer than hoop's table are named `OP_<number>`.
pub(super) fn opcode_names(ops: &Opcodes) -> Vec<&'static str> {
    (0..=u8::MAX)
        .filter(|&op| ops.supports(op))
        .map(|op| match OPCODES.get(usize::from(op)) {
            Some((name, _)) => *name,
            None => intern(format!("OP_{op}")),
        })
        .collect()
}

// `feature_bits` reads inside this size.
const _: () = assert!(std::mem::size_of::<io_uring::Parameters>() == 120);

/// The `features` word the kernel returned from `io_uring_setup`, without the bits the kernel
/// level lacks. (`Parameters` has a method per bit, but not a public one for every bit:
/// `REG_REG_RING` and `RW_ATTR` have none; and those methods do not know the level, so hoop
/// reads the bits only here.)
pub(super) fn feature_bits(params: &io_uring::Parameters) -> u32 {
    raw_feature_bits(params) & crate::level::current().feature_mask()
}

/// The `features` word as the kernel returned it.
fn raw_feature_bits(params: &io_uring::Parameters) -> u32 {
    // SAFETY: `Parameters` is `#[repr(transparent)]` over the kernel's `struct io_uring_params`
    // (documented as such by the io-uring crate; its size is checked above), whose uapi layout
    // starts with six u32s: sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle,
    // features. So `features` is the u32 at offset 20, aligned and initialized.
    unsafe {
        (params as *const io_uring::Parameters)
            .cast::<u32>()
            .add(5)
            .read()
    }
}

/// A `&'static str` equal to `s`, leaked once per distinct value (setup flag combinations and
/// opcode numbers: a few dozen at most).
pub(super) fn intern(s: String) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(name) = names.iter().find(|n| **n == s) {
        return name;
    }
    let name: &'static str = Box::leak(s.into_boxed_str());
    names.push(name);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The raw `features` word agrees with every public `Parameters::is_feature_*` method
    /// (which checks the layout `feature_bits` relies on).
    #[test]
    fn feature_bits_match_the_crate() {
        let Ok(ring) = IoUring::new(4) else {
            eprintln!("skip: no io_uring here");
            return;
        };
        let p = ring.params();
        let bits = raw_feature_bits(p);
        let has = |name: &str| {
            let bit = FEATURES.iter().find(|f| f.1 == name).map(|f| f.0).unwrap();
            bits & bit != 0
        };
        assert_eq!(has("SINGLE_MMAP"), p.is_feature_single_mmap());
        assert_eq!(has("NODROP"), p.is_feature_nodrop());
        assert_eq!(has("SUBMIT_STABLE"), p.is_feature_submit_stable());
        assert_eq!(has("RW_CUR_POS"), p.is_feature_rw_cur_pos());
        assert_eq!(has("CUR_PERSONALITY"), p.is_feature_cur_personality());
        assert_eq!(has("FAST_POLL"), p.is_feature_fast_poll());
        assert_eq!(has("POLL_32BITS"), p.is_feature_poll_32bits());
        assert_eq!(has("SQPOLL_NONFIXED"), p.is_feature_sqpoll_nonfixed());
        assert_eq!(has("EXT_ARG"), p.is_feature_ext_arg());
        assert_eq!(has("NATIVE_WORKERS"), p.is_feature_native_workers());
        assert_eq!(has("RSRC_TAGS"), p.is_feature_resource_tagging());
        assert_eq!(has("CQE_SKIP"), p.is_feature_skip_cqe_on_success());
        assert_eq!(has("LINKED_FILE"), p.is_feature_linked_file());
        assert_eq!(has("RECVSEND_BUNDLE"), p.is_feature_recvsend_bundle());
        assert_eq!(has("MIN_TIMEOUT"), p.is_feature_min_timeout());
        assert_eq!(has("NO_IOWAIT"), p.is_feature_no_iowait());
        // The other fields around it are where the layout says.
        // SAFETY: as in `feature_bits`: u32s 0 and 1 are sq_entries and cq_entries.
        let (sq, cqn) = unsafe {
            let base = (p as *const io_uring::Parameters).cast::<u32>();
            (base.read(), base.add(1).read())
        };
        assert_eq!((sq, cqn), (p.sq_entries(), p.cq_entries()));
        // Every kernel with io_uring sets SINGLE_MMAP since 5.4; the word is not all zero.
        assert_ne!(bits, 0);
    }

    #[test]
    fn opcode_names_match_the_crate() {
        let names: Vec<&str> = OPCODES.iter().map(|o| o.0).collect();
        assert_eq!(names.len(), 63);
        assert_eq!(names[usize::from(opcode::Nop::CODE)], "NOP");
        assert_eq!(names[usize::from(opcode::Read::CODE)], "READ");
        assert_eq!(
            names[usize::from(opcode::LinkTimeout::CODE)],
            "LINK_TIMEOUT"
        );
        assert_eq!(names[usize::from(opcode::SendZc::CODE)], "SEND_ZC");
        assert_eq!(names[usize::from(opcode::RecvMulti::CODE)], "RECV");
        assert_eq!(names[usize::from(opcode::Pipe::CODE)], "PIPE");
        assert_eq!(
            names[usize::from(opcode::ReadMulti::CODE)],
            "READ_MULTISHOT"
        );
        assert_eq!(
            names[usize::from(opcode::FixedFdInstall::CODE)],
            "FIXED_FD_INSTALL"
        );
        assert_eq!(names[usize::from(opcode::EpollWait::CODE)], "EPOLL_WAIT");
    }
}
