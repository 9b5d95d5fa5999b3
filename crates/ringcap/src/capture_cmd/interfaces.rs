//! The interfaces of `-i`: repeated flags, and `any` as the list of interfaces that are up.

use capture::CaptureError;
use wire::LinkType;

/// The names to capture on, in the order given, each once; `any` stands for every interface that is up with
/// an Ethernet (or loopback) link type, as it is now.
pub fn resolve(given: &[String]) -> Result<Vec<String>, CaptureError> {
    let mut out: Vec<String> = Vec::new();
    for name in given {
        let names = if name == "any" {
            let up: Vec<String> = sys::interface_names()
                .into_iter()
                .filter(|n| {
                    sys::Interface::lookup(n).is_ok_and(|i| i.up)
                        && capture::interface_link_type(n).is_ok_and(|l| l == LinkType::Ethernet)
                })
                .collect();
            if up.is_empty() {
                return Err(CaptureError::Config(
                    "-i any: no interface is up with an Ethernet link type".into(),
                ));
            }
            up
        } else {
            vec![name.clone()]
        };
        for n in names {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    Ok(out)
}

/// The link type every interface shares (the filter is compiled once, the file has one); an interface that
/// does not exist is named in the error.
pub fn common_link_type(names: &[String]) -> Result<LinkType, CaptureError> {
    let mut common: Option<(LinkType, &str)> = None;
    for name in names {
        let lt = capture::interface_link_type(name)?;
        match common {
            None => common = Some((lt, name)),
            Some((c, first)) if c != lt => {
                return Err(CaptureError::Config(format!(
                    "{first} has link-type {} but {name} has {}: interfaces captured together must share \
                     one link type",
                    c.name(),
                    lt.name()
                )))
            }
            Some(_) => {}
        }
    }
    common
        .map(|(lt, _)| lt)
        .ok_or_else(|| CaptureError::Config("no interface given".into()))
}
