//! The data plane: client listener, request handling, the attempt loop, upstream client, SSE relay.
pub mod attempt;
pub mod auth;
pub mod body;
pub mod convert;
pub mod exchange;
pub mod finish;
pub mod gateway;
pub mod handler;
pub mod hidden;
pub mod relay;
pub mod request;
pub mod respond;
pub mod server;
pub mod sse;
pub mod task;
pub mod upstream;
pub mod usage;
