//! Files and directories, with every operation on the ring.
