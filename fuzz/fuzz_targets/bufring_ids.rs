//! Buffer-ring id bookkeeping against its model: random take / fill / give-back / drop
//! sequences; each id handed out once while out and returned exactly once.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hoop_driver::fuzzing::bufring_ids(data);
});
