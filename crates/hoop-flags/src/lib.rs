//! The flags the `hoop` command's servers share, beyond what clap does for them:
//! [`config_file`] (`--config FILE`: any command's flags from a TOML file, merged under the
//! command line's own) and [`backlog`] (`--backlog N`, its check, the line that says when the
//! kernel gives less, and the listener bound with it).

pub mod backlog;
pub mod config_file;
