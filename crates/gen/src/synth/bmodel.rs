//! Packet arrival times from the b-model (Wang, Ailamaki, Faloutsos, "Capturing the spatio-temporal
//! behavior of real traffic data", 2002): each period of `bin × 2^levels` gets the same number of packets;
//! every interval is split in two halves, one half (chosen by a fair coin) gets the share `b`, the other
//! `1 - b`, down to `levels` levels; the packets of a finest bin are spread evenly across it.
//!
//! At level k the packets of an interval are `period packets / 2^k × (2b)^j × (2(1-b))^(k-j)` with
//! `j ~ Binomial(k, 1/2)`: the same spread appears at every time scale (burstiness across scales, seed
//! 002 Figure 2), and `b = 0.5` is a constant rate.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Most cascade levels: 2^24 finest bins per period (about 28 minutes at 100 µs).
pub const MAX_LEVELS: u32 = 24;

/// The cascade's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BModel {
    /// Share of the busier half, 0.5 ≤ b < 1.
    pub b: f64,
    /// Splits per period.
    pub levels: u32,
    /// Finest bin, ns.
    pub bin_ns: u64,
}

impl BModel {
    /// Checks the parameters; the error says what to change.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.5..1.0).contains(&self.b) {
            return Err(format!(
                "b-model bias {} is outside [0.5, 1): 0.5 is a constant rate, larger is burstier",
                self.b
            ));
        }
        if self.levels > MAX_LEVELS {
            return Err(format!(
                "at most {MAX_LEVELS} b-model levels, not {}",
                self.levels
            ));
        }
        if self.bin_ns == 0 {
            return Err("the b-model's finest bin must be longer than 0 ns".into());
        }
        if self.bin_ns.leading_zeros() <= self.levels + 1 {
            return Err(format!(
                "a period of {} ns × 2^{} is too long: use a shorter bin or fewer levels",
                self.bin_ns, self.levels
            ));
        }
        Ok(())
    }

    /// Length of one cascade period, ns.
    pub fn period_ns(&self) -> u64 {
        self.bin_ns << self.levels
    }
}

/// Walks the cascade bin by bin and hands out packet times.
pub struct Arrivals {
    model: BModel,
    rng: ChaCha8Rng,
    /// Expected packets per period.
    per_period: f64,
    /// Share products along the current path: `mass[d]` is the expected packets of the depth-d interval.
    mass: Vec<f64>,
    /// The share the right sibling at depth d gets once the walk reaches it.
    right_share: Vec<f64>,
    /// Finest bin number within the period.
    bin: u64,
    /// Start of the current period, ns.
    period_start: u64,
    /// Rounding carried from bin to bin, so any stretch of bins is within one packet of its mass.
    carry: f64,
    /// Packets of the current bin, and how many were handed out.
    in_bin: u64,
    taken: u64,
}

impl Arrivals {
    /// Arrivals from `start_ns` at `pps` on average.
    pub fn new(model: BModel, pps: f64, start_ns: u64, rng: ChaCha8Rng) -> Self {
        let levels = model.levels as usize;
        let per_period = pps * model.period_ns() as f64 / 1e9;
        let mut a = Arrivals {
            model,
            rng,
            per_period,
            mass: vec![0.0; levels + 1],
            right_share: vec![0.0; levels + 1],
            bin: 0,
            period_start: start_ns,
            carry: 0.0,
            in_bin: 0,
            taken: 0,
        };
        a.mass[0] = per_period;
        a.descend_left(1);
        a.fill_bin();
        a
    }

    /// Expected packets per cascade period.
    pub fn per_period(&self) -> f64 {
        self.per_period
    }

    /// From depth `from` down, take the left child, flipping the coin that says which half is busier.
    fn descend_left(&mut self, from: usize) {
        let b = self.model.b;
        for d in from..self.mass.len() {
            let (left, right) = if self.rng.gen::<bool>() {
                (b, 1.0 - b)
            } else {
                (1.0 - b, b)
            };
            self.mass[d] = self.mass[d - 1] * left;
            self.right_share[d] = right;
        }
    }

