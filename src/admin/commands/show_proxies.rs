//! `SHOW PROXIES`: every proxy registered under this proxy's config znode,
//! with the config version it runs and whether that is the document now in
//! the znode, and the fleet-wide pauses it has acked. A file-sourced proxy
//! lists only itself.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use crate::admin::answer::format_time;
use crate::admin::{AdminError, Answer};
use crate::control::process::ProxyEntry;
use crate::control::Control;

const COLUMNS: &[&str] = &[
    "id",
    "client",
    "admin",
    "metrics",
    "config_version",
    "znode_version",
    "runs_current",
    "started_at",
    "this",
    "pauses_acked",
];

/// A row per proxy, by id.
pub async fn answer(control: &Control) -> Result<Answer, AdminError> {
    let mut answer = Answer::new(COLUMNS);
    let own = &control.process.id;
    let Some(zookeeper) = &control.zookeeper else {
        let status = control.config_status();
        let entry = control.process.entry(status.version, None);
        push(&mut answer, &entry.id, Some(&entry), None, true, None);
        return Ok(answer);
    };
    let registered = zookeeper.proxies().await?;
    let mut acked: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (pause, _) in zookeeper.pause_records().await? {
        for proxy in zookeeper.acks(&pause).await?.unwrap_or_default() {
            acked.entry(proxy).or_default().push(pause.clone());
        }
    }
    for (id, entry) in &registered.entries {
        let current = entry
            .as_ref()
            .zip(registered.current_version.as_ref())
            .map(|(entry, current)| entry.config_version == *current);
        let pauses = acked.get(id).map_or_else(String::new, |ids| ids.join(", "));
        push(
            &mut answer,
            id,
            entry.as_ref(),
            current,
            id == own,
            Some(pauses),
        );
    }
    Ok(answer)
}

fn push(
    answer: &mut Answer,
    id: &str,
    entry: Option<&ProxyEntry>,
    current: Option<bool>,
    this: bool,
    pauses: Option<String>,
) {
    let yes_no = |flag: bool| if flag { "yes" } else { "no" };
    let field = |get: fn(&ProxyEntry) -> Option<String>| entry.and_then(get);
    answer.push(vec![
        id.into(),
        field(|e| e.addresses.client.clone()).into(),
        field(|e| e.addresses.admin.clone()).into(),
        field(|e| e.addresses.metrics.clone()).into(),
        field(|e| Some(e.config_version.clone())).into(),
        field(|e| e.znode_version.map(|v| v.to_string())).into(),
        current.map(yes_no).into(),
        // An entry is anyone's writing (open ACLs): a time out of range
        // shows as NULL.
        field(|e| {
            UNIX_EPOCH
                .checked_add(Duration::from_secs(e.started_at))
                .map(format_time)
        })
        .into(),
        yes_no(this).into(),
        pauses.into(),
    ]);
}
