//! HTTP dates (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`): formatting for `Date` and
//! `Last-Modified`, parsing for `If-Modified-Since`.

use std::time::{SystemTime, UNIX_EPOCH};

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Seconds since the epoch as an IMF-fixdate (negative times clamp to the epoch).
pub fn format(secs: i64) -> String {
    let secs = secs.max(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Seconds since the epoch as RFC 3339 in UTC (`2026-11-27T00:00:00Z`; negative times clamp
/// to the epoch), for the JSON listing.
pub fn rfc3339(secs: i64) -> String {
    let secs = secs.max(0);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Seconds since the epoch as nginx's `$time_local` in UTC (`06/Dec/2026:12:00:00 +0000`),
/// for the `combined` access-log format.
pub fn common_log(secs: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = secs.max(0);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    format!(
        "{d:02}/{}/{y:04}:{:02}:{:02}:{:02} +0000",
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Parses an IMF-fixdate; `None` for anything else (the header is then ignored).
pub fn parse(s: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(s).ok()?;
    let mut it = s.split(' ');
    let (_dow, d, mon, y, hms, gmt) = (
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
    );
    if gmt != "GMT" || it.next().is_some() {
        return None;
    }
    let d: i64 = d.parse().ok()?;
    let m = MONTHS.iter().position(|&x| x == mon)? as i64 + 1;
    let y: i64 = y.parse().ok()?;
    let mut t = hms.split(':');
    let (h, mi, se): (i64, i64, i64) = (
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
    );
    if !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 || y < 1970 {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + h * 3600 + mi * 60 + se)
}

/// Now, in whole seconds since the epoch.
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The `Date` value, formatted again only when the second changes.
#[derive(Debug, Default)]
pub struct DateCache {
    secs: i64,
    text: String,
}

impl DateCache {
    /// The current date as an IMF-fixdate.
    pub fn now(&mut self) -> &str {
        let secs = now_secs();
        if secs != self.secs || self.text.is_empty() {
            self.secs = secs;
            self.text = format(secs);
        }
        &self.text
    }
}

// Howard Hinnant's civil calendar algorithms.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        assert_eq!(format(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(parse(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(format(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        for t in [0, 951_782_400, 1_700_000_000, 4_102_444_800] {
            assert_eq!(parse(format(t).as_bytes()), Some(t));
        }
        assert_eq!(parse(b"Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse(b"garbage"), None);
        assert_eq!(rfc3339(784_111_777), "1994-11-06T08:49:37Z");
        assert_eq!(rfc3339(-5), "1970-01-01T00:00:00Z");
    }
}
