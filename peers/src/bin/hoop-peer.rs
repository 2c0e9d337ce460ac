//! `hoop-peer`: see the library (`src/lib.rs`).

fn main() {
    hoop_peers::main();
}
