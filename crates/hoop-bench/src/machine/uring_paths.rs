//! The newest io_uring features (`hoop probe`'s `hoop_paths`): whether this kernel has each
//! (at hoop's kernel level: `HOOP_KERNEL_LEVEL` masks what a newer kernel brought) and whether
//! hoop uses it here, with the reason.

use hoop::driver::Driver;
use hoop::DriverKind;
use serde::ser::SerializeMap;
use serde::Serialize;

/// One feature's state.
#[derive(Debug, Clone, Serialize)]
pub struct PathState {
    /// The kernel (at hoop's kernel level) has it, on the io_uring driver.
    pub available: bool,
    /// hoop uses it here.
    pub used: bool,
    /// Why it is or is not used.
    pub reason: String,
}

/// The features by name, in print order (a JSON object).
#[derive(Debug, Clone)]
pub struct Paths(pub Vec<(&'static str, PathState)>);

impl Serialize for Paths {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, state) in &self.0 {
            map.serialize_entry(name, state)?;
        }
        map.end()
    }
}

impl Paths {
    /// One line: the used ones, then the available ones hoop leaves unused, then the rest.
    pub fn human(&self) -> String {
        let names = |f: &dyn Fn(&PathState) -> bool| {
            let v: Vec<&str> = self
                .0
                .iter()
                .filter(|(_, s)| f(s))
                .map(|(n, _)| *n)
                .collect();
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        format!(
            "used: {}; available, unused: {}; unavailable: {}",
            names(&|s| s.used),
            names(&|s| s.available && !s.used),
            names(&|s| !s.available)
        )
    }
}

// IORING_OP_* numbers (linux/io_uring.h).
const SEND_ZC: u8 = 47;
const RECV_ZC: u8 = 58;
const EPOLL_WAIT: u8 = 59;
const READV_FIXED: u8 = 60;
const WRITEV_FIXED: u8 = 61;

/// The newest features' states, from a default io_uring ring (`None`: no ring, epoll only).
pub fn collect(driver: Option<&Driver>) -> Paths {
    let uring = driver.filter(|d| d.kind() == DriverKind::Uring);
    let op = |code: u8| uring.is_some_and(|d| d.supports_opcode(code));
    let since = |major, minor| uring.is_some() && hoop::setup::kernel_at_least(major, minor);
    let lacking = |kernel: &str| {
        if uring.is_none() {
            "io_uring is not available here (epoll driver)".to_string()
        } else {
            format!("needs Linux {kernel}: this kernel, or the kernel level, is older")
        }
    };
    // `uses`: hoop uses it wherever it is available; `why`: the reason when available.
    let state = |available: bool, uses: bool, kernel: &str, why: &str| PathState {
        available,
        used: available && uses,
        reason: if available {
            why.to_string()
        } else {
            lacking(kernel)
        },
    };
    let path = |available, kernel, unused| state(available, false, kernel, unused);
    let used_when = |available, kernel, used| state(available, true, kernel, used);
    Paths(vec![
        (
            "min_wait",
            state(
                since(6, 12),
                uring.is_some_and(|d| d.min_wait().is_some()),
                "6.12",
                &match uring.and_then(|d| d.min_wait()) {
                    Some(w) => format!(
                        "used: a blocking wait asks for up to 32 completions and returns {} us \
                         after it began once one has come (HOOP_MIN_WAIT_US or \
                         Builder::min_wait)",
                        w.as_micros()
                    ),
                    None => "not used by default: no gain measured on echo or fan-out at 500 \
                             connections (DESIGN.md); HOOP_MIN_WAIT_US=N or \
                             Builder::min_wait turns it on"
                        .to_string(),
                },
            ),
        ),
        (
            "no_iowait",
            used_when(
                since(6, 15),
                "6.15",
                "used: a runtime's blocking wait in io_uring_enter is not counted as iowait",
            ),
        ),
        (
            "resize_rings",
            state(
                since(6, 13),
                uring.is_some_and(|d| d.resizes_rings()),
                "6.13",
                &match uring.filter(|d| d.resizes_rings()) {
                    Some(d) => format!(
                        "used: a thread's CQ starts at {} entries ({} KiB of rings) and grows \
                         fourfold under load to {} (IORING_REGISTER_RESIZE_RINGS)",
                        d.ring_sizes().1,
                        d.ring_bytes() / 1024,
                        hoop::driver::default_cq_entries(d.ring_sizes().0),
                    ),
                    None => "not used: this ring cannot be resized (no DEFER_TASKRUN, or the \
                             kernel refused a resize at setup)"
                        .to_string(),
                },
            ),
        ),
        (
            "mem_region",
            state(
                since(6, 13),
                uring.is_some_and(|d| d.waits_registered()),
                "6.13",
                if uring.is_some_and(|d| d.waits_registered()) {
                    "used: a bounded wait's arguments (deadline, min-wait) are read from a page \
                     registered with the ring, not copied in per io_uring_enter \
                     (HOOP_REG_WAIT=0 turns it off)"
                } else {
                    "not used: turned off (HOOP_REG_WAIT=0, Builder::reg_wait), or the kernel \
                     refused the region"
                },
            ),
        ),
        (
            "epoll_wait",
            used_when(
                op(EPOLL_WAIT),
                "6.15",
                "used by hoop::epoll::Epoll::wait (a program's own epoll set waited on as one \
                 operation; before 6.15, a poll of the set's fd and a non-blocking epoll_wait)",
            ),
        ),
        (
            "zcrx",
            path(
                op(RECV_ZC),
                "6.15",
                "not used: needs a NIC queue with header split and flow steering (loopback has none)",
            ),
        ),
        (
            "fixed_vec",
            path(
                op(READV_FIXED) && op(WRITEV_FIXED),
                "6.15",
                "not used: registered buffers are read and written one at a time",
            ),
        ),
        (
            "send_zc",
            used_when(
                op(SEND_ZC),
                "6.0",
                "used by TcpStream::send_zc and send_zc_all; ordinary writes do not switch to \
                 it by size",
            ),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_ring_nothing_is_available_and_each_says_why() {
        let p = collect(None);
        let names: Vec<&str> = p.0.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "min_wait",
                "no_iowait",
                "resize_rings",
                "mem_region",
                "epoll_wait",
                "zcrx",
                "fixed_vec",
                "send_zc"
            ]
        );
        for (name, s) in &p.0 {
            assert!(!s.available && !s.used, "{name}");
            assert!(s.reason.contains("epoll driver"), "{name}: {}", s.reason);
        }
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["zcrx"]["available"], false);
        assert!(v["send_zc"]["reason"].is_string());
        assert_eq!(
            p.human(),
            "used: none; available, unused: none; unavailable: min_wait, no_iowait, \
             resize_rings, mem_region, epoll_wait, zcrx, fixed_vec, send_zc"
        );
    }
}
