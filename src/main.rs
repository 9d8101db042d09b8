//! switchyard binary.
fn main() {}
