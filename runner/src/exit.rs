//! The process exit codes and the code for an error that stopped a command.

use engine::driver::DriverError;
use engine::store::StoreError;

use crate::home::LogError;

/// Exit code for a run that failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit code for an invalid plan or a usage error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code for a run paused for a person's answer or decision.
pub const EXIT_PAUSED: u8 = 3;
/// Exit code when `apply` was not confirmed.
pub const EXIT_DECLINED: u8 = 4;
/// Exit code for a run that finished, but a non-critical task failed or was skipped.
pub const EXIT_PARTIAL: u8 = 5;
/// Exit code for a failure to read or write a file (a disk full, an unreadable plan).
pub const EXIT_IO: u8 = 6;
/// Exit code for a cancelled run.
pub const EXIT_CANCELLED: u8 = 130;
/// Exit code for a run stopped by SIGTERM: its agents were stopped and it can be resumed.
pub const EXIT_TERMINATED: u8 = 143;

/// The exit code for an error that stopped a command: [`EXIT_IO`] when a file could not be
/// read or written, a run's log is damaged or the database failed, [`EXIT_USAGE`] otherwise.
pub fn exit_code_of(error: &anyhow::Error) -> u8 {
    let store = |error: &StoreError| {
        matches!(error, StoreError::Io { .. } | StoreError::Corrupt { .. } | StoreError::Database { .. })
    };
    let io = error.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some()
            || cause.downcast_ref::<StoreError>().is_some_and(store)
            || matches!(cause.downcast_ref::<DriverError>(), Some(DriverError::Store(error)) if store(error))
            || cause.downcast_ref::<LogError>().is_some_and(|log| store(&log.0))
    });
    if io { EXIT_IO } else { EXIT_USAGE }
}
