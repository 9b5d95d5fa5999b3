//! Reading a plan's TOML: the sections, their keys and the factors' levels (checked in validate).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{
    invalid, AnovaSpec, Count, CustomMethod, DiskSpec, Factor, InterfaceSpec, Plan, PlanError,
    Quick, Sampling, SearchSpec, Setup, FACTORS,
};

/// A level as written: numbers as TOML prints them, strings as they are.
fn level_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        _ => None,
    }
}

fn get_u64(t: &toml::Table, key: &str, section: &str) -> Result<Option<u64>, PlanError> {
    match t.get(key) {
        None => Ok(None),
        Some(toml::Value::Integer(i)) if *i >= 0 => Ok(Some(*i as u64)),
        Some(v) => Err(invalid(format!(
            "[{section}] {key} = {v}: expected a whole number ≥ 0"
        ))),
    }
}

/// Seconds: a number ≥ 0 (whole or not).
fn get_secs(t: &toml::Table, key: &str, section: &str) -> Result<Option<f64>, PlanError> {
    match t.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_float()
            .or(v.as_integer().map(|i| i as f64))
            .filter(|s| s.is_finite() && *s >= 0.0 && *s <= 86_400.0)
            .map(Some)
            .ok_or_else(|| {
                invalid(format!(
                    "[{section}] {key} = {v}: expected seconds from 0 to 86400"
                ))
            }),
    }
}

pub(super) fn get_str(
    t: &toml::Table,
    key: &str,
    section: &str,
) -> Result<Option<String>, PlanError> {
    match t.get(key) {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(invalid(format!(
            "[{section}] {key} = {v}: expected a string"
        ))),
    }
}

fn table<'a>(
    root: &'a toml::Table,
    key: &str,
    parent: &str,
) -> Result<Option<&'a toml::Table>, PlanError> {
    match root.get(key) {
        None => Ok(None),
        Some(toml::Value::Table(t)) => Ok(Some(t)),
        Some(_) => Err(invalid(format!(
            "{parent}{key} must be a table ([{parent}{key}])"
        ))),
    }
}

pub(super) fn check_keys(
    t: &toml::Table,
    allowed: &[&str],
    section: &str,
) -> Result<(), PlanError> {
    for k in t.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(invalid(format!(
                "unknown key `{k}` in {section}; known keys: {}",
                allowed.join(", ")
            )));
        }
    }
    Ok(())
}

fn parse_factors(t: &toml::Table, section: &str) -> Result<Vec<Factor>, PlanError> {
    let mut out = Vec::new();
    for (name, v) in t {
        if !FACTORS.contains(&name.as_str()) {
            return Err(invalid(format!(
                "unknown factor `{name}` in [{section}]; known factors: {}",
                FACTORS.join(", ")
            )));
        }
        let toml::Value::Array(items) = v else {
            return Err(invalid(format!(
                "[{section}] {name} must be a list of levels, e.g. {name} = [{}]",
                example_levels(name)
            )));
        };
        if items.is_empty() {
            return Err(invalid(format!(
                "[{section}] {name} has no levels: give at least one, e.g. {name} = [{}]",
                example_levels(name)
            )));
        }
        let mut levels = Vec::new();
        for item in items {
            let l = level_text(item).ok_or_else(|| {
                invalid(format!(
                    "[{section}] {name}: level {item} must be a string or a number"
                ))
            })?;
            if levels.contains(&l) {
                return Err(invalid(format!(
                    "[{section}] {name}: level `{l}` is listed twice"
                )));
            }
            levels.push(l);
        }
        out.push(Factor {
            name: name.clone(),
            levels,
        });
    }
    Ok(out)
}

fn example_levels(factor: &str) -> &'static str {
    match factor {
        "method" => "\"ringcap\", \"tcpdump\"",
        "rate_mbps" => "100, 400, \"max\"",
        "rate_pps" => "100000, \"max\"",
        "gap_ns" => "10000, 2000",
        "buffer_kib" => "1024, 65536",
        "filter" => "\"none\", \"file:filters/thesis-fig6.5.txt\"",
        "apps" => "1, 2, 4",
        "load" => "\"none\", \"memcpy:25\", \"gzip:3\"",
        "snaplen" => "0, 76",
        "placement" => "\"single\", \"dual\", \"split\", \"siblings\"",
        "dist" => "\"fixed:46\", \"imix\"",
        "output" => "\"disk\", \"null\"",
        "cpu_limit" => "\"none\", 50, 10",
        "traffic" => "\"gen\", \"synth:bmodel=0.5\", \"synth:bmodel=0.8\"",
        "burst" => "\"none\", \"on=2s,off=2s,cycles=5\", \"on=1s,off=1s,cycles=3,phases=fixed:1500@max;fixed:50@max\"",
        _ => "...",
    }
}

