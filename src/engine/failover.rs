//! Failover: `PROMOTE REPLICA <master>` points the master's ranges at its
//! replica, in memory and in the config file (written atomically).
