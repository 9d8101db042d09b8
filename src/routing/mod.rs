//! Routing: the compiled `RouteTable`, weighted draw, attempt plans and the outcome classifier.
pub mod family;
pub mod policy;
pub mod table;
pub mod weighted;
