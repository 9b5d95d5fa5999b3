//! The progress bar of long work over bytes (indexing, converting): one style everywhere.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `total` bytes with rate and ETA; hidden when `hidden` (quiet, JSON) or not a terminal.
pub fn bytes_bar(total: u64, hidden: bool, msg: &str) -> ProgressBar {
    let bar = if hidden {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} {msg} (eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(msg.to_string());
    bar
}

/// A bar over `total` items named `what` (e.g. "packets"), hidden as [`bytes_bar`] is.
pub fn count_bar(total: u64, hidden: bool, what: &str) -> ProgressBar {
    let bar = if hidden {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{bar:30}} {{human_pos}}/{{human_len}} {what} {{per_sec}} (eta {{eta}})"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}
