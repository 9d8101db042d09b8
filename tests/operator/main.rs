//! The operator's day end to end (R2, R12, R13): config errors and the command line, reloads and
//! what they report, metrics against README and the dashboard, the audit log of channel
//! state, storage retention and a full disk. One module of the `gateway` test binary.
#![allow(dead_code)]

use crate::support;

mod binary;

mod audit_log;
mod cli;
mod metrics_memory;
mod metrics_truth;
#[cfg(unix)]
mod reload;
#[cfg(unix)]
mod reload_status;
mod status_page;
mod storage;
