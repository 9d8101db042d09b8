//! Routing: the compiled `RouteTable`, weighted draw, attempt plans and the outcome classifier.
pub mod backoff;
pub mod budget;
pub mod compile;
pub mod family;
pub mod latency;
pub mod outcome;
pub mod pair;
pub mod plan;
pub mod policy;
#[cfg(test)]
mod policy_prop;
pub mod table;
pub mod weighted;
#[cfg(test)]
mod weighted_prop;
