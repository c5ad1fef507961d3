//! `--window START:END`: a time window relative to the trace's start, each end a number
//! with a unit (`s`, `ms`, `us` or `µs`, `ns`; seconds without one), either end optional.

/// A window in nanoseconds since the trace's start; no end: to the trace's end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: Option<u64>,
}

impl Window {
    pub fn parse(text: &str) -> Result<Window, String> {
        let (start, end) = text
            .split_once(':')
            .ok_or_else(|| format!("{text:?} is not START:END (e.g. 1.5s:2s, 200ms:, :900us)"))?;
        let start_ns = match start.trim() {
            "" => 0,
            start => nanoseconds(start)?,
        };
        let end_ns = match end.trim() {
            "" => None,
            end => Some(nanoseconds(end)?),
        };
        if let Some(end_ns) = end_ns {
            if end_ns < start_ns {
                return Err(format!("the window {text:?} ends before it starts"));
            }
        }
        Ok(Window { start_ns, end_ns })
    }
}

/// A time with its unit, in nanoseconds.
fn nanoseconds(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a time (a number and a unit: 1.5s, 200ms, 900us)"))?;
    let scale = match unit.trim() {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (s, ms, us or ns; seconds without one)"
            ))
        }
    };
    let ns = (value * scale).round();
    if !ns.is_finite() || ns >= u64::MAX as f64 {
        return Err(format!("{text:?} is too large"));
    }
    Ok(ns as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_take_units_and_open_ends() {
        let window = |text| Window::parse(text).unwrap();
        assert_eq!(
            window("1.5:2s"),
            Window {
                start_ns: 1_500_000_000,
                end_ns: Some(2_000_000_000)
            }
        );
        assert_eq!(
            window("200ms:"),
            Window {
                start_ns: 200_000_000,
                end_ns: None
            }
        );
        assert_eq!(
            window(":900us"),
            Window {
                start_ns: 0,
                end_ns: Some(900_000)
            }
        );
        assert_eq!(window("10µs:11000ns").end_ns, Some(11_000));
        assert_eq!(window("0.000000001:1ns").start_ns, 1);
    }

    #[test]
    fn bad_windows_say_what_is_wrong() {
        let error = |text| Window::parse(text).unwrap_err();
        assert!(error("2s").contains("START:END"));
        assert!(error("2s:1s").contains("ends before it starts"));
        assert!(error("1h:").contains("unknown unit"));
        assert!(error("-1s:").contains("not a time"));
        assert!(error("abc:").contains("not a time"));
    }
}
