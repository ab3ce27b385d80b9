//! The health checker: pings every master and replica on an interval (with
//! `mysql_async`) and marks hosts up or down in their pools.
