//! The places a split runs from: this proxy ([`ThisProxy`], for the admin
//! port's `SPLIT SHARDS`), and the cutover of a config file through the
//! admin port of the proxy serving it ([`move_on_admin_port`], for
//! `shardgate fleet split --config FILE --admin HOST:PORT`).

use std::sync::Arc;

use mysql_async::prelude::Queryable;

use super::{Place, Store};
use crate::control::cutover::{MoveRequest, StepEvent};
use crate::control::Control;
use crate::ops::split::state::default_state_path;
use crate::ops::split::Login;
use crate::topology::Topology;

/// A split run by this proxy: the config in force is its routing table,
/// the state record is beside its znode (a ZooKeeper-sourced proxy) or
/// its config file, and the cutover is its own `MOVE SHARDS` (fleet-wide
/// through ZooKeeper, or its pause gate and the rewrite of its file).
pub struct ThisProxy {
    /// The proxy's control plane.
    pub control: Arc<Control>,
    /// The admin account that started the split (the pause record names it).
    pub user: String,
}

impl Place for ThisProxy {
    fn holder(&self) -> String {
        format!(
            "proxy {} (SPLIT SHARDS by {})",
            self.control.process.id, self.user
        )
    }

    async fn topology(&self) -> Result<Arc<Topology>, String> {
        Ok(self.control.engine.topology.load())
    }

    fn store(&self, fleet: &str, first: u32, last: u32) -> Result<Store, String> {
        match (&self.control.zookeeper, &self.control.config_path) {
            (Some(zookeeper), _) => Ok(Store::znode(&zookeeper.location, fleet, first, last)),
            (None, Some(config)) => Ok(Store::File(default_state_path(config, fleet, first, last))),
            (None, None) => Err(
                "this proxy has neither a config file nor a znode to keep the split's state beside"
                    .to_owned(),
            ),
        }
    }

    async fn cut_over(
        &self,
        request: &MoveRequest,
        _progress: &(dyn Fn(StepEvent<'_>) + Send + Sync),
    ) -> Result<Vec<String>, String> {
        let report = self
            .control
            .move_shards(request, &self.user)
            .await
            .map_err(|e| e.to_string())?;
        Ok(report
            .steps
            .iter()
            .map(|step| format!("{}\t{}\t{}", step.name, step.ms, step.detail))
            .collect())
    }
}

/// `MOVE SHARDS` of `request` run on the admin port at `admin` (the proxy
/// serving a config file) as `login`: its step rows (`name\tms\tdetail`),
/// or the proxy's error.
pub async fn move_on_admin_port(
    admin: &str,
    login: &Login,
    request: &MoveRequest,
) -> Result<Vec<String>, String> {
    let mut conn = login
        .connect(admin)
        .await
        .map_err(|e| format!("the admin port {admin}: {e}"))?;
    let command = request.describe();
    let rows: Result<Vec<(String, Option<u64>, String)>, _> = conn.query(&command).await;
    let _ = conn.disconnect().await;
    let rows = rows.map_err(|e| format!("{command} on the admin port {admin}: {e}"))?;
    Ok(rows
        .into_iter()
        .map(|(name, ms, detail)| {
            format!(
                "{name}\t{}\t{detail}",
                ms.map_or_else(String::new, |ms| ms.to_string())
            )
        })
        .collect())
}
