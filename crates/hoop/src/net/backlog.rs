//! The listen backlog: how many connections the kernel completes and queues for a listener
//! before it is accepted. [`ListenOptions`] sets it at bind, `set_backlog` on a listener
//! later; [`DEFAULT_BACKLOG`] is what hoop asks by default and [`backlog_cap`] says when the
//! kernel's `net.core.somaxconn` gives less.

use std::io;
use std::net::ToSocketAddrs;

use super::TcpListener;

/// The listen backlog hoop asks for by default: 65535, so that a burst of thousands of
/// connects waits in the queue rather than being dropped (a dropped SYN costs its client a
/// 1 s retransmission). The kernel gives at most `net.core.somaxconn` (4096 by default since
/// Linux 5.4): see [`backlog_cap`]. A queued connection that nobody accepts costs the kernel
/// a socket, a few KiB, only while it waits.
pub const DEFAULT_BACKLOG: u32 = 65535;

/// The largest backlog a caller may ask for: `listen(2)` takes an `int`.
pub const MAX_BACKLOG: u32 = i32::MAX as u32;

/// `listen(2)`'s argument for `backlog`: at least 1, at most [`MAX_BACKLOG`].
pub(crate) fn listen_arg(backlog: u32) -> i32 {
    backlog.clamp(1, MAX_BACKLOG) as i32
}

/// The machine's `net.core.somaxconn` (of this network namespace), the largest backlog the
/// kernel gives a listener; `None` if `/proc/sys/net/core/somaxconn` cannot be read.
pub fn somaxconn() -> Option<u32> {
    read_sysctl("/proc/sys/net/core/somaxconn")
}

/// The backlog the kernel gives a listener that asks for `requested`, when `net.core.somaxconn`
/// caps it (`Some(somaxconn)`); `None` when the request stands or somaxconn cannot be read.
pub fn backlog_cap(requested: u32) -> Option<u32> {
    somaxconn().filter(|&max| max < listen_arg(requested) as u32)
}

/// A number in `/proc/sys` (a sysctl), if it can be read.
pub(crate) fn read_sysctl(path: &str) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// How a [`TcpListener`] is bound: its listen backlog and whether it shares its port
/// (`SO_REUSEPORT`). `SO_REUSEADDR` is always set.
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// let listener = hoop::net::ListenOptions::new()
///     .backlog(8192)
///     .bind("127.0.0.1:0")?;
/// # drop(listener);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenOptions {
    backlog: u32,
    reuse_port: bool,
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions::new()
    }
}

impl ListenOptions {
    /// [`DEFAULT_BACKLOG`], no `SO_REUSEPORT`.
    pub const fn new() -> ListenOptions {
        ListenOptions {
            backlog: DEFAULT_BACKLOG,
            reuse_port: false,
        }
    }

    /// The listen backlog asked of the kernel (0 counts as 1; the kernel caps it at
    /// `net.core.somaxconn`, see [`backlog_cap`]).
    pub const fn backlog(mut self, backlog: u32) -> ListenOptions {
        self.backlog = backlog;
        self
    }

    /// `SO_REUSEPORT`, for one listener per thread on one port.
    pub const fn reuse_port(mut self, on: bool) -> ListenOptions {
        self.reuse_port = on;
        self
    }

    /// The backlog these options ask for.
    pub const fn requested_backlog(&self) -> u32 {
        self.backlog
    }

    /// Whether these options set `SO_REUSEPORT`.
    pub const fn reuses_port(&self) -> bool {
        self.reuse_port
    }

    /// Binds a listener to `addr` (the first address it resolves to that binds) with these
    /// options. Synchronous: usable outside a runtime.
    pub fn bind(&self, addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        TcpListener::bind_options(addr, self)
    }
}

/// The kernel settings that bound a listener's queues, as read from `/proc/sys` (`None`:
/// unreadable): [`listen_limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenLimits {
    /// `net.core.somaxconn`: the largest accept queue (backlog) a listener gets.
    pub somaxconn: Option<u32>,
    /// `net.ipv4.tcp_max_syn_backlog`: half-open connections (SYN received, handshake not
    /// complete) kept per listener when SYN cookies are off.
    pub tcp_max_syn_backlog: Option<u32>,
    /// `net.ipv4.tcp_syncookies`: 0 off, 1 when the SYN queue overflows (the default), 2
    /// always. With cookies on, a full SYN queue answers with a cookie instead of dropping.
    pub tcp_syncookies: Option<u32>,
}

/// Reads [`ListenLimits`] now.
pub fn listen_limits() -> ListenLimits {
    ListenLimits {
        somaxconn: somaxconn(),
        tcp_max_syn_backlog: read_sysctl("/proc/sys/net/ipv4/tcp_max_syn_backlog"),
        tcp_syncookies: read_sysctl("/proc/sys/net/ipv4/tcp_syncookies"),
    }
}

impl ListenLimits {
    /// The backlog a listener asking for `requested` gets: `requested` (at least 1) capped
    /// at `somaxconn` when it is known.
    pub fn effective(&self, requested: u32) -> u32 {
        let asked = listen_arg(requested) as u32;
        self.somaxconn.map_or(asked, |m| asked.min(m))
    }

    /// What a server says at start about its backlog of `requested`, one line each (empty
    /// when nothing caps it): somaxconn capping it, and a SYN queue that drops SYNs (cookies
    /// off) before the accept queue is full.
    pub fn notes(&self, requested: u32) -> Vec<String> {
        let mut notes = Vec::new();
        let asked = listen_arg(requested) as u32;
        let effective = self.effective(requested);
        if effective < asked {
            notes.push(format!(
                "listen backlog {asked} capped to {effective} by net.core.somaxconn (raise it \
                 with `sysctl -w net.core.somaxconn={asked}`)"
            ));
        }
        if let (Some(0), Some(syn)) = (self.tcp_syncookies, self.tcp_max_syn_backlog) {
            // Without cookies the kernel drops SYNs once the SYN queue passes 3/4 of it.
            if syn / 4 * 3 < effective {
                notes.push(format!(
                    "net.ipv4.tcp_syncookies is 0: SYNs are dropped past {} half-open \
                     connections (3/4 of net.ipv4.tcp_max_syn_backlog {syn}), below the listen \
                     backlog {effective}",
                    syn / 4 * 3
                ));
            }
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The start-up lines: a cap by somaxconn, a SYN queue without cookies below the backlog,
    /// nothing when neither applies.
    #[test]
    fn notes_say_what_caps_the_backlog() {
        let l = ListenLimits {
            somaxconn: Some(4096),
            tcp_max_syn_backlog: Some(2048),
            tcp_syncookies: Some(1),
        };
        assert_eq!(l.effective(65535), 4096);
        assert_eq!(l.effective(0), 1);
        assert_eq!(
            l.notes(65535),
            vec![
                "listen backlog 65535 capped to 4096 by net.core.somaxconn (raise it with \
                 `sysctl -w net.core.somaxconn=65535`)"
                    .to_string()
            ]
        );
        assert!(l.notes(1000).is_empty());
        let no_cookies = ListenLimits {
            tcp_syncookies: Some(0),
            ..l
        };
        let notes = no_cookies.notes(4096);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("past 1536 half-open"), "{notes:?}");
        let unknown = ListenLimits {
            somaxconn: None,
            tcp_max_syn_backlog: None,
            tcp_syncookies: None,
        };
        assert_eq!(unknown.effective(65535), 65535);
        assert!(unknown.notes(65535).is_empty());
    }
}
