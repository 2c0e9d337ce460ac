//! `hoop-peer-glommio`: `hoop-peer` with glommio (feature `glommio`); see `src/lib.rs`.

fn main() {
    hoop_peers::main();
}
