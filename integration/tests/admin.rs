//! Integration tests (issue 5): see the module docs once written.

mod common;
