//! Helpers of the capture-to-disk tests (`disk.rs`, `disk_space.rs`): numbered frames, the files
//! a capture wrote, small tmpfs mounts.

use super::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Frames whose payload is half random, half zero (seed 002's realistic ~50 % compressibility),
/// `seq` at bytes 42..46, lengths varying from `len` to `len + 400`.
pub fn frames(n: u32, len: usize, start: u32) -> Vec<Vec<u8>> {
    let mut x = 0x2545_f491_4f6c_dd1du64 ^ u64::from(start);
    (start..start + n)
        .map(|i| {
            let mut f = frame(i, 1000 + (i % 5) as u16, 9, len + (i as usize * 37) % 401);
            let payload = 46..f.len();
            let half = payload.start + payload.len() / 2;
            for b in &mut f[payload.start..half] {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            f
        })
        .collect()
}

pub fn seq_of(data: &[u8]) -> u32 {
    u32::from_be_bytes(data[42..46].try_into().unwrap())
}

/// A summary line "N <what>".
pub fn summary_count(stderr: &str, what: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_suffix(what).and_then(|n| n.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no `{what}` line in: {stderr}"))
}

/// "drops by stage: kernel K, storage S" → (K, S).
pub fn stage_drops(stderr: &str) -> (u64, u64) {
    let l = stderr
        .lines()
        .find(|l| l.contains("drops by stage"))
        .unwrap_or_else(|| panic!("no drops line: {stderr}"));
    let num = |key: &str| -> u64 {
        let at = l.find(key).unwrap() + key.len();
        l[at..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (num("kernel"), num("storage"))
}

/// Complete ringcap files of `base` in `dir`, oldest first (hidden `.partial` ones are not listed).
pub fn files(dir: &Path, base: &str) -> Vec<PathBuf> {
    let mut v: Vec<((String, u64), PathBuf)> = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        if let Some(k) = store::parse_name(base, &name) {
            v.push((k, e.path()));
        }
    }
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// Decompresses with the standard tool when needed and counts with capinfos.
pub fn capinfos_any(path: &Path) -> u64 {
    let name = path.to_str().unwrap();
    let tool = if name.ends_with(".zst") {
        Some("zstd")
    } else if name.ends_with(".lz4") {
        Some("lz4")
    } else {
        None
    };
    let Some(tool) = tool else {
        return capinfos_count(path);
    };
    let plain = PathBuf::from(format!("{name}.plain.pcap"));
    let out = std::fs::File::create(&plain).unwrap();
    let st = Command::new(tool)
        .args(["-dc"])
        .arg(path)
        .stdout(out)
        .status()
        .unwrap();
    assert!(st.success(), "{tool} -dc {name}");
    let n = capinfos_count(&plain);
    std::fs::remove_file(plain).unwrap();
    n
}

/// Sequence numbers of every packet in the files, checking each file with capinfos too.
pub fn union_of(files: &[PathBuf]) -> Vec<u32> {
    let mut all = Vec::new();
    for f in files {
        let pkts = read_all(f);
        assert_eq!(capinfos_any(f), pkts.len() as u64, "{}", f.display());
        all.extend(pkts.iter().map(|(_, d)| seq_of(d)));
    }
    all
}

/// After a clean stop every file has been renamed into place.
pub fn assert_no_partials(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(!name.ends_with(".partial"), "leftover {name}");
    }
}

pub fn assert_exactly(seqs: &[u32], want: impl Iterator<Item = u32>) {
    let mut got = seqs.to_vec();
    got.sort_unstable();
    let want: Vec<u32> = want.collect();
    assert_eq!(got.len(), want.len(), "count");
    assert!(got == want, "every packet exactly once");
}

/// A tmpfs of `size` mounted for the test, unmounted (lazily) on drop.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn new(under: &Path, name: &str, size: &str) -> Tmpfs {
        let p = under.join(name);
        std::fs::create_dir_all(&p).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs (needs root)");
        Tmpfs(p)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

pub fn capture(tb: &testbed::Testbed, extra: &[&str]) -> std::process::Child {
    let mut args = vec!["capture", "-i", tb.rx_if.as_str()];
    args.extend_from_slice(extra);
    spawn_capture(tb, &args)
}

pub fn settle_and_stop(child: std::process::Child) -> (std::process::Output, String) {
    std::thread::sleep(Duration::from_millis(400));
    let out = stop(child, libc::SIGINT);
    let err = stderr_text(&out);
    (out, err)
}
