//! The flags several commands share, each defined once and flattened into the commands that take it.

use clap::Args;

use super::OutputFormat;

/// `-q`: print less.
#[derive(Args, Debug, Clone, Copy)]
pub struct Quiet {
    /// No progress bar.
    #[arg(id = "quiet", short = 'q', long = "quiet")]
    pub on: bool,
}

/// `--json`: machine-readable output.
#[derive(Args, Debug, Clone, Copy)]
pub struct Json {
    /// Print the report as JSON on stdout.
    #[arg(id = "json", long = "json")]
    pub on: bool,
}

/// `-F` of the commands that write a capture file (capture, synth).
#[derive(Args, Debug, Clone, Copy)]
pub struct FileFormat {
    /// Format of the file written.
    #[arg(
        id = "format",
        short = 'F',
        long = "format",
        value_enum,
        default_value = "pcap-ns"
    )]
    pub format: OutputFormat,
}

/// `-F` of the commands that answer queries (query, serve).
#[derive(Args, Debug, Clone, Copy)]
pub struct ResultFormat {
    /// Format of the packets returned (query's -w, serve's answers), as capture's -F. Default: what
    /// `tcpdump -r FILE -w OUT` writes, pcap with the files' link type and snaplen and each record's
    /// time fields as they are, in microseconds when every file has microsecond times, else in
    /// nanoseconds (so no digit is lost).
    #[arg(id = "format", short = 'F', long = "format", value_enum)]
    pub format: Option<OutputFormat>,
}

/// `-s`: bytes kept of each packet (capture, synth).
#[derive(Args, Debug, Clone, Copy)]
pub struct Snaplen {
    /// Snapshot length: bytes kept of each packet (0 = 262144, as tcpdump). The true wire length is kept.
    #[arg(
        id = "snaplen",
        short = 's',
        long = "snaplen",
        value_name = "BYTES",
        default_value_t = 262144
    )]
    pub bytes: u32,
}

/// `-Z`: whom to become once the privileged part is done (capture, serve).
#[derive(Args, Debug, Clone)]
pub struct User {
    /// Once the privileged part is done, become USER (as tcpdump -Z). capture: once the packet sockets
    /// are open; output files are then created and rotated as USER, so its directory must be writable
    /// by USER (and --key readable). serve: once listening and the key read; the store must be readable
    /// by USER. Without -Z, root keeps only the one capability it needs (capture: CAP_DAC_OVERRIDE, to
    /// write files; serve: CAP_DAC_READ_SEARCH, to read the store); a user running a binary given
    /// `setcap cap_net_raw,cap_net_admin+ep` keeps none.
    #[arg(
        id = "user",
        short = 'Z',
        long = "relinquish-privileges",
        value_name = "USER"
    )]
    pub name: Option<String>,
}

/// `--jobs`: files worked on at once (query, serve, index). Its old spelling `-j` still works here,
/// with a warning: -j is capture's time-stamp type, as in tcpdump.
#[derive(Args, Debug, Clone, Copy)]
pub struct Jobs {
    /// Files read (query; serve: by each query) or indexed (index) at once. Default: 2 for query and
    /// serve, one per CPU for index. `-j N`, the old spelling, still works here with a warning (-j is
    /// capture's time-stamp type, as tcpdump's).
    #[arg(id = "jobs", long = "jobs", value_name = "N")]
    pub n: Option<usize>,
    /// The old spelling of --jobs.
    #[arg(
        id = "jobs_j",
        short = 'j',
        value_name = "N",
        hide = true,
        conflicts_with = "jobs",
        value_parser = deprecated_jobs
    )]
    pub old: Option<usize>,
}

/// Files read at once by query and serve unless --jobs says otherwise.
const QUERY_JOBS: usize = 2;

impl Jobs {
    /// What the command line said, if anything.
    pub fn given(&self) -> Option<usize> {
        self.n.or(self.old)
    }
}

fn deprecated_jobs(s: &str) -> Result<usize, String> {
    eprintln!(
        "ringcap: warning: `-j {s}` is the old spelling of `--jobs {s}` and will go (-j is capture's \
         time-stamp type, as in tcpdump)"
    );
    s.parse().map_err(|e| format!("{e}"))
}

