//! The fd traits every net type implements over its `socket` field (`AsRawFd`, `AsFd`,
//! `IntoRawFd`, `FromRawFd`, `From<_> for OwnedFd`).

macro_rules! fd_traits {
    ($t:ident, stream) => {
        $crate::net::tcp::fd_traits!(@common $t);
        impl FromRawFd for $t {
            /// # Safety
            /// `fd` must be an open socket of the right kind that the caller owns.
            unsafe fn from_raw_fd(fd: RawFd) -> Self {
                // SAFETY: the caller gives up ownership of an open fd.
                Self::from_socket(Socket::from_fd(unsafe { OwnedFd::from_raw_fd(fd) }))
            }
        }
    };
    ($t:ident) => {
        $crate::net::tcp::fd_traits!(@common $t);
        impl FromRawFd for $t {
            /// # Safety
            /// `fd` must be an open socket of the right kind that the caller owns.
            unsafe fn from_raw_fd(fd: RawFd) -> Self {
                Self {
                    // SAFETY: the caller gives up ownership of an open fd.
                    socket: Socket::from_fd(unsafe { OwnedFd::from_raw_fd(fd) }),
                }
            }
        }
    };
    (@common $t:ident) => {
        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                self.socket.as_raw_fd()
            }
        }
        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.socket.as_fd()
            }
        }
        impl IntoRawFd for $t {
            fn into_raw_fd(mut self) -> RawFd {
                self.socket.take().into_raw_fd()
            }
        }
        impl From<$t> for OwnedFd {
            fn from(mut s: $t) -> OwnedFd {
                s.socket.take().into_owned()
            }
        }
    };
}
pub(crate) use fd_traits;

/// `into_std` (tokio's name and signature) for a net type whose standard library twin is
/// `$std`.
macro_rules! into_std {
    ($t:ident, $std:ty) => {
        impl $t {
            #[doc = concat!("Turns this into a [`", stringify!($std), "`], as tokio's `into_std`.")]
            ///
            /// Before the fd leaves, every receive a dropped call parked on it is ended (on
            /// io_uring with a synchronous cancel): none can take bytes or a connection its
            /// new owner expects; what such a receive had already brought is dropped with
            /// this value. The fd keeps its file status flags (nonblocking or not, as hoop's
            /// driver left it); set the mode the new owner needs. Called on another thread
            /// than the runtime that made it, the new owner gets a `dup` of the fd and the
            /// original is closed on its home runtime behind its queued operations.
            pub fn into_std(self) -> std::io::Result<$std> {
                Ok(<$std>::from(std::os::fd::OwnedFd::from(self)))
            }
        }
    };
}
pub(crate) use into_std;