    fn fill_bin(&mut self) {
        let m = self.mass[self.mass.len() - 1] + self.carry;
        let n = m.floor().max(0.0);
        self.carry = m - n;
        self.in_bin = n as u64;
        self.taken = 0;
    }

    /// Moves to the next finest bin (and period).
    fn next_bin(&mut self) {
        let levels = self.model.levels;
        self.bin += 1;
        if self.bin >> levels != 0 {
            self.bin = 0;
            self.period_start += self.model.period_ns();
            self.descend_left(1);
        } else {
            // The bins before this one ended in `t` ones: the depth-(levels - t) node turns right.
            let t = (self.bin - 1).trailing_ones() as usize;
            let d = levels as usize - t;
            self.mass[d] = self.mass[d - 1] * self.right_share[d];
            self.descend_left(d + 1);
        }
        self.fill_bin();
    }

    /// The next packet time, ns (non-decreasing).
    pub fn next_ns(&mut self) -> u64 {
        while self.taken == self.in_bin {
            self.next_bin();
        }
        // Evenly spread over the bin, each packet in the middle of its share.
        let w = self.model.bin_ns as u128;
        let offset = (2 * self.taken as u128 + 1) * w / (2 * self.in_bin as u128);
        self.taken += 1;
        self.period_start + self.bin * self.model.bin_ns + offset as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn counts(model: BModel, pps: f64, periods: u64) -> Vec<u64> {
        let mut a = Arrivals::new(model, pps, 0, ChaCha8Rng::seed_from_u64(7));
        let bins = periods << model.levels;
        let mut c = vec![0u64; bins as usize];
        loop {
            let t = a.next_ns();
            let i = t / model.bin_ns;
            if i >= bins {
                return c;
            }
            c[i as usize] += 1;
        }
    }

    #[test]
    fn half_is_a_constant_rate() {
        let m = BModel {
            b: 0.5,
            levels: 6,
            bin_ns: 1_000_000,
        };
        // 10 packets per 1 ms bin.
        let c = counts(m, 10_000.0, 3);
        assert!(c.iter().all(|&n| n == 10), "{c:?}");
    }

    #[test]
    fn every_period_holds_its_packets_and_halves_split_by_b() {
        let m = BModel {
            b: 0.75,
            levels: 4,
            bin_ns: 1_000_000,
        };
        // 16 ms periods of 16000 packets: halves 12000/4000, quarters 9000/3000 or 3000/1000...
        let c = counts(m, 1e6, 5);
        for p in c.chunks(16) {
            assert_eq!(p.iter().sum::<u64>(), 16_000);
            let halves = [p[..8].iter().sum::<u64>(), p[8..].iter().sum::<u64>()];
            let mut h = halves;
            h.sort();
            assert!(
                h[0].abs_diff(4000) <= 1 && h[1].abs_diff(12000) <= 1,
                "{halves:?}"
            );
            // Every finest bin is 1000 × a product of four factors 1.5 or 0.5.
            for &n in p {
                let ok = (0..=4).any(|j| {
                    let e = 1000.0 * 1.5f64.powi(j) * 0.5f64.powi(4 - j);
                    (n as f64 - e).abs() <= 1.0
                });
                assert!(ok, "bin of {n} packets is no product of the shares");
            }
        }
    }

    #[test]
    fn checks_say_what_to_change() {
        let bad = BModel {
            b: 1.0,
            levels: 4,
            bin_ns: 1,
        };
        assert!(bad.validate().unwrap_err().contains("0.5"));
        let deep = BModel {
            b: 0.6,
            levels: 30,
            bin_ns: 1,
        };
        assert!(deep.validate().unwrap_err().contains("levels"));
    }
}
