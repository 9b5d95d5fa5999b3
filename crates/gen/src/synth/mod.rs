//! Synthetic traces with the shape of real traffic, written to a file rather than sent: arrivals bursty at
//! every time scale ([`bmodel`]), many TCP and UDP flows with both directions and heavy-tailed sizes
//! ([`flows`]). `ringcap replay` (or tcpreplay) sends the file; `ringcap analyze` shows its burstiness.
//!
//! Time and content are drawn apart: the b-model says when the next packet leaves, and a flow picked at
//! random among `concurrent` open flows says which packet it is (a flow that ends is replaced by a new one),
//! so each flow's packets stay in order while the link's rate follows the cascade.

pub mod bmodel;
pub mod flows;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

pub use bmodel::{Arrivals, BModel};
pub use flows::{Direction, FlowSize};
use flows::{Flow, FlowSource, MAX_FRAME};

/// What to synthesize.
#[derive(Clone, Debug)]
pub struct SynthOptions {
    /// Trace length, ns.
    pub duration_ns: u64,
    /// Mean packets per second.
    pub pps: f64,
    /// Arrival cascade.
    pub arrivals: BModel,
    /// First cascade period starts here (ns since the epoch).
    pub start_ns: u64,
    /// Flows open at any time.
    pub concurrent: usize,
    /// Share of flows that are UDP.
    pub udp_share: f64,
    /// Response bytes per flow.
    pub flow_size: FlowSize,
    /// Seed of every random choice.
    pub seed: u64,
}

impl SynthOptions {
    /// Checks the options; the error says what to change.
    pub fn validate(&self) -> Result<(), String> {
        self.arrivals.validate()?;
        self.flow_size.validate()?;
        if !(self.pps.is_finite() && self.pps > 0.0) {
            return Err(format!("the packet rate must be above 0, not {}", self.pps));
        }
        if self.duration_ns == 0 {
            return Err("the trace must be longer than 0 s".into());
        }
        if !(1..=1_000_000).contains(&self.concurrent) {
            return Err(format!(
                "concurrent flows must be 1-1000000, not {}",
                self.concurrent
            ));
        }
        if !(0.0..=1.0).contains(&self.udp_share) {
            return Err(format!("the UDP share must be 0-1, not {}", self.udp_share));
        }
        Ok(())
    }
}

/// What was written.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SynthReport {
    pub packets: u64,
    /// Frame bytes.
    pub bytes: u64,
    pub packets_to_server: u64,
    pub packets_to_client: u64,
    pub tcp_flows: u64,
    pub udp_flows: u64,
    /// Flows that ended before the trace did (the others are cut, as in a capture).
    pub flows_completed: u64,
    /// Response bytes of the completed flows.
    pub completed_response_bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// Expected packets per cascade period.
    pub packets_per_period: f64,
    pub period_ns: u64,
}

/// Writes the trace packet by packet through `write(ts_ns, frame)`; stops at the first error it returns.
pub fn synthesize<E>(
    opts: &SynthOptions,
    mut write: impl FnMut(u64, &[u8]) -> Result<(), E>,
) -> Result<SynthReport, E> {
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let mut arrivals = Arrivals::new(
        opts.arrivals,
        opts.pps,
        opts.start_ns,
        ChaCha8Rng::seed_from_u64(rng.gen()),
    );
    let mut source = FlowSource::new(opts.udp_share, opts.flow_size, &mut rng);
    let mut r = SynthReport {
        packets_per_period: arrivals.per_period(),
        period_ns: opts.arrivals.period_ns(),
        ..SynthReport::default()
    };
    let start = |source: &mut FlowSource, rng: &mut ChaCha8Rng, r: &mut SynthReport| {
        let f = source.start(rng);
        if f.tcp {
            r.tcp_flows += 1
        } else {
            r.udp_flows += 1
        }
        f
    };
    let mut open: Vec<Flow> = (0..opts.concurrent)
        .map(|_| start(&mut source, &mut rng, &mut r))
        .collect();
    let end = opts.start_ns.saturating_add(opts.duration_ns);
    // Payload bytes stay zero: only headers are written per packet.
    let mut buf = vec![0u8; MAX_FRAME];
    loop {
        let t = arrivals.next_ns();
        if t >= end {
            break;
        }
        let i = rng.gen_range(0..open.len());
        let seg = loop {
            match open[i].next_segment() {
                Some(s) => break s,
                None => {
                    r.flows_completed += 1;
                    r.completed_response_bytes += open[i].response;
                    open[i] = start(&mut source, &mut rng, &mut r);
                }
            }
        };
        let n = open[i].emit(&seg, &mut buf);
        write(t, &buf[..n])?;
        if r.packets == 0 {
            r.first_ns = t;
        }
        r.last_ns = t;
        r.packets += 1;
        r.bytes += n as u64;
        match seg.direction {
            Direction::ToServer => r.packets_to_server += 1,
            Direction::ToClient => r.packets_to_client += 1,
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_trace_and_the_rate_is_kept() {
        let opts = SynthOptions {
            duration_ns: 2_000_000_000,
            pps: 5000.0,
            arrivals: BModel {
                b: 0.7,
                levels: 10,
                bin_ns: 100_000,
            },
            start_ns: 0,
            concurrent: 16,
            udp_share: 0.2,
            flow_size: FlowSize::default(),
            seed: 9,
        };
        let run = || {
            let mut frames = Vec::new();
            let r = synthesize::<()>(&opts, |t, f| {
                frames.push((t, f.to_vec()));
                Ok(())
            })
            .unwrap();
            (r, frames)
        };
        let (a, fa) = run();
        let (_, fb) = run();
        assert_eq!(fa, fb);
        // Whole periods (102.4 ms) hold their packets within one: 2 s holds 19 whole periods and part of one.
        assert!(a.packets.abs_diff(10_000) <= 512 + 1, "{}", a.packets);
        assert!(fa.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(a.tcp_flows > 0 && a.udp_flows > 0 && a.packets_to_client > a.packets_to_server);
    }
}
