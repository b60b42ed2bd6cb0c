//! Read-path benchmark (placeholder).

fn main() {}
