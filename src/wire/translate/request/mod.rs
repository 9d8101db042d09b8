//! Requests: a client's body read into the neutral form (`from_openai`, `from_anthropic`, with
//! their message readers and the helpers of `read.rs`, `convo.rs`), and the neutral form written
//! in the upstream's format (`to_openai`, `to_anthropic`, `to_gemini`).

pub(super) mod anthropic_think;
pub(super) mod convo;
pub(super) mod from_anthropic;
pub(super) mod from_anthropic_msgs;
pub(super) mod from_openai;
pub(super) mod from_openai_msgs;
pub(super) mod read;
pub(super) mod to_anthropic;
pub(super) mod to_gemini;
pub(super) mod to_openai;
