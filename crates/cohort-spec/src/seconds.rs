//! [`Seconds`]: a length of time a user typed, checked once where it is parsed and a valid
//! [`Duration`] from then on.
//!
//! `Duration::from_secs_f64` panics on a negative, non-finite or huge value, and an `f64` of
//! seconds carried around and converted in several places is one unchecked conversion away from
//! that panic (`bench-cohort study quick --time-budget-s=-1` once ended with exit 101). Every
//! seconds flag of every door is a `Seconds` instead: a positive, finite number no larger than
//! [`Seconds::MAX`], which therefore always converts.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A positive, finite number of seconds, at most [`Seconds::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Seconds(f64);

/// Why a number is not a [`Seconds`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SecondsError {
    /// Not a number at all.
    #[error("`{0}` is not a number of seconds")]
    NotANumber(String),
    /// Zero, negative, NaN or infinite.
    #[error("{0} is not a positive number of seconds")]
    NotPositive(f64),
    /// More than [`Seconds::MAX`].
    #[error("{0} seconds is more than the most coload takes ({max} s, about 31 years)", max = Seconds::MAX)]
    TooLong(f64),
}

impl Seconds {
    /// The longest time any flag takes (about 31 years): far beyond any window or budget, and
    /// far inside what a [`Duration`] holds.
    pub const MAX: f64 = 1e9;

    /// Checks `value`.
    pub fn new(value: f64) -> Result<Self, SecondsError> {
        if !(value.is_finite() && value > 0.0) {
            return Err(SecondsError::NotPositive(value));
        }
        if value > Self::MAX {
            return Err(SecondsError::TooLong(value));
        }
        Ok(Seconds(value))
    }

    /// Whole seconds (for defaults); `0` gives the smallest valid value, one nanosecond.
    #[must_use]
    pub const fn whole(seconds: u32) -> Self {
        if seconds == 0 {
            Seconds(1e-9)
        } else {
            Seconds(seconds as f64)
        }
    }

    /// The number.
    #[must_use]
    pub const fn get(self) -> f64 {
        self.0
    }

    /// As a [`Duration`] (always representable: the value was checked).
    #[must_use]
    pub fn duration(self) -> Duration {
        Duration::try_from_secs_f64(self.0).unwrap_or(Duration::MAX)
    }

    /// As whole nanoseconds, rounded.
    #[must_use]
    pub fn as_nanos(self) -> u64 {
        (self.0 * 1e9).round() as u64
    }
}

impl FromStr for Seconds {
    type Err = SecondsError;

    fn from_str(s: &str) -> Result<Self, SecondsError> {
        let value: f64 = s
            .trim()
            .parse()
            .map_err(|_| SecondsError::NotANumber(s.to_owned()))?;
        Seconds::new(value)
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.fract() == 0.0 {
            write!(f, "{:.0}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl Serialize for Seconds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = f64::deserialize(d)?;
        Seconds::new(value).map_err(serde::de::Error::custom)
    }
}

impl From<Seconds> for Duration {
    fn from(s: Seconds) -> Duration {
        s.duration()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_duration_would_panic_on() {
        for bad in ["-1", "0", "nan", "inf", "-inf", "1e300", "x", ""] {
            assert!(bad.parse::<Seconds>().is_err(), "{bad} was accepted");
        }
        assert_eq!(
            "-1".parse::<Seconds>().unwrap_err().to_string(),
            "-1 is not a positive number of seconds"
        );
        assert!(
            "1e300"
                .parse::<Seconds>()
                .unwrap_err()
                .to_string()
                .contains("more than the most")
        );
    }

    #[test]
    fn converts_and_prints() {
        let s: Seconds = "2.5".parse().unwrap();
        assert_eq!(s.duration(), Duration::from_millis(2500));
        assert_eq!(s.as_nanos(), 2_500_000_000);
        assert_eq!(s.to_string(), "2.5");
        assert_eq!(Seconds::whole(45).to_string(), "45");
        let max = Seconds::new(Seconds::MAX).unwrap();
        assert!(max.duration() > Duration::from_secs(999_999_999));
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, "2.5");
        assert_eq!(serde_json::from_str::<Seconds>(&json).unwrap(), s);
        assert!(serde_json::from_str::<Seconds>("-3").is_err());
    }
}
