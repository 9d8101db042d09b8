//! Routing: the compiled `RouteTable`, weighted draw, attempt plans and the outcome classifier.
pub mod backoff;
pub mod budget;
pub mod compile;
pub mod family;
pub mod plan;
pub mod policy;
pub mod table;
pub mod weighted;
#[cfg(test)]
mod policy_prop;
#[cfg(test)]
mod weighted_prop;