impl Plan {
    /// Parse and validate a plan's text; `dir` is where relative filter files are looked up.
    pub fn parse(text: &str, dir: &Path) -> Result<Plan, PlanError> {
        let root: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| PlanError::Toml(e.to_string().trim_end().to_string()))?;
        check_keys(
            &root,
            &[
                "title",
                "description",
                "run",
                "factors",
                "quick",
                "report",
                "anova",
                "methods",
                "search",
                "interface",
                "disk",
            ],
            "the plan",
        )?;
        let title = get_str(&root, "title", "plan")?.unwrap_or_else(|| "Measurement plan".into());
        let description = get_str(&root, "description", "plan")?.unwrap_or_default();

        let empty = toml::Table::new();
        let run = table(&root, "run", "")?.unwrap_or(&empty);
        let mut run_keys = vec![
            "reruns",
            "packets",
            "warmup_packets",
            "disk_dir",
            "keep_files",
            "machine",
            "seed",
            "samples",
            "sample_s",
            "warmup_s",
        ];
        run_keys.extend(FACTORS);
        check_keys(run, &run_keys, "[run]")?;
        let reruns = get_u64(run, "reruns", "run")?.unwrap_or(7);
        let packets = get_u64(run, "packets", "run")?.unwrap_or(1_000_000);
        let warmup_packets = get_u64(run, "warmup_packets", "run")?.unwrap_or(10_000);
        let disk_dir = get_str(run, "disk_dir", "run")?
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/tmp/ringcap-bench"));
        let keep_files = match run.get("keep_files") {
            None => false,
            Some(toml::Value::Boolean(b)) => *b,
            Some(_) => return Err(invalid("[run] keep_files must be true or false")),
        };
        let sampling = match get_u64(run, "samples", "run")? {
            None => {
                if run.contains_key("sample_s") || run.contains_key("warmup_s") {
                    return Err(invalid(
                        "[run] sample_s / warmup_s need samples = N (time-based runs: N samples of sample_s seconds)",
                    ));
                }
                None
            }
            Some(n) => Some(Sampling {
                samples: n as u32,
                sample_s: get_secs(run, "sample_s", "run")?.unwrap_or(10.0),
                warmup_s: get_secs(run, "warmup_s", "run")?.unwrap_or(10.0),
            }),
        };
        let seed = get_u64(run, "seed", "run")?.unwrap_or(1);
        let machine = get_str(run, "machine", "run")?.filter(|m| !m.trim().is_empty());
        let mut fixed = Vec::new();
        for (k, v) in run {
            if FACTORS.contains(&k.as_str()) {
                let l = level_text(v).ok_or_else(|| {
                    invalid(format!("[run] {k} = {v}: expected a string or a number"))
                })?;
                fixed.push((k.clone(), l));
            }
        }

        let factors = match table(&root, "factors", "")? {
            Some(t) => parse_factors(t, "factors")?,
            None => Vec::new(),
        };

        let mut methods = BTreeMap::new();
        if let Some(t) = table(&root, "methods", "")? {
            for (name, v) in t {
                let toml::Value::Table(m) = v else {
                    return Err(invalid(format!(
                        "[methods] {name} must be a table: [methods.\"{name}\"] command = \"...\""
                    )));
                };
                let sec = format!("[methods.\"{name}\"]");
                check_keys(m, &["command", "ready", "count", "ext"], &sec)?;
                let command = get_str(m, "command", &sec)?.ok_or_else(|| {
                    invalid(format!(
                        "{sec} needs command = \"...\", e.g. \"tcpdump -i {{if}} -w {{out}}\""
                    ))
                })?;
                let count = match get_str(m, "count", &sec)?.as_deref() {
                    None | Some("file") => Count::File,
                    Some("stderr") => Count::Stderr,
                    Some(o) => {
                        return Err(invalid(format!(
                            "{sec} count = \"{o}\": expected \"file\" or \"stderr\""
                        )))
                    }
                };
                methods.insert(
                    name.clone(),
                    CustomMethod {
                        command,
                        ready: get_str(m, "ready", &sec)?.unwrap_or_default(),
                        count,
                        ext: get_str(m, "ext", &sec)?.unwrap_or_else(|| "pcap".into()),
                    },
                );
            }
        }

        let quick = match table(&root, "quick", "")? {
            None => None,
            Some(q) => {
                check_keys(
                    q,
                    &[
                        "reruns",
                        "packets",
                        "warmup_packets",
                        "search_steps",
                        "disk_write_mib",
                        "samples",
                        "sample_s",
                        "warmup_s",
                        "factors",
                    ],
                    "[quick]",
                )?;
                let qf = match table(q, "factors", "quick.")? {
                    Some(t) => parse_factors(t, "quick.factors")?,
                    None => Vec::new(),
                };
                for f in &qf {
                    if !factors.iter().any(|p| p.name == f.name) {
                        return Err(invalid(format!(
                            "[quick.factors] {} is not a factor of the plan's [factors]; --quick can only change the levels of existing factors",
                            f.name
                        )));
                    }
                }
                Some(Quick {
                    reruns: get_u64(q, "reruns", "quick")?.map(|v| v as u32),
                    packets: get_u64(q, "packets", "quick")?,
                    warmup_packets: get_u64(q, "warmup_packets", "quick")?,
                    search_steps: get_u64(q, "search_steps", "quick")?.map(|v| v as u32),
                    disk_write_mib: get_u64(q, "disk_write_mib", "quick")?,
                    samples: get_u64(q, "samples", "quick")?.map(|v| v as u32),
                    sample_s: get_secs(q, "sample_s", "quick")?,
                    warmup_s: get_secs(q, "warmup_s", "quick")?,
                    factors: qf,
                })
            }
        };

