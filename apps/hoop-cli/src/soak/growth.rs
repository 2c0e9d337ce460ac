//! The RSS rule: memory that keeps growing after warm-up fails the soak.
//!
//! Warm-up is the first quarter of the run (allocator arenas, caches and socket buffers settle
//! there). Over the samples after it, RSS "keeps growing" when both hold: it ended more than
//! max(16 MiB, 20%) above its lowest post-warm-up value, and the least-squares slope over those
//! samples is above 64 KiB/s. The first alone trips on one late allocation burst; the second
//! alone on allocator noise around a flat line; a leak trips both.

/// Growth above the post-warm-up minimum that may be noise.
const SLACK_KIB: f64 = 16.0 * 1024.0;
const SLACK_FRACTION: f64 = 0.20;
/// A slope below this is not a leak worth the name on a 30-60 s run.
const SLOPE_KIB_PER_SEC: f64 = 64.0;

/// `None` when RSS settled; `Some(why)` when it keeps growing. `samples` are (seconds since
/// start, RSS in KiB); `warmup_secs` is where warm-up ends.
pub(crate) fn keeps_growing(samples: &[(f64, u64)], warmup_secs: f64) -> Option<String> {
    let post: Vec<(f64, f64)> = samples
        .iter()
        .filter(|(t, _)| *t >= warmup_secs)
        .map(|(t, r)| (*t, *r as f64))
        .collect();
    if post.len() < 3 {
        return None;
    }
    let min = post.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let last = post[post.len() - 1].1;
    let grew = last - min;
    let slope = slope(&post);
    if grew > SLACK_KIB.max(SLACK_FRACTION * min) && slope > SLOPE_KIB_PER_SEC {
        return Some(format!(
            "RSS kept growing after warm-up: {:.1} MiB above its post-warm-up low of {:.1} MiB, \
             {:.0} KiB/s least-squares slope (rule: more than max(16 MiB, 20%) and more than \
             64 KiB/s)",
            grew / 1024.0,
            min / 1024.0,
            slope
        ));
    }
    None
}

/// Least-squares slope of y over x.
fn slope(p: &[(f64, f64)]) -> f64 {
    let n = p.len() as f64;
    let mx = p.iter().map(|q| q.0).sum::<f64>() / n;
    let my = p.iter().map(|q| q.1).sum::<f64>() / n;
    let sxx: f64 = p.iter().map(|q| (q.0 - mx).powi(2)).sum();
    let sxy: f64 = p.iter().map(|q| (q.0 - mx) * (q.1 - my)).sum();
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_leak_fails_and_noise_passes() {
        // 1 MiB/s for 60 s from 50 MiB.
        let leak: Vec<(f64, u64)> = (0..30)
            .map(|i| (i as f64 * 2.0, 50 * 1024 + i * 2048))
            .collect();
        assert!(keeps_growing(&leak, 15.0).is_some());
        // Flat at 50 MiB with +-4 MiB of noise.
        let noisy: Vec<(f64, u64)> = (0..30)
            .map(|i| {
                let wobble = [0i64, 4096, -4096, 2048, -2048][i % 5];
                (i as f64 * 2.0, (50 * 1024 + wobble) as u64)
            })
            .collect();
        assert!(keeps_growing(&noisy, 15.0).is_none());
        // Growth during warm-up only, flat after: passes.
        let warm: Vec<(f64, u64)> = (0..30)
            .map(|i| {
                (
                    i as f64 * 2.0,
                    if i < 7 {
                        10 * 1024 * (i as u64 + 1)
                    } else {
                        80 * 1024
                    },
                )
            })
            .collect();
        assert!(keeps_growing(&warm, 15.0).is_none());
        // Too few samples to judge.
        assert!(keeps_growing(&leak[..4], 15.0).is_none());
    }
}
