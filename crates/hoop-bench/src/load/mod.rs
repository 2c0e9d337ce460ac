//! The load generators: what sends the requests and checks every answer.

pub mod http;
