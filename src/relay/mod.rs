//! One request, from the entry to the last byte: the entry (`entry`, `auth`, `lookup`,
//! `local`), the attempt loop (`attempt`), one exchange (`exchange`), the stream pump and
//! its commit point (`stream`), pass-through bodies (`passthrough`), the client's response
//! (`respond`), the request's end (`finish`) and task relay (`task`); `gateway` is the
//! process-wide context.
pub mod attempt;
pub mod auth;
pub mod entry;
pub mod exchange;
pub mod finish;
pub mod gateway;
mod local;
mod lookup;
pub mod passthrough;
pub mod respond;
pub mod stream;
pub mod task;
