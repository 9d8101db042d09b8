//! One request, from the entry to the last byte, in three stages, one folder each:
//!
//! - `intake`: `entry` (with `auth`, `lookup`, `local`): request id, path, auth, body, routes
//!   — or a local answer — and the request's immutable `context`; `task`: task relay;
//! - `attempt`: the loop (`attempt/mod.rs`) — `plan`, `admit` (with `estimate`, `holds`),
//!   then per step `exchange`, classify, act; `keys`: upstream keys and their limits;
//!   `translated`, `compat`: an attempt on a channel of another wire format, and the
//!   rewrites a provider would otherwise refuse; `hedge`: a late attempt raced against the
//!   next target (R19.3);
//! - `answer`: `whole` (a JSON answer read whole), `stream` (primed to its commit point,
//!   committed and pumped; `floor`: the pre-commit throughput guard; `resume` after a cut),
//!   `passthrough` (other bodies), `commit` (a successful attempt's answer), `respond` (the
//!   client's response), `finish` (the request log and metrics at the end).
//!
//! Beside them: `gateway`, the process-wide context every request sees; `context`, one
//! request's facts; `trace`, its spans; `prober`, active probes of open or cooling channels
//! (R19.2).
pub mod answer;
pub mod attempt;
pub mod context;
pub mod gateway;
pub mod intake;
pub mod prober;
pub mod trace;
