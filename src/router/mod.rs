//! Router: SQL text + topology + session context in, [`Plan`] out.
//! Pure: no sockets, no clocks, randomness only through [`Placement`].
//!
//! [`route`] is the entry point; [`RandomPlacement`] the default placement
//! policy for object inserts that name no shard.

mod hints;
pub mod placement;
pub mod plan;
mod planner;
mod set;
mod text;

#[cfg(test)]
mod tests;

pub use placement::RandomPlacement;
pub use plan::*;
pub use planner::route;
