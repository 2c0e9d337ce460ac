//! The flags the `hoop` command's servers share, beyond what clap does for them:
//! [`config_file`] (`--config FILE`: any command's flags from a TOML file, merged under the
//! command line's own) and [`backlog`] (`--backlog N`, its check, the line that says when the
//! kernel gives less, and the listener bound with it), [`signal`] (SIGINT/SIGTERM and the stop
//! the servers' threads await) and [`values`] (the value parsers of flags several servers take).

pub mod backlog;
pub mod config_file;
pub mod signal;
pub mod tls;
pub mod values;