        let anova = match table(&root, "anova", "")? {
            None => None,
            Some(a) => {
                let response =
                    get_str(a, "response", "anova")?.unwrap_or_else(|| "capture_rate".into());
                let names: Vec<String> = match a.get("factors") {
                    None => factors.iter().map(|f| f.name.clone()).collect(),
                    Some(toml::Value::Array(v)) => v
                        .iter()
                        .map(|x| x.as_str().map(str::to_string))
                        .collect::<Option<_>>()
                        .ok_or_else(|| invalid("[anova] factors must be a list of factor names"))?,
                    Some(_) => {
                        return Err(invalid("[anova] factors must be a list of factor names"))
                    }
                };
                for n in &names {
                    if !factors.iter().any(|f| &f.name == n) {
                        return Err(invalid(format!(
                            "[anova] factor `{n}` is not varied in [factors]; ANOVA needs factors with levels"
                        )));
                    }
                }
                let log = match a.get("log") {
                    None => false,
                    Some(toml::Value::Boolean(b)) => *b,
                    Some(_) => return Err(invalid("[anova] log must be true or false")),
                };
                Some(AnovaSpec {
                    response,
                    factors: names,
                    log,
                })
            }
        };

        let search = match table(&root, "search", "")? {
            None => None,
            Some(t) => {
                check_keys(t, &["loss", "steps"], "[search]")?;
                let loss = match t.get("loss") {
                    None => 0.001,
                    Some(v) => v
                        .as_float()
                        .or(v.as_integer().map(|i| i as f64))
                        .filter(|l| *l > 0.0 && *l < 1.0)
                        .ok_or_else(|| {
                            invalid("[search] loss must be a fraction between 0 and 1, e.g. 0.001 (0.1 %)")
                        })?,
                };
                let steps = get_u64(t, "steps", "search")?.unwrap_or(5);
                if !(1..=12).contains(&steps) {
                    return Err(invalid(
                        "[search] steps must be from 1 to 12 (each is one run per point)",
                    ));
                }
                let factor = ["rate_pps", "rate_mbps"]
                    .into_iter()
                    .find(|r| factors.iter().any(|f| f.name == *r))
                    .ok_or_else(|| {
                        invalid(
                            "[search] bisects the rate: vary rate_pps or rate_mbps in [factors]",
                        )
                    })?;
                Some(SearchSpec {
                    factor: factor.into(),
                    loss,
                    steps: steps as u32,
                })
            }
        };

        let disk = table(&root, "disk", "")?.map(parse_disk).transpose()?;

        let interface = table(&root, "interface", "")?
            .map(InterfaceSpec::parse)
            .transpose()?;

        let plan = Plan {
            title,
            description,
            source: text.to_string(),
            dir: dir.to_path_buf(),
            path: PathBuf::new(),
            reruns: reruns as u32,
            packets,
            warmup_packets,
            disk_dir,
            keep_files,
            seed,
            machine,
            fixed,
            factors,
            methods,
            anova,
            search,
            interface,
            disk,
            sampling,
            quick,
            filters: BTreeMap::new(),
            base: Setup::default(),
        };
        let mut plan = plan;
        plan.validate()?;
        Ok(plan)
    }
}

/// `[disk] write_mib = 1024, block_kib = [8, 64, 1024]`.
fn parse_disk(t: &toml::Table) -> Result<DiskSpec, PlanError> {
    check_keys(t, &["write_mib", "block_kib"], "[disk]")?;
    let write_mib = get_u64(t, "write_mib", "disk")?.unwrap_or(1024);
    if write_mib == 0 {
        return Err(invalid(
            "[disk] write_mib = 0: write at least 1 MiB (more than the disk's cache, e.g. 1024)",
        ));
    }
    let block_kib = match t.get("block_kib") {
        None => vec![8, 64, 1024],
        Some(toml::Value::Array(v)) if !v.is_empty() => v
            .iter()
            .map(|x| x.as_integer().filter(|k| (1..=65536).contains(k)).map(|k| k as u64))
            .collect::<Option<Vec<u64>>>()
            .ok_or_else(|| invalid("[disk] block_kib must be a list of sizes in KiB from 1 to 65536, e.g. [8, 64, 1024]"))?,
        Some(_) => {
            return Err(invalid(
                "[disk] block_kib must be a list of sizes in KiB from 1 to 65536, e.g. [8, 64, 1024]",
            ))
        }
    };
    Ok(DiskSpec {
        write_mib,
        block_kib,
    })
}
