//! One request, from the entry to the last byte, in the order it happens:
//!
//! - `entry` (with `auth`, `lookup`, `local`): request id, path, auth, body, routes — or a
//!   local answer — and the request's immutable `context`;
//! - `attempt`: the loop — `plan`, `admit`, then per step `exchange`, classify, act;
//! - `exchange`: one upstream exchange (request side, send, answer side); `hedge`: a late
//!   attempt raced against the next target (R19.3);
//! - `whole`: a JSON answer read whole and inspected;
//! - `translated`: an attempt on a channel of another wire format (R16.1);
//! - `stream`: a stream primed to its commit point, committed and pumped; `passthrough`:
//!   other bodies (`floor`: the pre-commit throughput guard); `commit`: a successful attempt's answer to the client;
//! - `respond`: the client's response; `finish`: the request log and metrics at the end;
//! - `prober`: active probes of open or cooling channels (R19.2);
//! - `task`: task relay; `gateway`: the process-wide context every request sees.
pub mod admit;
pub mod attempt;
pub mod auth;
mod commit;
mod compat;
pub mod context;
pub mod entry;
pub mod estimate;
pub mod exchange;
pub mod finish;
pub mod floor;
pub mod gateway;
mod hedge;
pub mod holds;
pub mod keys;
mod local;
mod lookup;
pub mod passthrough;
pub mod plan;
pub mod prober;
pub mod respond;
pub mod resume;
pub mod stream;
pub mod task;
pub mod task_cache;
pub mod trace;
pub mod translated;
mod whole;
