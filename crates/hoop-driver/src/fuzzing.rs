//! Entry points for the cargo-fuzz targets in `fuzz/` (feature `fuzzing`): the same model
//! checks the proptests of the ordinary suite run, fed from fuzzer bytes. Each panics with the
//! model's message on a violation. Not an API.

/// The op table and lifecycle state machine against its model (`table_model.rs`): every slot
/// freed exactly once, after its final CQE; every orphan finished once with its CQE.
pub fn op_table(data: &[u8]) {
    if let Err(e) = crate::table_model::run(crate::table_model::decode(data)) {
        panic!("op table model violated: {e}");
    }
}

/// The buffer-ring id bookkeeping against its model (`bufring.rs`): each id handed out once
/// while out and returned exactly once.
pub fn bufring_ids(data: &[u8]) {
    let (entries, actions) = crate::bufring::model::decode(data);
    if let Err(e) = crate::bufring::model::run(entries, actions) {
        panic!("buffer-ring model violated: {e}");
    }
}
