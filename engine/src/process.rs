//! How runner starts every program it runs (command agents, tools, verification commands).

use std::path::Path;
use std::process::Stdio;

use tokio::process::Command;

/// `program` with `args`, set up the way runner runs every program: the argv directly, never
/// a shell; in `workdir`; stdin, stdout and stderr piped; in its own process group, so a
/// Ctrl-C at the terminal reaches runner, which records the cancel and stops the child itself;
/// killed when its handle is dropped; and without the `hidden` environment variables (those
/// that hold API keys), so a program cannot print a key into an output.
pub fn command(program: &str, args: &[String], workdir: &Path, hidden: &[String]) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(workdir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    for variable in hidden {
        command.env_remove(variable);
    }
    command
}
