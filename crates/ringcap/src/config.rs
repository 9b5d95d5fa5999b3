//! `ringcap capture --config FILE.toml`: a file whose keys are the long flags of `ringcap capture`.
//!
//! The file is turned into the equivalent flags and clap parses them in front of the command line, so the
//! flag definitions in cli/ stay the only list of settings, their parsers the only checks. A flag given on
//! the command line replaces the file's key (a repeatable flag replaces the file's whole list).

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::parser::ValueSource;
use clap::{ArgAction, CommandFactory};
use toml_edit::{Item, Value};

use crate::cli::Cli;
use crate::Fatal;

/// The capture flag that names the file, and the key the filter expression (the positional EXPR) has.
const FLAG: &str = "config";
const FILTER_KEY: &str = "filter";

/// The arguments of `ringcap capture --config FILE ...` with the file's keys spliced in as flags; any other
/// command line unchanged. A mistake in the file is a usage error naming the file, the line and the key.
pub fn expand(args: Vec<OsString>) -> Result<Vec<OsString>, Fatal> {
    if args.get(1).and_then(|a| a.to_str()) != Some("capture") {
        return Ok(args);
    }
    // Which flags the command line itself sets, by clap's own reading of it (interface not yet required:
    // the file may give it). A command line clap refuses anyway is left for the real parse to report.
    let Ok(given) = relaxed_capture().try_get_matches_from(&args[1..]) else {
        return Ok(args);
    };
    let Some(path) = given.get_one::<PathBuf>(FLAG).cloned() else {
        return Ok(args);
    };
    let text = read_config(&path)?;
    let keys = flags_of(&text).map_err(|e| Fatal::usage(anyhow!("{}: {e}", path.display())))?;
    let on_command_line = |id: &str| given.value_source(id) == Some(ValueSource::CommandLine);

    let mut out: Vec<OsString> = args[..2].to_vec();
    let mut filter = None;
    for k in keys {
        if k.id == FILTER_KEY {
            filter = Some(k.args);
        } else if !on_command_line(&k.id) {
            out.extend(k.args.into_iter().map(OsString::from));
        }
    }
    out.extend(args[2..].iter().cloned());
    if let Some(words) = filter.filter(|_| !on_command_line(FILTER_KEY)) {
        out.push("--".into());
        out.extend(words.into_iter().map(OsString::from));
    }
    Ok(out)
}

/// The capture command as clap sees it, with --interface optional so a partial command line parses.
fn relaxed_capture() -> clap::Command {
    // Not built yet: changing an argument of a built command leaves clap's indexes stale.
    Cli::command()
        .find_subcommand("capture")
        .expect("the capture subcommand")
        .clone()
        .mut_arg("interface", |a| a.required(false))
}

