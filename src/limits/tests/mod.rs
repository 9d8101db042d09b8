//! The rate limits' test suite (R15): one file per part — the sliding window, the limiter's
//! admissions, permits and their release, upstream reset parsing, key cool-downs, the 429
//! headers per SDK — and the property tests of the window bound.

mod cooldowns;
mod headers;
mod limiter;
mod permit;
mod prop;
mod upstream;
mod window;
