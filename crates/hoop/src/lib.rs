//! hoop
