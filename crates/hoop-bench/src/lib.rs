//! hoop's benchmarks as a library, by layer: a [`plan`] (checked limits) runs on a [`machine`]
//! against [`target`]s (child servers, peers, nginx, fio) with a [`load`] (the load generators and
//! file engines, every answer verified), [`measure`]s latency and cost, keeps one [`record`] per
//! run, [`compare`]s targets cell by cell over rounds, and [`report`]s tables, charts and the
//! suite. The `hoop bench` command turns its flags into plans; `--help` says how to use it.

pub mod compare;
pub mod load;
pub mod machine;
pub mod measure;
pub mod output;
pub mod plan;
pub mod record;
pub mod report;
pub mod target;
