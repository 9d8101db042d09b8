//! The gateway's behaviour, black-box: the real gateway (the binary, or the library's server
//! in-process) on 127.0.0.1 in front of the mock upstream, driven over real sockets. One test
//! binary, one module per area of behaviour (one link instead of one per file).

mod support;

mod affinity;
mod billing;
mod billing_real;
mod channel_options;
mod client_fixtures;
mod clients;
mod connections;
mod exposure;
mod failover;
mod fault_counting;
mod h2_upstream;
mod headers;
mod health;
mod keys;
mod limits;
mod mock_upstream;
mod model_targets;
mod non_stream;
#[path = "operator/main.rs"]
mod operator;
mod ops;
mod protocol;
mod real_traffic;
mod rechunk_prop;
mod relay;
mod responses;
mod retry_safety;
mod security;
mod stream_policy;
mod streaming;
mod tenants;
mod tls;
mod translation;
mod translation_failover;
