//! `#[hoop::test]` and `#[hoop::main]` expand to a runtime running the body.

#[hoop::test]
async fn test_macro_runs_the_body_on_a_runtime() {
    let h = hoop::spawn(async { 21 * 2 });
    assert_eq!(h.await.unwrap(), 42);
    assert!(hoop::runtime::current_counters().is_some());
}

#[hoop::test(entries = 8)]
async fn test_macro_takes_entries() -> std::io::Result<()> {
    hoop::time::sleep(std::time::Duration::from_millis(1)).await;
    Ok(())
}

#[hoop::main]
async fn not_the_real_main() -> u32 {
    hoop::yield_now().await;
    7
}

#[test]
fn main_macro_builds_a_sync_fn() {
    assert_eq!(not_the_real_main(), 7);
}
