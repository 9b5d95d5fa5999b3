//! SMT (hyper-threading) siblings from sysfs, for the `siblings` placement (seed 000 Fig 6.16: generator and
//! capturer on two hardware threads of one core vs on separate cores).

use std::path::Path;

/// A kernel CPU list (`0`, `0,4`, `0-1`, `2-3,6-7`) as CPU numbers in order; None if it does not parse.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.trim().split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

/// The first two hardware threads of the lowest-numbered CPU that has a sibling, from
/// `ROOT/cpuN/topology/thread_siblings_list` (ROOT is /sys/devices/system/cpu); None without SMT.
pub fn sibling_pair(root: &Path) -> Option<(usize, usize)> {
    let mut cpus: Vec<usize> = std::fs::read_dir(root)
        .ok()?
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("cpu")?
                .parse()
                .ok()
        })
        .collect();
    cpus.sort_unstable();
    cpus.into_iter().find_map(|n| {
        let text =
            std::fs::read_to_string(root.join(format!("cpu{n}/topology/thread_siblings_list")))
                .ok()?;
        match parse_cpu_list(&text)?.as_slice() {
            [a, b, ..] => Some((*a, *b)),
            _ => None,
        }
    })
}

/// This machine's sibling pair, or why there is none (the reason recorded for skipped runs).
pub fn machine_sibling_pair() -> Result<(usize, usize), String> {
    let root = Path::new("/sys/devices/system/cpu");
    sibling_pair(root).ok_or_else(|| {
        "no SMT siblings: every /sys/devices/system/cpu/cpu*/topology/thread_siblings_list names one CPU \
         (SMT off, or a VM whose vCPUs are separate cores)"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0\n"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0,4\n"), Some(vec![0, 4]));
        assert_eq!(parse_cpu_list("0-1"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("2-3,6-7"), Some(vec![2, 3, 6, 7]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    /// A sysfs tree of sample files: `lists[n]` is cpuN's thread_siblings_list.
    fn tree(name: &str, lists: &[&str]) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("lab-smt-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (n, l) in lists.iter().enumerate() {
            let d = root.join(format!("cpu{n}/topology"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("thread_siblings_list"), l).unwrap();
        }
        // Entries that are not CPUs (cpufreq, online) sit next to them in the real directory.
        std::fs::create_dir_all(root.join("cpufreq")).unwrap();
        std::fs::write(root.join("online"), "0-3\n").unwrap();
        root
    }

    #[test]
    fn sibling_pairs_from_sysfs() {
        // A 4-thread Intel laptop: thread n's sibling is n+2.
        let intel = tree("intel", &["0,2\n", "1,3\n", "0,2\n", "1,3\n"]);
        assert_eq!(sibling_pair(&intel), Some((0, 2)));
        // AMD numbering: siblings adjacent.
        let amd = tree("amd", &["0-1\n", "0-1\n", "2-3\n", "2-3\n"]);
        assert_eq!(sibling_pair(&amd), Some((0, 1)));
        // This VM's kind: every vCPU its own core.
        let vm = tree("vm", &["0\n", "1\n"]);
        assert_eq!(sibling_pair(&vm), None);
        for d in [intel, amd, vm] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
