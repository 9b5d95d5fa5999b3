//! A packet's time as its record gives it, so that a copy of the record says what the file said.
//!
//! libpcap does not normalise times: a pcap record with 1 500 000 µs keeps them (`tcpdump -w`
//! copies the fields), and a pcapng time is split into seconds and a fraction by the interface's
//! resolution. A time folded into nanoseconds since the epoch loses both (a carry into the
//! seconds; a sum past 2^64), so records keep their fields here and are turned into a file's
//! fields the way libpcap does when it reads them at a given precision.

/// The time fields of one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordTime {
    /// Seconds: a pcap record's 32-bit field; pcapng: the stamp divided by the interface's
    /// resolution plus its if_tsoffset (wrapping, as libpcap computes it).
    pub sec: u64,
    /// The fraction of a second, in units of 1/`per_sec` (a damaged pcap record may hold more
    /// than a second).
    pub frac: u64,
    /// Units per second of `frac`: 10^n, or 2^n when `binary`.
    pub per_sec: u64,
    pub binary: bool,
    /// A pcap record's 32-bit fields, which libpcap reads as signed: a fraction of 2^31 or more
    /// is negative to its arithmetic (2.5e9 ns is -1 794 967 296, which / 1000 is -1 794 967).
    pub signed: bool,
}

/// Microsecond precision (what `tcpdump -w` writes).
pub const MICROS: u64 = 1_000_000;
/// Nanosecond precision.
pub const NANOS: u64 = 1_000_000_000;

impl RecordTime {
    /// A time from nanoseconds since the epoch (records ringcap makes itself).
    pub fn from_ns(ns: u64) -> RecordTime {
        RecordTime {
            sec: ns / NANOS,
            frac: ns % NANOS,
            per_sec: NANOS,
            binary: false,
            signed: false,
        }
    }

    /// Seconds and fraction at `precision` units per second (`MICROS` or `NANOS`), as libpcap
    /// gives them to a program that opened the file at that precision: the fraction scaled by
    /// its own rule (powers of ten by their quotient, powers of two by multiply-then-divide,
    /// wrapping as libpcap's 64-bit arithmetic does), nothing carried into the seconds.
    pub fn at(&self, precision: u64) -> (u64, u64) {
        if self.signed {
            // pcap: libpcap's `tv_usec` from a signed 32-bit field, scaled by a signed multiply or
            // divide (C's division truncates toward zero, as Rust's does).
            let frac = i64::from(self.frac as u32 as i32);
            let scaled = if self.per_sec == precision {
                frac
            } else if self.per_sec < precision {
                frac.wrapping_mul((precision / self.per_sec) as i64)
            } else {
                frac / (self.per_sec / precision) as i64
            };
            return (self.sec, scaled as u64);
        }
        let frac = if self.per_sec == precision {
            self.frac
        } else if self.binary {
            self.frac.wrapping_mul(precision) / self.per_sec
        } else if self.per_sec < precision {
            self.frac.wrapping_mul(precision / self.per_sec)
        } else {
            self.frac / (self.per_sec / precision)
        };
        (self.sec, frac)
    }

    /// Nanoseconds since the epoch, saturating: what time windows and the order of a merge use.
    pub fn ns(&self) -> u64 {
        let frac_ns = if self.binary {
            u64::try_from(u128::from(self.frac) * u128::from(NANOS) / u128::from(self.per_sec))
                .unwrap_or(u64::MAX)
        } else if self.per_sec <= NANOS {
            self.frac.saturating_mul(NANOS / self.per_sec)
        } else {
            self.frac / (self.per_sec / NANOS)
        };
        self.sec.saturating_mul(NANOS).saturating_add(frac_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pcap_fraction_over_a_second_is_kept_not_carried() {
        let t = RecordTime {
            sec: 100,
            frac: 1_500_000,
            per_sec: MICROS,
            binary: false,
            signed: true,
        };
        assert_eq!(t.at(MICROS), (100, 1_500_000));
        assert_eq!(t.at(NANOS), (100, 1_500_000_000));
        assert_eq!(t.ns(), 101_500_000_000);
    }

    #[test]
    fn a_pcap_fraction_past_2_31_is_negative_to_libpcap() {
        // What tcpdump -r writes at µs for a ns record of 2.5e9 ns, and at ns for 0xFFFFFFFF µs.
        let ns = RecordTime {
            sec: 9,
            frac: 2_500_000_000,
            per_sec: NANOS,
            binary: false,
            signed: true,
        };
        assert_eq!(ns.at(MICROS).1 as u32, 4_293_172_329);
        let us = RecordTime {
            sec: 9,
            frac: 0xFFFF_FFFF,
            per_sec: MICROS,
            binary: false,
            signed: true,
        };
        assert_eq!(us.at(NANOS).1 as u32, 0xFFFF_FC18);
        assert_eq!(us.at(MICROS).1 as u32, 0xFFFF_FFFF);
    }

    #[test]
    fn finer_and_binary_resolutions_scale_as_libpcap_does() {
        // 10^-12 s units down to µs: divided by 10^6.
        let pico = RecordTime {
            sec: 1,
            frac: 123_456_789_012,
            per_sec: 1_000_000_000_000,
            binary: false,
            signed: false,
        };
        assert_eq!(pico.at(MICROS), (1, 123_456));
        assert_eq!(pico.at(NANOS), (1, 123_456_789));
        // 2^-20 s units: multiplied by the precision, then divided by 2^20.
        let bin = RecordTime {
            sec: 7,
            frac: 1 << 19,
            per_sec: 1 << 20,
            binary: true,
            signed: false,
        };
        assert_eq!(bin.at(MICROS), (7, 500_000));
        assert_eq!(bin.ns(), 7_500_000_000);
    }

    #[test]
    fn nanoseconds_saturate_instead_of_wrapping() {
        let far = RecordTime {
            sec: u64::MAX / 10,
            frac: 0,
            per_sec: NANOS,
            binary: false,
            signed: false,
        };
        assert_eq!(far.ns(), u64::MAX);
        assert_eq!(
            RecordTime::from_ns(1_700_000_000_123_456_789).ns(),
            1_700_000_000_123_456_789
        );
    }
}
