//! The assertions of the model checks (`table_model`, `bufring::model`), shared by their
//! proptests and the fuzz targets: they return `Err(message)` rather than panic.

/// Fails the model check with a message (the proptest and the fuzz target report it).
macro_rules! check {
    ($cond:expr) => { check!($cond, "{}", stringify!($cond)) };
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// `check!` of an equality, with both sides in the message.
macro_rules! check_eq {
    ($a:expr, $b:expr) => { check_eq!($a, $b, "{}", stringify!($a == $b)) };
    ($a:expr, $b:expr, $($fmt:tt)+) => {{
        let (a, b) = (&$a, &$b);
        if a != b {
            return Err(format!("{}: {:?} != {:?}", format!($($fmt)+), a, b));
        }
    }};
}
