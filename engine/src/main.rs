//! fwlab-engine entry point: parse the command line, run, map errors to one
//! stderr line and exit status 2. See README.md for the CLI and JSON schema.

mod backend;
mod checksum;
mod cli;
mod conn;
mod delay_line;
mod delay_queue;
mod frame;
mod header;
mod pcap;
mod profile;
mod rate;
mod recv;
mod result;
mod send;
mod stats;
mod sys;

#[cfg(test)]
mod tests;

use clap::Parser;

fn main() {
    let parsed = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                std::process::exit(
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        2
                    } else {
                        0
                    },
                );
            }
            let text = e.to_string();
            // clap's message spans lines (e.g. the missing flags); keep it on one line.
            let line: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
                .collect();
            let line = line.join(" ");
            let line = line.trim_start_matches("error: ");
            eprintln!("fwlab-engine: error: {line} (see --help)");
            std::process::exit(2);
        }
    };
    if let Err(e) = cli::run(parsed) {
        eprintln!("fwlab-engine: error: {e}");
        std::process::exit(2);
    }
}