// The flag structs read as their value, so the commands' code uses them as plain fields.
impl std::ops::Deref for FileFormat {
    type Target = OutputFormat;
    fn deref(&self) -> &OutputFormat {
        &self.format
    }
}

impl std::ops::Deref for ResultFormat {
    type Target = Option<OutputFormat>;
    fn deref(&self) -> &Option<OutputFormat> {
        &self.format
    }
}

impl std::ops::Deref for Snaplen {
    type Target = u32;
    fn deref(&self) -> &u32 {
        &self.bytes
    }
}

impl std::ops::Deref for User {
    type Target = Option<String>;
    fn deref(&self) -> &Option<String> {
        &self.name
    }
}

/// Query's and serve's number of files at once: --jobs, else 2.
impl std::ops::Deref for Jobs {
    type Target = usize;
    fn deref(&self) -> &usize {
        self.n.as_ref().or(self.old.as_ref()).unwrap_or(&QUERY_JOBS)
    }
}

/// `--cpus`: where the working threads run.
#[derive(Args, Debug, Clone)]
pub struct Cpus {
    /// CPUs to pin the threads to, e.g. "1" or "0,1" (round robin over the list).
    #[arg(
        id = "cpus",
        long = "cpus",
        alias = "cpu",
        value_name = "LIST",
        value_delimiter = ','
    )]
    pub list: Vec<usize>,
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use clap::{CommandFactory, Parser};

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    #[test]
    fn every_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn jobs_is_one_flag_and_j_its_old_spelling() {
        let query = |args: &[&str]| match parse(args).command {
            Command::Query(q) => *q.jobs,
            c => panic!("{c:?}"),
        };
        assert_eq!(query(&["ringcap", "query", "/d", "tcp"]), 2);
        assert_eq!(query(&["ringcap", "query", "/d", "tcp", "--jobs", "3"]), 3);
        assert_eq!(query(&["ringcap", "query", "/d", "tcp", "-j", "4"]), 4);
        assert!(Cli::try_parse_from(["ringcap", "query", "/d", "-j", "4", "--jobs", "3"]).is_err());
        match parse(&["ringcap", "index", "/d"]).command {
            Command::Index(i) => assert_eq!(i.jobs.given(), None),
            c => panic!("{c:?}"),
        }
        match parse(&[
            "ringcap",
            "serve",
            "/d",
            "--listen",
            "127.0.0.1:1",
            "-j",
            "5",
        ])
        .command
        {
            Command::Serve(s) => assert_eq!(*s.jobs, 5),
            c => panic!("{c:?}"),
        }
        // In capture -j stays tcpdump's time-stamp type.
        match parse(&["ringcap", "capture", "-i", "lo", "-j", "adapter"]).command {
            Command::Capture(c) => {
                assert!(matches!(c.time_stamp_type, TimestampTypeArg::Adapter))
            }
            c => panic!("{c:?}"),
        }
    }

    #[test]
    fn format_and_snaplen_keep_their_defaults() {
        match parse(&["ringcap", "capture", "-i", "lo"]).command {
            Command::Capture(c) => {
                assert_eq!((*c.format, *c.snaplen), (OutputFormat::PcapNs, 262144))
            }
            c => panic!("{c:?}"),
        }
        match parse(&["ringcap", "query", "/d", "tcp"]).command {
            Command::Query(q) => assert_eq!(*q.format, None),
            c => panic!("{c:?}"),
        }
        match parse(&[
            "ringcap", "serve", "/d", "--listen", "x", "-F", "pcap", "-Z", "u",
        ])
        .command
        {
            Command::Serve(s) => {
                assert_eq!(*s.format, Some(OutputFormat::Pcap));
                assert_eq!(s.user.as_deref(), Some("u"));
            }
            c => panic!("{c:?}"),
        }
        match parse(&["ringcap", "synth", "-w", "x", "-s", "96", "-F", "pcapng"]).command {
            Command::Synth(s) => assert_eq!((*s.format, *s.snaplen), (OutputFormat::Pcapng, 96)),
            c => panic!("{c:?}"),
        }
    }
}
