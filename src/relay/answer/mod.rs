//! The answer: what an exchange produced, to the client — a JSON answer read whole
//! (`whole`), a stream primed to its commit point and pumped (`stream`, the throughput floor
//! `floor`, `resume` after a cut), other bodies (`passthrough`), a successful attempt's
//! bookkeeping (`commit`), the response from an answer or the last failure (`respond`), and
//! the request's record at the end (`finish`).

pub(in crate::relay) mod commit;
pub mod finish;
pub mod floor;
pub mod passthrough;
pub mod respond;
pub mod resume;
pub mod stream;
pub(in crate::relay) mod whole;
