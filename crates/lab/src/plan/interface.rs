//! The `[interface]` section: capture on a named interface with traffic from a generator command.

use super::parse::{check_keys, get_str};
use super::{invalid, PlanError};

/// The `[interface]` section: capture on a named interface, traffic from a generator command, instead of
/// the throwaway testbed (bench::bed).
#[derive(Clone, Debug, PartialEq)]
pub struct InterfaceSpec {
    /// The capture interface.
    pub capture: String,
    /// Its network namespace (None: the host's).
    pub netns: Option<String>,
    /// Shell command that sends the packets, with {ringcap} {packets} {rate} {dist} {cpu}.
    pub generator: String,
    /// Which count is the capture rate's denominator; the other is the cross-check.
    pub offered: OfferedBy,
}

/// Who counts the offered packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OfferedBy {
    /// The capture interface's counters (packets that reached it, NIC drops included).
    Interface,
    /// The generator's report (`ringcap gen --json`'s packets).
    Generator,
}

impl InterfaceSpec {
    pub(super) fn parse(t: &toml::Table) -> Result<InterfaceSpec, PlanError> {
        check_keys(
            t,
            &["capture", "netns", "generator", "offered"],
            "[interface]",
        )?;
        let capture = get_str(t, "capture", "interface")?.ok_or_else(|| {
            invalid("[interface] needs capture = \"IF\": the interface the capturers listen on")
        })?;
        let generator = get_str(t, "generator", "interface")?.ok_or_else(|| {
            invalid(
                "[interface] needs generator = \"...\": the command that sends the packets, e.g. \
                 \"ssh gen1 ringcap gen -i eth1 -n {packets} {rate} --dist {dist} --json -q\"",
            )
        })?;
        if !generator.contains("{packets}") {
            return Err(invalid(
                "[interface] generator must send {packets} packets (the run's count): put {packets} in the command",
            ));
        }
        let offered = match get_str(t, "offered", "interface")?.as_deref() {
            None | Some("interface") => OfferedBy::Interface,
            Some("generator") => OfferedBy::Generator,
            Some(o) => {
                return Err(invalid(format!(
                    "[interface] offered = \"{o}\": expected \"interface\" (its counters) or \"generator\" (its --json report)"
                )))
            }
        };
        Ok(InterfaceSpec {
            capture,
            netns: get_str(t, "netns", "interface")?.filter(|n| !n.is_empty()),
            generator,
            offered,
        })
    }
}
