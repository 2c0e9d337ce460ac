//! Unix-domain sockets.
