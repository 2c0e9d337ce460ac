//! `IORING_OP_NOP`.

use std::io;

use crate::error::cvt;
use crate::lifecycle::Completion;
use crate::op::OpCode;

/// Does nothing, through the whole submission and completion path.
#[derive(Debug, Default)]
pub struct Nop;

impl OpCode for Nop {
    type Output = io::Result<()>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(drop)
    }
}
