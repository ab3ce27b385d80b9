//! Router: SQL text + topology + session context in, [`Plan`] out.
//! Pure: no sockets, no clocks, randomness only through [`Placement`].

pub mod plan;

pub use plan::*;

// TODO(helper): hints, planner (route()), rewrite, tests.
