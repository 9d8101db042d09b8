//! The client-facing HTTP layer: the accept loop and connection limits (`server`, `conn`),
//! the serving threads (`cores`),
//! the HTTP/1 framing guard (`sniff`), path hygiene (`path`), the one header filter table
//! for both directions (`headers`), the response body every answer is written with
//! (`body`) and hyper's HTTP/1 header-read timer (`timer`).
pub mod body;
pub mod body_limit;
pub mod conn;
pub mod cores;
pub mod headers;
pub mod path;
pub mod pieces;
pub mod server;
pub mod sniff;
pub mod spread;
pub mod timer;
