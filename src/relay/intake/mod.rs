//! Intake: a request from its first byte to its immutable `Context` — `entry` (request id,
//! path, auth in `auth`, body, routes in `lookup`, local answers in `local`) and the task
//! relay (`task`, its cache `task_cache`).

pub mod auth;
pub mod entry;
pub(in crate::relay) mod local;
pub(in crate::relay) mod lookup;
pub mod task;
pub mod task_cache;
