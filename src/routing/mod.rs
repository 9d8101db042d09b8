//! Routing: the compiled `RouteTable`, weighted draw, attempt plans and the outcome classifier.
pub mod table;
pub mod compile;
