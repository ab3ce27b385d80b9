//! Router: SQL text + topology + session context in, [`Plan`] out.
//! Pure: no sockets, no clocks, randomness only through [`Placement`].
//!
//! [`route`] is the entry point; [`RandomPlacement`] the default placement
//! policy for object inserts that name no shard. For prepared statements,
//! [`route_prepare`] plans the PREPARE (shard keys given as `?`) and
//! [`placeholders`] finds the markers the bound values replace before each
//! execution is routed; [`split_statements`] splits a multi-statement
//! COM_QUERY into statements routed one by one.

mod hints;
mod lex;
pub mod placement;
pub mod plan;
mod planner;
mod set;
mod split;
mod text;

#[cfg(test)]
mod tests;

pub use lex::{skip_blanks_and_comments, Comment, LexError};
pub use placement::RandomPlacement;
pub use plan::*;
pub use planner::fast::{
    clear_fast_path, fast_path_hits, fast_path_templates, route_marked, set_fast_path, MarkedParam,
    MarkedPlan, MarkedRoute, MarkerValue, MAX_SEEN, MAX_TEMPLATES,
};
pub use planner::{
    is_long_value_stub, migration_table, migration_table_in, route, route_digested, route_prepare,
    route_shared, statement_digest, MigrationTable, LONG_VALUE_STUB_PREFIX, MAX_DIGEST_TEXT_BYTES,
};
pub use set::records_whole_text;
pub use split::{outline, placeholders, split_statements, Outline};