/// The file's text. It decides what a root process writes where and which key files it reads, so a file
/// others may write is refused, as sshd refuses such files; it holds no secret itself (--key and --tls-key
/// name files that are checked for mode 0600 when read).
fn read_config(path: &Path) -> Result<String, Fatal> {
    let read_err = |e: std::io::Error| {
        Fatal::usage(anyhow!("--config {}: cannot read it: {e}", path.display()))
    };
    let mut file = std::fs::File::open(path).map_err(read_err)?;
    // The mode of the file opened, not of a name that could change in between.
    let mode = file.metadata().map_err(read_err)?.permissions().mode() & 0o7777;
    if mode & 0o002 != 0 {
        return Err(Fatal::usage(anyhow!(
            "--config {}: others may write it (mode {mode:04o}): run chmod o-w {}",
            path.display(),
            path.display()
        )));
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(read_err)?;
    Ok(text)
}

/// One key of the file as the flags that say the same thing.
struct KeyFlags {
    /// The clap id of the flag (the field name), to tell whether the command line gives it too.
    id: String,
    /// `--long=value` words; for the filter key, the words of the expression.
    args: Vec<String>,
}

/// Check every key of the file against the capture flags and turn it into flags. Each key is parsed alone by
/// clap so a bad value is reported with its line; how keys combine (conflicts, requirements) is checked
/// with the whole command line.
fn flags_of(text: &str) -> Result<Vec<KeyFlags>, String> {
    let doc = toml_edit::ImDocument::parse(text).map_err(|e| e.to_string())?;
    let cmd = relaxed_capture();
    let line_of = |span: Option<std::ops::Range<usize>>| {
        span.map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .unwrap_or(0)
    };
    let mut keys = Vec::new();
    for (name, item) in doc.as_table().iter() {
        let key_span = doc.as_table().key(name).and_then(|k| k.span());
        let at = |what: String| format!("line {}: key `{name}`: {what}", line_of(key_span.clone()));
        if name == FILTER_KEY {
            let words =
                match item.as_value() {
                    Some(Value::String(s)) => vec![s.value().clone()],
                    _ => return Err(at(
                        "give the filter expression as a string, e.g. filter = \"tcp port 443\""
                            .into(),
                    )),
                };
            keys.push(KeyFlags {
                id: name.to_string(),
                args: words,
            });
            continue;
        }
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(name) && !a.is_positional());
        let Some(arg) = arg.filter(|_| !matches!(name, FLAG | "check-config" | "help" | "version"))
        else {
            return Err(at(
                "unknown key: the keys are the long flags of `ringcap capture` without the dashes \
                 (e.g. interface, write, file-size) and `filter`; see ringcap capture --help"
                    .to_string(),
            ));
        };
        let flag = format!("--{name}");
        let args = match (arg.get_action(), item) {
            (ArgAction::SetTrue, Item::Value(Value::Boolean(b))) => {
                if *b.value() {
                    vec![flag]
                } else {
                    vec![]
                }
            }
            (ArgAction::SetTrue, _) => return Err(at("give true or false".into())),
            (ArgAction::Append, Item::Value(Value::Array(list))) => list
                .iter()
                .map(|v| scalar(v).map(|s| format!("{flag}={s}")))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| at("give a list of strings or numbers".into()))?,
            (_, Item::Value(v)) => match scalar(v) {
                Some(s) => vec![format!("{flag}={s}")],
                None if matches!(arg.get_action(), ArgAction::Append) => {
                    return Err(at("give a string, a number or a list of them".into()))
                }
                None => return Err(at("give one string or number".into())),
            },
            _ => {
                return Err(at(
                    "give a value, not a table (every key is at the top level)".into(),
                ))
            }
        };
        // The flag's own parser decides; a missing partner flag or a conflict is the whole command's matter.
        if let Err(e) = cmd.clone().try_get_matches_from(
            std::iter::once("capture".to_string()).chain(args.iter().cloned()),
        ) {
            use clap::error::ErrorKind::*;
            if !matches!(e.kind(), MissingRequiredArgument | ArgumentConflict) {
                let msg = e.render().to_string();
                let first = msg
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ");
                return Err(at(first.to_string()));
            }
        }
        keys.push(KeyFlags {
            id: arg.get_id().to_string(),
            args,
        });
    }
    Ok(keys)
}

/// A TOML scalar as the text a flag would carry (true/false for on|off flags such as direct-io).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.value().clone()),
        Value::Integer(i) => Some(i.value().to_string()),
        Value::Float(f) => Some(f.value().to_string()),
        Value::Boolean(b) => Some(b.value().to_string()),
        _ => None,
    }
}

/// Arguments (after the program's own name) as one shell command line, single quotes where a word needs
/// them: what --check-config shows.
pub fn shell_line(args: &[OsString]) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:=,@%+".contains(c);
    let words = args.iter().skip(1).map(|a| {
        let a = a.to_string_lossy();
        if !a.is_empty() && a.chars().all(plain) {
            a.into_owned()
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    });
    std::iter::once("ringcap".to_string())
        .chain(words)
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a config file says, key by key (the file's key name → its flags), and which keys the command line
/// overrides: what a reload compares.
pub struct FileSettings {
    pub keys: std::collections::BTreeMap<String, Vec<String>>,
    pub overridden: std::collections::BTreeSet<String>,
}

/// Read the `--config` file of `args` (the process's command line) again, and the whole command line as it
/// now expands: the settings a SIGHUP would give, or why the file is refused.
pub fn reread(args: &[OsString]) -> Result<(FileSettings, crate::cli::CaptureArgs), String> {
    let expanded = expand(args.to_vec()).map_err(|e| format!("{:#}", e.error))?;
    let cli = <Cli as clap::Parser>::try_parse_from(&expanded)
        .map_err(|e| e.to_string().trim().to_string())?;
    let crate::cli::Command::Capture(capture) = cli.command else {
        return Err("not a capture command".into());
    };
    let path = capture
        .config
        .clone()
        .ok_or_else(|| "no --config file".to_string())?;
    let text = read_config(&path).map_err(|e| format!("{:#}", e.error))?;
    let flags = flags_of(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let given = relaxed_capture()
        .try_get_matches_from(&args[1..])
        .map_err(|e| e.to_string())?;
    let mut s = FileSettings {
        keys: Default::default(),
        overridden: Default::default(),
    };
    for k in flags {
        if given.value_source(&k.id) == Some(ValueSource::CommandLine) {
            s.overridden.insert(k.id.clone());
        }
        s.keys.insert(k.id, k.args);
    }
    Ok((s, *capture))
}
