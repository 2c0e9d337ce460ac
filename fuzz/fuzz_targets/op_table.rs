//! The op table and lifecycle state machine against its model: random submit / CQE /
//! more-flag CQE / poll / drop sequences; every slot freed exactly once, after its final CQE.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hoop_driver::fuzzing::op_table(data);
});
