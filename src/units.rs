//! Units for people: the only place where durations and sizes become text. A leaf: it imports
//! nothing of the crate, so reports, stats, calibrate and the app can all use it.
use std::time::Duration;

/// A duration with the unit that keeps 3-4 significant digits: `437.5 µs`, `12.34 ms`, `1.500 s`.
pub fn duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 1e6 {
        format!("{:.3} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{us:.1} µs")
    }
}

/// `duration`, but below 1 µs in whole nanoseconds (`23 ns`): for costs such as a clock read.
pub fn fine_duration(d: Duration) -> String {
    if d < Duration::from_micros(1) {
        format!("{} ns", d.as_nanos())
    } else {
        duration(d)
    }
}

/// `text` cut to its first `max` characters and what was left out (`abc… (+361234 chars)`),
/// so that a huge value (a check's expected body) keeps a report's line readable.
pub fn abridged(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(text),
        Some((end, _)) => format!("{}… (+{} chars)", &text[..end], text[end..].chars().count()).into(),
    }
}

/// Bytes in binary units, as the kernel counts memory: `15.2 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Microseconds as a JSON or CSV number: whole nanoseconds over 1000, so no float noise.
pub fn micros(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e3
}

/// Seconds as a JSON or CSV number, rounded to the microsecond.
pub fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e6
}

/// `d` to the nearest microsecond, the resolution `secs` writes: a rate over this window is
/// the rate a reader computes from the written seconds (`from_secs`), to the last bit.
pub fn whole_micros(d: Duration) -> Duration {
    Duration::from_micros(u64::try_from((d.as_nanos() + 500) / 1000).unwrap_or(u64::MAX))
}

/// Seconds as `secs` wrote them, back to the microsecond; None for a negative, endless or
/// not-a-number value, or one beyond u64 microseconds.
pub fn from_secs(s: f64) -> Option<Duration> {
    let us = (s * 1e6).round();
    (us >= 0.0 && us < u64::MAX as f64).then(|| Duration::from_micros(us as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abridged_text_keeps_its_first_characters_and_counts_the_rest() {
        assert_eq!(abridged("short", 5), "short");
        assert_eq!(abridged("µs µs µs", 4), "µs µ… (+4 chars)");
        assert_eq!(abridged(&"A".repeat(362_000), 3), "AAA… (+361997 chars)");
    }

    #[test]
    fn units_keep_three_to_four_digits() {
        assert_eq!(duration(Duration::from_nanos(437_500)), "437.5 µs");
        assert_eq!(duration(Duration::from_micros(12_345)), "12.35 ms");
        assert_eq!(duration(Duration::from_millis(1500)), "1.500 s");
        assert_eq!(fine_duration(Duration::from_nanos(23)), "23 ns");
        assert_eq!(fine_duration(Duration::from_nanos(1_500)), "1.5 µs");
        assert_eq!(bytes(15_938_355), "15.2 MiB");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(micros(Duration::from_nanos(1_348_985)), 1348.985);
        assert_eq!(secs(Duration::from_nanos(1_348_984_999)), 1.348985);
    }

    /// A window to the µs, written and read back, is the same window, short or long.
    #[test]
    fn seconds_written_read_back_to_the_microsecond() {
        for ns in [1_918_600, 1_348_984_999, 3_600_000_000_499, 7 * 86_400_000_000_123] {
            let window = whole_micros(Duration::from_nanos(ns));
            assert_eq!(window.subsec_nanos() % 1000, 0);
            assert_eq!(from_secs(secs(window)), Some(window), "{ns} ns");
        }
        assert_eq!(whole_micros(Duration::from_nanos(1_918_600)), Duration::from_micros(1919));
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e308] {
            assert_eq!(from_secs(bad), None, "{bad}");
        }
    }
}
