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
            path(
                since(6, 12),
                "6.12",
                "not used: the loop's wait returns at the first completion",
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
            path(
                since(6, 13),
                "6.13",
                "not used: rings are sized at setup for the descriptor limit",
            ),
        ),
        (
            "mem_region",
            path(
                since(6, 13),
                "6.13",
                "not used: the wait arguments are passed with each io_uring_enter",
            ),
        ),
        (
            "epoll_wait",
            path(
                op(EPOLL_WAIT),
                "6.15",
                "not used: hoop has no descriptor that only epoll can watch",
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
